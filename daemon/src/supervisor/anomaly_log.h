// anomaly_log.h — the session's anomalies (what the workers' detectors flagged in the
// per-step summaries): appended to <session>/anomalies.jsonl as they come, logged once
// each, and kept for `tensorscope status`.
//
// Used by the supervisor, which hears them from every worker, so one file holds every
// rank's. The file's first line is kAnomalyLogHeader (a JSON object naming the format);
// each later line is one anomaly (worker/anomaly_detector.h: type, step, rank, pid,
// track, stream, kind, message, details), whole lines only (AppendFile).
// Thread safety: one thread (the supervisor's loop).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/recording/append_file.h"

namespace tensorscope::daemon {

inline constexpr char kAnomalyLogHeader[] = R"({"tensorscope":"anomalies","version":1})";

class AnomalyLog {
 public:
  static constexpr size_t kKept = 1000;  // for status; the file has them all

  explicit AnomalyLog(std::string session_dir) : session_dir_(std::move(session_dir)) {}

  // One anomaly from a worker; a malformed one is logged and dropped.
  void add(const nlohmann::json& anomaly);

  // {"count", "first_non_finite" (the earliest step's, lowest rank first; null when
  // none), "recent" (the last 20)}.
  nlohmann::json status() const;

  std::string path() const { return session_dir_ + "/anomalies.jsonl"; }

 private:
  const std::string session_dir_;
  std::optional<recording::AppendFile> file_;
  bool file_failed_ = false;
  uint64_t count_ = 0;
  std::vector<nlohmann::json> kept_;
  nlohmann::json first_non_finite_;  // null until one
};

}  // namespace tensorscope::daemon
