// whole_tables.cc — see whole_tables.h.
#include "whole_tables.h"

#include <algorithm>
#include <string>

namespace tensorscope::view {

void WholeTables::refresh(const std::vector<SummaryTables*>& sessions) {
  // The tables that appeared, in every session, grouped into jobs together (in the order
  // their processes registered).
  std::vector<std::tuple<std::string, int, int64_t>> found;
  std::vector<size_t> source_of;
  for (size_t i = 0; i < sessions.size(); ++i) {
    sessions[i]->discover();
    for (const auto& [rank, pid] : sessions[i]->tables()) {
      if (job_of_.count({i, rank, pid}) != 0) continue;
      found.emplace_back(sessions[i]->dir(), rank, pid);
      source_of.push_back(i);
    }
  }
  const std::vector<size_t> jobs = recording::group_producers(found, &groups_);
  for (size_t k = 0; k < found.size(); ++k) {
    job_of_[{source_of[k], std::get<1>(found[k]), std::get<2>(found[k])}] = jobs[k];
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    SummaryTables* session = sessions[i];
    sessions[i]->refresh(16u << 20, [this, i, session](int rank, int64_t pid, const recording::SummaryTableRow& row) {
      auto known = job_of_.find({i, rank, pid});
      if (known == job_of_.end()) {  // a table that appeared since the grouping above
        const auto job = recording::group_producers({{session->dir(), rank, pid}}, &groups_);
        known = job_of_.emplace(std::make_tuple(i, rank, pid), job[0]).first;
      }
      const size_t id = known->second;
      auto job = jobs_.find(id);
      if (job == jobs_.end()) {
        if (jobs_.size() >= kMaxJobs) {
          ++jobs_left_out_;
          return;
        }
        job = jobs_.try_emplace(id).first;
      }
      job->second.merger.add(row);
      for (const recording::SummaryTableRow& whole : job->second.merger.take_whole()) {
        job->second.history.observe(whole.step, {whole.summary});
      }
    });
  }
}

bool WholeTables::has_rows(size_t metric) const {
  return std::any_of(jobs_.begin(), jobs_.end(), [metric](const auto& j) { return j.second.history.has_rows(metric); });
}

nlohmann::json WholeTables::overview(size_t metric, size_t max_columns, std::vector<float>* shown) const {
  nlohmann::json out = nlohmann::json::array();
  size_t shown_jobs = 0;
  for (const auto& [id, job] : jobs_) shown_jobs += job.history.has_rows(metric) ? 1 : 0;
  max_columns = std::max<size_t>(1, max_columns);
  const size_t max_rows =
      std::max<size_t>(1, SummaryTables::kMaxAnswerCells / max_columns / std::max<size_t>(1, shown_jobs));
  for (const auto& [id, job] : jobs_) {
    if (!job.history.has_rows(metric)) continue;
    nlohmann::json table =
        grid_json(recording::fit_overview_grid(job.history.whole_run(metric), max_rows, max_columns), shown);
    const recording::ShardMerger::LeftOut left = job.merger.left_out();
    table["job"] = id;
    table["ranks"] = groups_.ranks(id);
    table["left_out"] = {{"partial", left.partial},
                         {"incomplete", left.incomplete},
                         {"conflicting", left.conflicting},
                         {"compacted", left.compacted}};
    out.push_back(std::move(table));
  }
  return out;
}

}  // namespace tensorscope::view
