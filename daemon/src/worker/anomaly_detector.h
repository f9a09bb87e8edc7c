// anomaly_detector.h — what a worker flags in one producer's per-step summaries: the
// first non-finite value, explosions, dead units (config `anomalies`).
//
// Used by a worker's reader thread, one detector per producer (a rank's process). It
// sees each summary record once, in step order as the producer sent them, and reports
// each anomaly once: the first non-finite value of the producer (the earliest summarised
// step with a NaN or Inf, naming the first tensor in the order the track saw them:
// forward outputs, then gradients), and per stream its first explosion (L2 norm above
// explosion_factor x the median of its last explosion_window norms, once half of them
// are known, with an RMS of at least explosion_min_rms, and not a level it had already
// while the baseline was shorter) and its dead units
// (an activation with a fraction of zeros >= dead_fraction for dead_steps steps in a row).
// Memory is bounded: at most kMaxStreams streams are followed.
// Thread safety: one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/daemon_config.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::daemon {

struct Anomaly {
  std::string type;  // "non_finite", "explosion", "dead_units"
  int64_t step = 0;
  int rank = 0;
  int64_t pid = 0;
  std::string track;    // the record's track
  std::string stream;   // the tensor's stream
  std::string kind;     // "activation", "gradient", ...
  std::string message;  // one sentence for the log and the page
  // counts and values behind it, and "order": the tensor's place in its record (forward order)
  nlohmann::json details = nlohmann::json::object();

  nlohmann::json to_json() const;
};

class AnomalyDetector {
 public:
  static constexpr size_t kMaxStreams = 65536;

  explicit AnomalyDetector(AnomaliesConfig config) : config_(config) {}

  // The anomalies first seen in this record of `track` at `step`.
  std::vector<Anomaly> observe(const std::string& track, int64_t step, int rank, int64_t pid,
                               const std::vector<TensorSummary>& entries);

 private:
  struct Stream {
    std::deque<double> norms;  // the last explosion_window finite norms
    int64_t dead_run = 0;      // summarised steps in a row with zeros >= dead_fraction
    bool exploded = false;     // reported
    bool early_high = false;   // above the limit since before the baseline was long enough
    bool dead = false;         // reported
  };

  Anomaly base(const char* type, const std::string& track, int64_t step, int rank, int64_t pid,
               const TensorSummary& s) const;
  void check_explosion(Stream& st, const TensorSummary& s, Anomaly proto, std::vector<Anomaly>* out);
  void check_dead(Stream& st, const TensorSummary& s, Anomaly proto, std::vector<Anomaly>* out);

  const AnomaliesConfig config_;
  std::unordered_map<std::string, Stream> streams_;
  bool non_finite_reported_ = false;
};

}  // namespace tensorscope::daemon
