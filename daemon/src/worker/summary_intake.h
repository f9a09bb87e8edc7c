// summary_intake.h — what a worker does with a summary record (kSummary): checks it,
// appends it to the producer's summary table (recording/summary_table.h) and hands it
// to the producer's AnomalyDetector.
//
// Used by a worker's reader thread. A record that does not parse is refused (the caller
// counts it with the invalid records); a table that cannot be written is logged once per
// file and the anomalies are still looked for. Thread safety: one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/daemon_config.h"
#include "tensorscope/recording/append_file.h"
#include "tensorscope/shared/ring_reader.h"
#include "worker/anomaly_detector.h"

namespace tensorscope::daemon {

class SummaryIntake {
 public:
  SummaryIntake(std::string session_dir, AnomaliesConfig config)
      : session_dir_(std::move(session_dir)), config_(config) {}

  // The summaries of this record of producer `id` (process `pid`) and the anomalies it
  // shows first; false (and `why`) when the record is refused.
  bool take(uint64_t id, int64_t pid, const RecordView& view, std::vector<TensorSummary>* summaries,
            std::vector<Anomaly>* anomalies, std::string* why);
  void finish_producer(uint64_t id) { producers_.erase(id); }

 private:
  struct Producer {
    explicit Producer(AnomaliesConfig config) : detector(config) {}
    AnomalyDetector detector;
    std::optional<recording::AppendFile> table;
    bool table_failed = false;  // a failure was logged (once per producer)
  };

  const std::string session_dir_;
  const AnomaliesConfig config_;
  std::map<uint64_t, Producer> producers_;
};

}  // namespace tensorscope::daemon
