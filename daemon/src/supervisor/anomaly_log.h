// anomaly_log.h — the session's anomalies (what the workers' detectors flagged in the
// per-step summaries): appended to <session>/anomalies.jsonl as they come, logged once
// each, and kept for `tensorscope status`.
//
// Used by the supervisor, which hears them from every worker, so one file holds every
// rank's. The file's first line is kAnomalyLogHeader (a JSON object naming the format);
// each later line is one anomaly (worker/anomaly_detector.h: type, step, rank, pid,
// track, stream, kind, message, details), whole lines only (AppendFile). With
// export.tensorboard, each also goes to TensorBoard as text.
// A restarted daemon reads the file back first (read_back, at most its last
// kReadBackBytes): status() and the page go on naming the run's first NaN, and an anomaly a
// producer already had (its first non-finite value; per stream its explosion, its dead
// units), reported again by a detector that started over, is not added twice.
// Thread safety: one thread (the supervisor's loop).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/recording/anomaly_firsts.h"
#include "config/daemon_config.h"
#include "tensorscope/recording/append_file.h"
#include "tensorscope/recording/tensorboard_events.h"

namespace tensorscope::daemon {

inline constexpr char kAnomalyLogHeader[] = R"({"tensorscope":"anomalies","version":1})";

class AnomalyLog {
 public:
  static constexpr size_t kKept = 1000;  // for status; the file has them all

  static constexpr uint64_t kReadBackBytes = 16ull << 20;

  explicit AnomalyLog(std::string session_dir) : session_dir_(std::move(session_dir)) {}
  // Each new anomaly also to TensorBoard (export.tensorboard): the run "anomalies" of
  // <session>/tensorboard/, as text with a link to the live page at `config.live_url`
  // (recording/tensorboard_export.h); `session` names the session in the text without one.
  void export_to_tensorboard(const ExportConfig& config, std::string session);
  // The live page the daemon serves (its address; the token is left out of the links):
  // the exports' links go there unless export.live_url names another.
  void link_to_live_page(const std::string& url);

  // The anomalies an earlier daemon of the session wrote; how many were read (none when
  // there is no file).
  size_t read_back();

  // One anomaly from a worker; a malformed one is logged and dropped, one already had
  // (the same type, rank, pid and, but for a first non-finite value, stream) is dropped.
  void add(const nlohmann::json& anomaly);

  // {"count", "first_non_finite" (the earliest step's, lowest rank first; null when
  // none), "first" ({type: the earliest of that type}), "recent" (the last 20)}.
  nlohmann::json status() const;
  // The first kKept anomalies (each had once), for what the output budget keeps.
  const std::vector<nlohmann::json>& kept() const { return kept_; }

  std::string path() const { return session_dir_ + "/anomalies.jsonl"; }

 private:
  // What makes an anomaly the same as one already had ("" when it is malformed).
  static std::string identity(const nlohmann::json& anomaly);
  // Counts and keeps it; false when it was had already.
  bool note(const nlohmann::json& anomaly);

  const std::string session_dir_;
  std::set<std::string> had_;
  std::optional<recording::AppendFile> file_;
  bool file_failed_ = false;
  std::optional<ExportConfig> export_;  // (export.tensorboard on)
  std::string session_;
  std::optional<recording::TensorBoardEvents> events_;
  bool events_failed_ = false;
  uint64_t count_ = 0;
  std::vector<nlohmann::json> kept_;
  recording::AnomalyFirsts firsts_;
};

}  // namespace tensorscope::daemon
