// divergence_watch.h — one training process's summaries compared, as they come, with a
// reference run's of the same rank (config `reference`): the first tensor that leaves
// tolerance is reported once as the anomaly "divergence", with both values.
//
// The reference's summary table of the rank (recording/reference_table.h) is read as far
// as the run's steps need; each record of the run (a track's tensors at a step, in the
// order the track saw them) is compared with the reference's rows of the same step and
// track: each tensor with the same stream's occurrence of the same rank in the call order
// (recording/reference_diff.h). The tolerance is the first matching rule of
// reference.tolerances, else the element types' default (the looser of the pair), and
// never tighter than that of a low-precision tensor compared before it: the rounding of a
// bfloat16 layer reaches every tensor computed after it, in this step and the later ones
// (an autocast run's float32 norms carry it), so only a difference beyond that is the
// runs parting. The first divergence is thus the earliest (step, forward order) outside
// tolerance; the daemon's reports of all ranks give the earliest rank.
//
// A record waits while the reference has not reached its step (a reference still
// running): until the reference has a later step of that track (kTrackSlack steps on,
// for records that arrive late), a row kStepSlack steps on, or has ended (its process
// gone, or, on another host, its table unchanged for kQuietMs). At most
// reference.pending_mb of summaries wait; beyond that a record is not compared (counted).
// Steps the reference does not have are not compared (counted); so are tensors it did not
// track. Memory: the waiting records, and the reference's rows from the oldest step still
// wanted to the steps just read.
//
// Used by a worker's reader thread (SummaryIntake), one watch per producer. Thread
// safety: none; one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/daemon_config.h"
#include "tensorscope/recording/reference_diff.h"
#include "tensorscope/recording/reference_table.h"
#include "worker/anomaly_detector.h"

namespace tensorscope::daemon {

class DivergenceWatch {
 public:
  static constexpr int64_t kTrackSlack = 2;
  static constexpr int64_t kStepSlack = 8;
  static constexpr int64_t kQuietMs = 60000;
  static constexpr int64_t kLookEveryMs = 1000;  // for a table not there yet, or an end

  // Compares the producer of `rank` (process `pid`) with the reference at `reference` (a
  // session folder or a folder of node folders). `reported`: a divergence of this process
  // was reported before (by an earlier worker or daemon): not reported again.
  DivergenceWatch(std::string reference, int rank, int64_t pid, const ReferenceConfig& config, bool reported);

  // The run's record of `track` at `step`: the first divergence, when it is in this record
  // or in those that waited before it (at most one report per watch).
  std::vector<Anomaly> observe(const std::string& track, int64_t step, const std::vector<TensorSummary>& entries,
                               int64_t now_ms);
  // Waiting records the reference has reached since (call now and then).
  std::vector<Anomaly> poll(int64_t now_ms);
  // The producer ended: what the reference has now is compared, the rest counted.
  std::vector<Anomaly> finish(int64_t now_ms);

  // What was compared (counts of tensors): reference, table, compared, out_of_tolerance,
  // first_divergence (its step, or null), waiting (records), not_in_reference (steps it
  // does not have), only_in_run (tensors it did not track), not_reached (still waiting
  // when the producer ended), not_compared_full (over pending_mb), reference_step.
  nlohmann::json status() const;
  bool waiting() const { return !pending_.empty(); }

 private:
  struct Record {
    std::string track;
    int64_t step = 0;
    std::vector<TensorSummary> entries;
    uint64_t bytes = 0;
  };

  // Reads the reference as far as `step` needs; whether (step, track) is settled.
  bool settled(int64_t step, const std::string& track, int64_t now_ms);
  bool reference_ended(int64_t now_ms);
  void compare(const Record& r, std::vector<Anomaly>* out);
  std::vector<Anomaly> drain(int64_t now_ms, bool ending);
  recording::DiffTolerance tolerance_of(const std::string& stream, const recording::DiffTolerance& by_dtype);
  void forget_before(int64_t step);

  const std::string reference_;
  const int rank_;
  const int64_t pid_;
  const std::vector<ToleranceRule> rules_;
  const uint64_t pending_limit_;
  bool reported_;

  std::unique_ptr<recording::ReferenceTable> table_;
  int64_t next_look_ms_ = 0;
  std::string table_error_;  // the last reason the table could not be read ("" : none)
  int64_t reference_pid_ = -1;
  bool same_host_ = false;
  bool ended_ = false;  // at the last look
  bool gone_ = false;   // its process is gone (for good)
  bool ended_checked_ = false;
  int64_t ended_checked_ms_ = 0;
  bool seen_ = false;
  int64_t first_seen_ms_ = 0;  // the first record's time

  std::deque<Record> pending_;
  uint64_t pending_bytes_ = 0;
  int64_t latest_step_ = recording::ReferenceTable::kNoStep;  // of the run, compared or waiting
  // The occurrences of each stream compared at (step, track) so far (a record split in two).
  std::map<std::pair<int64_t, std::string>, std::unordered_map<std::string, size_t>> used_;
  std::unordered_map<std::string, int> rule_of_;  // stream -> index in rules_ (-1: none)
  recording::DiffTolerance floor_;                // the loosest low-precision tolerance so far

  uint64_t compared_ = 0;
  uint64_t out_of_tolerance_ = 0;
  uint64_t not_in_reference_ = 0;
  uint64_t only_in_run_ = 0;
  uint64_t not_compared_full_ = 0;
  uint64_t not_reached_ = 0;  // waiting when the producer ended
  std::optional<int64_t> first_divergence_;
};

}  // namespace tensorscope::daemon
