// fuzz_view_api.cc — what a request to the live view's overview reads: the request target
// (path and query), the overview's query, and a session's summary table and anomaly file
// as the page's /api/overview answers from them. Input: the target on the first line,
// then the table's bytes, then (after a line "#anomalies") the anomaly file's.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "fuzz_target.h"
#include "summary_tables.h"
#include "tensorscope/view/request_guard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  const std::string bytes = fuzz::as_string(data, size);
  const size_t line_end = std::min(bytes.find('\n'), bytes.size());
  const std::string_view target(bytes.data(), line_end);
  std::string table = line_end < bytes.size() ? bytes.substr(line_end + 1) : std::string();
  std::string anomalies;
  if (const size_t mark = table.find("#anomalies\n"); mark != std::string::npos) {
    anomalies = table.substr(mark + 11);
    table.resize(mark);
  }

  view::OverviewQuery query;
  if (StatusOr<view::Target> t = view::parse_target(target); t.is_ok()) {
    if (t->path.empty() || t->path[0] != '/' || t->query.size() > 32) std::abort();
    if (StatusOr<view::OverviewQuery> q = view::parse_overview_query(t->query); q.is_ok()) {
      if (q->columns < view::OverviewQuery::kMinColumns || q->columns > view::OverviewQuery::kMaxColumns ||
          q->metric >= recording::kOverviewMetrics.size()) {
        std::abort();
      }
      query = *q;
    }
  }

  const std::string session = fuzz::private_dir() + "/session";
  ::mkdir(session.c_str(), 0700);
  ::mkdir((session + "/summaries").c_str(), 0700);
  fuzz::file_at("session/summaries/rank0_pid1.csv", table);
  fuzz::file_at("session/anomalies.jsonl", anomalies);
  view::SummaryTables tables(session);
  for (int i = 0; i < 64 && !tables.refresh(); ++i) {}
  const nlohmann::json answer = tables.overview(query.metric, query.columns);
  // One table: at most the columns asked for and kMaxAnswerCells cells.
  size_t cells = 0;
  for (const auto& t : answer["tables"]) {
    for (const auto& row : t["values"]) {
      if (row.size() > query.columns) std::abort();
      cells += row.size();
    }
  }
  if (cells > view::SummaryTables::kMaxAnswerCells) std::abort();
  return 0;
}
