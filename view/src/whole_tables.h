// whole_tables.h — the whole tensors of sharded runs, as the live view's overview shows
// them: the rows of DTensor parts (FSDP2's parameters and gradients, a tensor-parallel
// layer's weights) that every session's summary tables hold, merged per job
// (recording/job_groups.h: the ranks of one run, on one node or many, apart from other
// runs in the same parent folder) into the whole tensor's rows (recording/shard_merge.h)
// as the tables grow, one OverviewHistory per job.
//
// Used by the view server on its network thread: refresh() reads every session's tables
// (SummaryTables::refresh, which it feeds), overview() answers with the jobs' heatmaps
// beside the ranks'. Bounded: the mergers' open parts (ShardMerger::kMaxPendingRows per
// job), the histories as SummaryTables' (the first kMaxJobs jobs with sharded rows are
// merged; the rows of later ones are counted in jobs_left_out()).
// Thread safety: none; one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "summary_tables.h"
#include "tensorscope/recording/job_groups.h"
#include "tensorscope/recording/overview_history.h"
#include "tensorscope/recording/shard_merge.h"

namespace tensorscope::view {

class WholeTables {
 public:
  static constexpr size_t kMaxJobs = 8;  // each history at most ~25 MiB (OverviewHistory's bounds)

  // Reads what the sessions' tables gained (each refreshed once, its new tables grouped
  // into jobs first), merging the parts of each job's sharded tensors.
  void refresh(const std::vector<SummaryTables*>& sessions);

  // [{"job", "ranks" (the job's ranks with tables), "rows", "first_steps", "last_steps",
  // "steps_per_column", "values", "nonfinite", "left_out": {"partial", "incomplete",
  // "conflicting", "compacted"}}]: one heatmap per job with whole rows of `metric`, as
  // SummaryTables::overview's tables (the cells appended to `shown`), rows merged when
  // there are more than kMaxAnswerCells / jobs / max_columns.
  nlohmann::json overview(size_t metric, size_t max_columns, std::vector<float>* shown = nullptr) const;
  bool has_rows(size_t metric) const;
  // Sharded rows not merged: their job came past kMaxJobs.
  uint64_t jobs_left_out() const { return jobs_left_out_; }

 private:
  struct Job {
    recording::ShardMerger merger;
    recording::OverviewHistory history{1};  // only whole_run() is shown
  };

  recording::JobGroups groups_;
  std::map<size_t, Job> jobs_;                                 // by job id, those with sharded rows
  std::map<std::tuple<size_t, int, int64_t>, size_t> job_of_;  // (source, rank, pid) -> job id
  uint64_t jobs_left_out_ = 0;                                 // sharded rows of jobs past kMaxJobs
};

}  // namespace tensorscope::view
