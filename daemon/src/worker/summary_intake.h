// summary_intake.h — what a worker does with a summary record (kSummary): checks it,
// appends it to the producer's summary table (recording/summary_table.h) and hands it
// to the producer's AnomalyDetector.
//
// A table that passes record.summary_table_max_bytes is compacted
// (recording/summary_compaction.h) on a thread of its own while lines go on being
// appended: the thread writes the compacted copy of what the table held when it started
// beside it (<table>.compacting-<pid>-<n>), aiming at three fifths of the limit; the next record
// appends what came meanwhile to the copy and renames it over the table. Readers see the
// table replaced by a shorter one. Steps at which anomalies of the producer's process
// were reported (this daemon's, and an earlier one's, read from anomalies.jsonl) are kept
// whole. Records that come faster than compactions run (never at a training's pace: a
// compaction reads tens of MB a second) wait for one past twice the limit. When a
// producer ends, a compaction under way, or one that leaves its table within the limit,
// goes on in the background and is finished by a later record or the intake's end.
// A table replaced by someone else (a second producer of the same process, on another
// worker) is opened again before the next append; a compaction of the replaced one is
// given up.
// A producer with a reference run (set_reference) has its summaries compared with the
// reference's as they come (divergence_watch.h); the first divergence joins its anomalies.
//
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
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/append_file.h"
#include "tensorscope/recording/summary_compaction.h"
#include "tensorscope/shared/ring_reader.h"
#include "worker/anomaly_detector.h"
#include "worker/divergence_watch.h"

namespace tensorscope::daemon {

class SummaryIntake {
 public:
  SummaryIntake(std::string session_dir, AnomaliesConfig config, ReferenceConfig reference, int64_t table_max_bytes)
      : session_dir_(std::move(session_dir)),
        config_(config),
        reference_(std::move(reference)),
        table_max_bytes_(table_max_bytes) {}
  ~SummaryIntake();

  // Producer `id`'s summaries are compared with the run at `reference` (a session folder,
  // or a folder of node folders), from its next record on.
  void set_reference(uint64_t id, std::string reference);

  // The summaries of this record of producer `id` (process `pid`) and the anomalies it
  // shows first; false (and `why`) when the record is refused.
  bool take(uint64_t id, int64_t pid, const RecordView& view, std::vector<TensorSummary>* summaries,
            std::vector<Anomaly>* anomalies, std::string* why);
  // The producer ended: a compaction under way is finished first; the divergence it
  // showed last (records that waited for a still-running reference).
  std::vector<Anomaly> finish_producer(uint64_t id);
  // Divergences found in records that waited for their reference (call now and then).
  std::vector<Anomaly> poll();
  // What each producer's divergence watch compared ({producer, ...status}); empty when none.
  nlohmann::json reference_status() const;

 private:
  struct Compaction {
    std::string path;  // the table
    UniqueFd fd;       // the table as the compaction found it
    uint64_t ino = 0;
    uint64_t upto = 0;  // its bytes the compaction reads
    std::string temp;   // where it writes them
    std::thread thread;
    std::atomic<bool> done{false};
    Status status;  // set before done
    recording::CompactedTable result;
  };
  struct Producer {
    explicit Producer(AnomaliesConfig config) : detector(config) {}
    AnomalyDetector detector;
    std::unique_ptr<DivergenceWatch> watch;
    std::optional<recording::AppendFile> table;
    bool table_failed = false;  // a failure was logged (once per producer)
    uint64_t table_ino = 0;     // the file `table` appends to
    uint64_t table_bytes = 0;   // its size (at open, then what was appended)
    uint64_t next_compaction_bytes = 0;
    std::set<int64_t> anomaly_steps;  // kept whole by compactions
    std::unique_ptr<Compaction> compaction;
  };

  // The table of `p` open for appending (opened again when the file was replaced).
  void open_table(uint64_t id, Producer& p, const std::string& path);
  void maybe_compact(uint64_t id, Producer& p, bool wait);
  std::unique_ptr<Compaction> start_compaction(const std::string& path, const std::set<int64_t>& keep);
  // Joins `c`, appends what came meanwhile, renames: the table's new size; none when the
  // table was replaced meanwhile (the copy is given up); or why it failed.
  StatusOr<std::optional<uint64_t>> finish(Compaction& c);
  void finish_compaction(uint64_t id, Producer& p);
  // Compactions of producers that ended, finished once done (all of them: `wait`).
  void finish_ended(bool wait);

  const std::string session_dir_;
  const AnomaliesConfig config_;
  const ReferenceConfig reference_;
  std::map<uint64_t, std::string> references_;  // set_reference's, until the first record
  const int64_t table_max_bytes_;
  std::map<uint64_t, Producer> producers_;
  std::vector<std::unique_ptr<Compaction>> ended_;  // of producers that ended
};

}  // namespace tensorscope::daemon
