// output_budget.h — a session's output within its disk budget (output_budget_mb): how
// much the session's directory holds, and which finished videos the supervisor deletes
// when it passes the budget.
//
// Policy (plan_output_budget) apart from mechanism (measure_session, and the supervisor,
// which deletes and rewrites index.json): videos go oldest first (by last step, then
// first step, then path) until the session is at nine tenths of the budget. Kept: each
// stream's newest finished video (stream, device, rank, mode and process: every stream
// can still be seen), and any video within `evidence_steps` of an anomaly of its process
// (the steps around the first NaN, an explosion: the evidence). Files that are not videos
// are not deleted (summary tables compact themselves, record.summary_table_max_bytes;
// .npy, HDF5 and statistics tables are recordings the user asked for): when what may go
// does not bring the session under the budget, the plan says so.
//
// Used by the supervisor's loop. Thread safety: plan_output_budget is a pure function;
// measure_session reads the file system.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/recording/video_index.h"

namespace tensorscope::daemon {

struct BudgetVideo {
  recording::IndexEntry entry;
  uint64_t bytes = 0;  // on disk, with its steps file
};

struct AnomalyMark {
  int rank = 0;
  int64_t pid = 0;
  int64_t step = 0;
};

struct BudgetPlan {
  std::vector<std::string> remove;  // index paths, oldest first
  uint64_t freed = 0;
  bool still_over = false;  // what may go does not bring the session under the budget
};

BudgetPlan plan_output_budget(std::vector<BudgetVideo> videos, uint64_t used, uint64_t budget,
                              const std::vector<AnomalyMark>& anomalies, int64_t evidence_steps);

// What a session directory holds on disk (allocated bytes), in all and by part.
struct SessionUsage {
  uint64_t total = 0;
  uint64_t videos = 0;      // *.mp4 and their steps files
  uint64_t summaries = 0;   // summaries/
  uint64_t recordings = 0;  // dumps/, hdf5/, stats/
  uint64_t other = 0;
  uint64_t files = 0;
  bool cut_short = false;  // more than kMaxMeasuredFiles files: the rest not counted
};
inline constexpr uint64_t kMaxMeasuredFiles = 1000000;
SessionUsage measure_session(const std::string& session_dir);

}  // namespace tensorscope::daemon
