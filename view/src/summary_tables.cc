// summary_tables.cc — see summary_tables.h.
#include "summary_tables.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <string_view>

#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/anomaly_firsts.h"
#include "tensorscope/recording/summary_table.h"

namespace tensorscope::view {
namespace {

// The query's metric= into `metric` (left as it is without one).
Status read_metric(const std::map<std::string, std::string>& query, size_t* metric) {
  const auto m = query.find("metric");
  if (m == query.end()) return Status::ok();
  const int index = recording::overview_metric_index(m->second);
  if (index < 0) return Status::error("unknown metric");
  *metric = static_cast<size_t>(index);
  return Status::ok();
}

}  // namespace

nlohmann::json cell_json(float value) {
  if (!std::isfinite(value)) return nullptr;
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", static_cast<double>(value));
  return std::strtod(text, nullptr);
}

nlohmann::json grid_json(const recording::OverviewGrid& g, std::vector<float>* shown) {
  if (shown != nullptr) shown->insert(shown->end(), g.values.begin(), g.values.end());
  nlohmann::json values = nlohmann::json::array(), nonfinite = nlohmann::json::array();
  for (size_t r = 0; r < g.rows.size(); ++r) {
    nlohmann::json row = nlohmann::json::array(), bad = nlohmann::json::array();
    for (size_t c = 0; c < g.columns(); ++c) {
      row.push_back(cell_json(g.value(r, c)));
      bad.push_back(g.is_nonfinite(r, c) ? 1 : 0);
    }
    values.push_back(std::move(row));
    nonfinite.push_back(std::move(bad));
  }
  return {{"rows", g.rows},
          {"first_steps", g.first_steps},
          {"last_steps", g.last_steps},
          {"steps_per_column", g.steps_per_column},
          {"values", std::move(values)},
          {"nonfinite", std::move(nonfinite)}};
}

StatusOr<OverviewQuery> parse_overview_query(const std::map<std::string, std::string>& query) {
  OverviewQuery q;
  if (Status metric = read_metric(query, &q.metric); !metric) return metric;
  if (auto c = query.find("columns"); c != query.end()) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(c->second.c_str(), &end, 10);
    if (c->second.empty() || *end != '\0' || errno != 0 || v < static_cast<long>(OverviewQuery::kMinColumns) ||
        v > static_cast<long>(OverviewQuery::kMaxColumns)) {
      return Status::error("columns: an integer from " + std::to_string(OverviewQuery::kMinColumns) + " to " +
                           std::to_string(OverviewQuery::kMaxColumns));
    }
    q.columns = static_cast<size_t>(v);
  }
  if (auto t = query.find("tables"); t != query.end()) {
    q.tables.emplace();
    size_t start = 0;
    while (start <= t->second.size() && !t->second.empty()) {
      const size_t comma = std::min(t->second.find(',', start), t->second.size());
      const std::string item = t->second.substr(start, comma - start);
      unsigned long long source = 0;
      long long rank = -1, pid = -1;
      int end = 0;
      if (q.tables->size() == OverviewQuery::kMaxTablesAsked ||
          std::sscanf(item.c_str(), "%llu.%lld.%lld%n", &source, &rank, &pid, &end) != 3 ||
          static_cast<size_t>(end) != item.size() || rank < 0 || rank > 1000000 || pid < 0 || source > 100000) {
        return Status::error("tables: up to " + std::to_string(OverviewQuery::kMaxTablesAsked) +
                             " of <source>.<rank>.<pid>, comma-separated");
      }
      q.tables->emplace_back(static_cast<size_t>(source), static_cast<int>(rank), static_cast<int64_t>(pid));
      start = comma + 1;
    }
  }
  return q;
}

StatusOr<RanksQuery> parse_ranks_query(const std::map<std::string, std::string>& query) {
  RanksQuery q;
  if (Status metric = read_metric(query, &q.metric); !metric) return metric;
  if (auto st = query.find("step"); st != query.end()) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(st->second.c_str(), &end, 10);
    if (st->second.empty() || *end != '\0' || errno != 0 || v < 0) return Status::error("step: an integer >= 0");
    q.step = v;
  }
  return q;
}

std::vector<SummaryTables::RankColumn> SummaryTables::at_step(size_t metric, int64_t step, int64_t* first,
                                                              int64_t* newest) const {
  std::vector<RankColumn> out;
  for (const auto& [name, t] : tables_) {
    if (!t.history.has_rows(metric) || t.history.newest_step() < 0) continue;
    const recording::OverviewGrid run = t.history.whole_run(metric);
    if (!run.first_steps.empty()) *first = std::min(*first, run.first_steps.front());
    *newest = std::max(*newest, t.history.newest_step());
    out.push_back(RankColumn{t.rank, t.pid, t.history.at_step(metric, step)});
  }
  std::stable_sort(out.begin(), out.end(), [](const RankColumn& a, const RankColumn& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pid < b.pid;
  });
  return out;
}

nlohmann::json ranks_overview(const std::vector<const SummaryTables*>& sessions, const RanksQuery& query,
                              std::vector<float>* shown) {
  int64_t first = INT64_MAX, newest = -1;
  const int64_t asked = query.step < 0 ? INT64_MAX : query.step;
  std::vector<std::pair<size_t, SummaryTables::RankColumn>> rows;  // (source, its column)
  for (size_t i = 0; i < sessions.size(); ++i) {
    for (auto& c : sessions[i]->at_step(query.metric, asked, &first, &newest)) rows.emplace_back(i, std::move(c));
  }
  const int64_t step = std::min(asked, std::max<int64_t>(newest, 0));
  // The columns: every table's tensors, in the first table's order, then as others add them.
  std::vector<std::string> columns;
  std::map<std::string, size_t> column_of;
  for (const auto& [source, c] : rows) {
    for (const std::string& name : c.grid.rows) {
      if (column_of.emplace(name, columns.size()).second) columns.push_back(name);
    }
  }
  const size_t n = rows.size(), m = columns.size();
  std::vector<float> values(n * m, std::nanf(""));
  std::vector<uint8_t> nonfinite(n * m, 0);
  nlohmann::json ranks = nlohmann::json::array();
  int64_t steps_per_column = 1;
  for (size_t r = 0; r < n; ++r) {
    const auto& [source, c] = rows[r];
    const bool has = c.grid.columns() == 1;
    ranks.push_back({{"source", source},
                     {"rank", c.rank},
                     {"pid", c.pid},
                     {"first", has ? nlohmann::json(c.grid.first_steps[0]) : nlohmann::json(nullptr)},
                     {"last", has ? nlohmann::json(c.grid.last_steps[0]) : nlohmann::json(nullptr)}});
    if (!has) continue;
    steps_per_column = std::max(steps_per_column, c.grid.steps_per_column);
    for (size_t k = 0; k < c.grid.rows.size(); ++k) {
      const size_t col = column_of[c.grid.rows[k]];
      values[r * m + col] = c.grid.value(k, 0);
      nonfinite[r * m + col] = c.grid.is_nonfinite(k, 0) ? 1 : 0;
    }
  }
  if (shown != nullptr) shown->insert(shown->end(), values.begin(), values.end());
  std::vector<recording::RankOutlier> outliers =
      recording::rank_outliers(values, nonfinite, n, m, recording::kOverviewMetrics[query.metric].log_scale);
  // Past kMaxAnswerCells, neighbouring tensors merge into their largest value (a NaN/Inf
  // anywhere kept), named after the first and "+k"; the outliers, found first, follow.
  if (n > 0 && n * m > SummaryTables::kMaxAnswerCells) {
    const size_t most = std::max<size_t>(1, SummaryTables::kMaxAnswerCells / n);
    const size_t block = (m + most - 1) / most, merged = (m + block - 1) / block;
    std::vector<float> v(n * merged, std::nanf(""));
    std::vector<uint8_t> bad(n * merged, 0);
    for (size_t r = 0; r < n; ++r) {
      for (size_t k = 0; k < m; ++k) {
        float& into = v[r * merged + k / block];
        const float x = values[r * m + k];
        if (!std::isnan(x) && !(x <= into)) into = x;
        bad[r * merged + k / block] |= nonfinite[r * m + k];
      }
    }
    std::vector<std::string> names;
    for (size_t j = 0; j < merged; ++j) {
      const size_t count = std::min(block, m - j * block);
      names.push_back(columns[j * block] + (count > 1 ? " +" + std::to_string(count - 1) : ""));
    }
    for (auto& o : outliers) o.column /= block;
    outliers.erase(std::unique(outliers.begin(), outliers.end(),
                               [](const auto& a, const auto& b) { return a.rank == b.rank && a.column == b.column; }),
                   outliers.end());
    values = std::move(v);
    nonfinite = std::move(bad);
    columns = std::move(names);
  }
  const size_t shown_columns = columns.size();
  nlohmann::json value_rows = nlohmann::json::array(), bad_rows = nlohmann::json::array();
  for (size_t r = 0; r < n; ++r) {
    nlohmann::json row = nlohmann::json::array(), bad = nlohmann::json::array();
    for (size_t k = 0; k < shown_columns; ++k) {
      row.push_back(cell_json(values[r * shown_columns + k]));
      bad.push_back(nonfinite[r * shown_columns + k]);
    }
    value_rows.push_back(std::move(row));
    bad_rows.push_back(std::move(bad));
  }
  nlohmann::json found = nlohmann::json::array(), outlier_ranks = nlohmann::json::array();
  for (const auto& o : outliers) {
    found.push_back({o.rank, o.column, std::isfinite(o.score) ? nlohmann::json(o.score) : nlohmann::json(nullptr)});
    if (outlier_ranks.empty() || outlier_ranks.back() != o.rank) outlier_ranks.push_back(o.rank);
  }
  return {{"metric", recording::kOverviewMetrics[query.metric].name},
          {"step", newest < 0 ? nlohmann::json(nullptr) : nlohmann::json(step)},
          {"first_step", newest < 0 ? nlohmann::json(nullptr) : nlohmann::json(first)},
          {"last_step", newest < 0 ? nlohmann::json(nullptr) : nlohmann::json(newest)},
          {"steps_per_column", steps_per_column},
          {"columns", columns},
          {"ranks", std::move(ranks)},
          {"values", std::move(value_rows)},
          {"nonfinite", std::move(bad_rows)},
          {"outliers", std::move(found)},
          {"outlier_ranks", std::move(outlier_ranks)}};
}

SummaryTables::SummaryTables(std::string session_dir) : dir_(std::move(session_dir)) {}

void SummaryTables::discover() {
  DIR* d = ::opendir((dir_ + "/summaries").c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (tables_.count(name) != 0 || tables_.size() >= kMaxTables) continue;
    Table t;
    if (recording::parse_summary_table_name(name, &t.rank, &t.pid)) tables_.emplace(name, std::move(t));
  }
  ::closedir(d);
}

std::vector<std::pair<int, int64_t>> SummaryTables::tables() const {
  std::vector<std::pair<int, int64_t>> out;
  for (const auto& [name, t] : tables_) out.emplace_back(t.rank, t.pid);
  return out;
}

bool SummaryTables::read_table(const std::string& name, Table& table, size_t* budget, const ShardedRows& sharded) {
  const std::string path = dir_ + "/summaries/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return true;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < table.offset || static_cast<uint64_t>(st.st_ino) != table.inode) {  // replaced (compacted): read again
    table.offset = 0;
    table.inode = static_cast<uint64_t>(st.st_ino);
    table.history = recording::OverviewHistory(1);
  }
  const uint64_t want = std::min<uint64_t>(size - table.offset, *budget);
  if (want == 0) return table.offset == size;
  std::string text(want, '\0');
  const ssize_t got = ::pread(fd.get(), text.data(), text.size(), static_cast<off_t>(table.offset));
  if (got <= 0) return true;
  text.resize(static_cast<size_t>(got));
  const size_t last = text.rfind('\n');
  if (last == std::string::npos) {
    // A line longer than the budget (not one of the table's) or one being written.
    if (text.size() >= *budget && text.size() >= (1u << 20)) {
      table.offset += text.size();
      ++skipped_lines_;
    }
    return false;
  }
  *budget -= last + 1;
  table.offset += last + 1;
  skipped_lines_ += recording::for_each_summary_table_row(std::string_view(text.data(), last + 1),
                                                          [&table, &sharded](const recording::SummaryTableRow& row) {
                                                            table.history.observe(row.step, {row.summary}, row.steps);
                                                            if (!row.summary.shard.sharded()) return;
                                                            if (table.sharded.size() < kMaxShardedNames)
                                                              table.sharded.insert(row.summary.name);
                                                            if (sharded) sharded(table.rank, table.pid, row);
                                                          });
  return table.offset == size;
}

void SummaryTables::read_anomalies() {
  const std::string path = dir_ + "/anomalies.jsonl";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || st.st_size == anomalies_size_) return;
  anomalies_size_ = st.st_size;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return;
  std::string text(static_cast<size_t>(std::min<int64_t>(st.st_size, kMaxAnomalyBytes)), '\0');
  const ssize_t got = ::pread(fd.get(), text.data(), text.size(), 0);
  if (got <= 0) return;
  text.resize(static_cast<size_t>(got));
  recording::AnomalyFirsts firsts;
  nlohmann::json others = nlohmann::json::array();
  int64_t count = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) break;  // a line being written
    const nlohmann::json a = nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(start),
                                                   text.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
    start = nl + 1;
    if (!recording::is_anomaly_report(a)) continue;  // the header line, or not an anomaly
    ++count;
    firsts.note(a);
    if (a["type"] != "non_finite" && others.size() < 20) others.push_back(a);
  }
  anomalies_ = {
      {"count", count}, {"first_non_finite", firsts.of("non_finite")}, {"first", firsts.all()}, {"others", others}};
}

bool SummaryTables::has_rows(size_t metric) const {
  return std::any_of(tables_.begin(), tables_.end(),
                     [metric](const auto& entry) { return entry.second.history.has_rows(metric); });
}

bool SummaryTables::refresh(size_t budget, const ShardedRows& sharded) {
  discover();
  bool all = true;
  size_t memory = 0;
  for (const auto& entry : tables_) memory += entry.second.history.memory_bytes();
  tables_left_out_ = 0;
  std::vector<std::pair<const std::string*, Table*>> reading;
  for (auto& [name, table] : tables_) reading.emplace_back(&name, &table);
  while (!reading.empty()) {
    std::vector<std::pair<const std::string*, Table*>> more;  // read some, not all
    for (const auto& [name, table] : reading) {
      if (memory >= kMaxHistoryBytes) {  // what is held stays shown; no table grows further
        ++tables_left_out_;
        continue;
      }
      size_t chunk = std::min(budget, kChunkBytes);
      const size_t given = chunk, before = table->history.memory_bytes();
      const bool done = read_table(*name, *table, &chunk, sharded);
      memory = memory - before + table->history.memory_bytes();
      budget -= given - chunk;
      if (done) continue;
      if (chunk < given && budget > 0) {
        more.emplace_back(name, table);
      } else {
        all = false;  // a line being written, or the budget spent
      }
    }
    reading = std::move(more);
  }
  read_anomalies();
  complete_ = all;
  return all;
}

nlohmann::json SummaryTables::overview(size_t metric, size_t max_columns, std::vector<float>* shown,
                                       const std::optional<std::set<std::pair<int, int64_t>>>& only) const {
  std::vector<const Table*> order;
  for (const auto& [name, t] : tables_) {
    if (!only || only->count({t.rank, t.pid}) > 0) order.push_back(&t);
  }
  std::stable_sort(order.begin(), order.end(), [](const Table* a, const Table* b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pid < b->pid;
  });
  std::erase_if(order, [metric](const Table* t) { return !t->history.has_rows(metric); });
  max_columns = std::max<size_t>(1, max_columns);
  // Rows of a table merge when the answer would pass its cells (many ranks, many tensors).
  const size_t max_rows = std::max<size_t>(1, kMaxAnswerCells / max_columns / std::max<size_t>(1, order.size()));
  nlohmann::json tables = nlohmann::json::array();
  for (const Table* t : order) {
    const recording::OverviewGrid run = t->history.whole_run(metric);
    nlohmann::json table = grid_json(recording::fit_overview_grid(run, max_rows, max_columns), shown);
    table["rank"] = t->rank;
    table["pid"] = t->pid;
    table["shards"] = std::count_if(run.rows.begin(), run.rows.end(),
                                    [t](const std::string& name) { return t->sharded.count(name) > 0; });
    tables.push_back(std::move(table));
  }
  return {{"metric", recording::kOverviewMetrics[metric].name},
          {"complete", complete_},
          {"skipped_lines", skipped_lines_},
          {"tables_left_out", tables_left_out_},
          {"tables", std::move(tables)},
          {"anomalies", anomalies_}};
}

}  // namespace tensorscope::view
