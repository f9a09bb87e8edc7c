// summary_intake.h — what a worker does with a summary record (kSummary): checks it,
// appends it to the producer's summary table (recording/summary_table.h) and hands it
// to the producer's AnomalyDetector.
//
// A table that passes record.summary_table_max_bytes is compacted
// (recording/summary_compaction.h) on a thread of its own while lines go on being
// appended: the thread writes the compacted copy of what the table held when it started
// beside it (<table>.compacting), pass after pass until it is at most three fifths of the
// limit; the next record (or the producer's end) appends what came meanwhile to the copy
// and renames it over the table. Readers see the table replaced by a shorter one. Steps
// the producer's anomalies were reported at are kept whole. Records that come faster than
// compactions run (never at a training's pace: a compaction reads tens of MB a second)
// wait for one past twice the limit; when the producer ends, its table is left within it.
//
// Used by a worker's reader thread. A record that does not parse is refused (the caller
// counts it with the invalid records); a table that cannot be written is logged once per
// file and the anomalies are still looked for. Thread safety: one thread (compactions
// run on threads of their own, joined by this one).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/daemon_config.h"
#include "tensorscope/recording/append_file.h"
#include "tensorscope/recording/summary_compaction.h"
#include "tensorscope/shared/ring_reader.h"
#include "worker/anomaly_detector.h"

namespace tensorscope::daemon {

class SummaryIntake {
 public:
  SummaryIntake(std::string session_dir, AnomaliesConfig config, int64_t table_max_bytes)
      : session_dir_(std::move(session_dir)), config_(config), table_max_bytes_(table_max_bytes) {}
  ~SummaryIntake();

  // The summaries of this record of producer `id` (process `pid`) and the anomalies it
  // shows first; false (and `why`) when the record is refused.
  bool take(uint64_t id, int64_t pid, const RecordView& view, std::vector<TensorSummary>* summaries,
            std::vector<Anomaly>* anomalies, std::string* why);
  // The producer ended: a compaction under way is finished first.
  void finish_producer(uint64_t id);

 private:
  struct Compaction {
    uint64_t upto = 0;  // the table's bytes it compacts
    std::string temp;   // where it writes them
    std::thread thread;
    std::atomic<bool> done{false};
    Status status;  // set before done
    recording::CompactedTable result;
  };
  struct Producer {
    explicit Producer(AnomaliesConfig config) : detector(config) {}
    AnomalyDetector detector;
    std::optional<recording::AppendFile> table;
    bool table_failed = false;  // a failure was logged (once per producer)
    uint64_t table_bytes = 0;   // the table's size (at open, then what was appended)
    uint64_t next_compaction_bytes = 0;
    std::set<int64_t> anomaly_steps;  // kept whole by compactions
    std::unique_ptr<Compaction> compaction;
  };

  void maybe_compact(uint64_t id, Producer& p, bool wait);
  void finish_compaction(uint64_t id, Producer& p);

  const std::string session_dir_;
  const AnomaliesConfig config_;
  const int64_t table_max_bytes_;
  std::map<uint64_t, Producer> producers_;
};

}  // namespace tensorscope::daemon
