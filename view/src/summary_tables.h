// summary_tables.h — what the live view's overview page shows of one session: its
// summary tables (<session>/summaries/rank<r>_pid<p>.csv, recording/summary_table.h)
// followed as they grow, one OverviewHistory per table (one training process: a rank),
// and its anomalies (<session>/anomalies.jsonl).
//
// Used by the view server on its network thread (the /api/overview request). refresh()
// reads at most `budget` new bytes in all, whole lines only, so a long finished run is
// taken in over a few requests without holding up the others ("complete": false until
// then). Lines that are not the table's are skipped and counted.
//
// Bounded: at most kMaxTables tables are followed and their histories hold at most
// kMaxHistoryBytes in all (a table that would pass it is not read further and is
// counted in "tables_left_out"); an answer holds at most kMaxAnswerCells cells (rows of
// a table merge when there are more; at least one row per table is kept, so 1,024 tables
// of 2,000 columns are the most an answer can hold). Thread safety: none; one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/base/status.h"
#include "tensorscope/recording/overview_history.h"
#include "tensorscope/recording/rank_outliers.h"
#include "tensorscope/recording/summary_table.h"

namespace tensorscope::view {

// The query of /api/overview: ?metric=<name of kOverviewMetrics>&columns=<16..2000>
// [&tables=<source>.<rank>.<pid>,...] (at most kMaxTablesAsked: the tables of a few ranks
// among many; without it, every table).
struct OverviewQuery {
  static constexpr size_t kMinColumns = 16, kMaxColumns = 2000, kMaxTablesAsked = 64;
  size_t metric = 0;
  size_t columns = 600;
  std::optional<std::vector<std::tuple<size_t, int, int64_t>>> tables;
};
StatusOr<OverviewQuery> parse_overview_query(const std::map<std::string, std::string>& query);

// The query of /api/overview/ranks: ?metric=<name>[&step=<step>] (no step: the newest).
struct RanksQuery {
  size_t metric = 0;
  int64_t step = -1;  // -1: the newest step of any table
};
StatusOr<RanksQuery> parse_ranks_query(const std::map<std::string, std::string>& query);

// A cell's value as the answers send it: four significant digits (all a colour needs, and
// a small message); null when it is not finite.
nlohmann::json cell_json(float value);
// {"rows", "first_steps", "last_steps", "steps_per_column", "values" (per row, null: no
// value), "nonfinite" (per row, 0/1)} of a grid; its values appended to `shown`.
nlohmann::json grid_json(const recording::OverviewGrid& grid, std::vector<float>* shown);

class SummaryTables;

// /api/overview/ranks: one metric at one step over every rank of every session — a row per
// (session, rank, pid), a column per tracked tensor (in the first table's order, then as
// others add them) — with the outlier cells (recording/rank_outliers.h):
// {"metric", "step", "first_step", "last_step", "steps_per_column", "columns",
// "ranks": [{"source", "rank", "pid", "first", "last"}], "values" (per rank, null: no
// value), "nonfinite" (per rank, 0/1), "outliers": [[rank row, column, score (null:
// non-finite)]], "outlier_ranks": [rank rows with an outlier]}. At most
// SummaryTables::kMaxAnswerCells cells: past them neighbouring tensors merge (their
// largest value, named after the first and "+k"), the outliers found before. The cells'
// values are appended to `shown` for the colour scale.
nlohmann::json ranks_overview(const std::vector<const SummaryTables*>& sessions, const RanksQuery& query,
                              std::vector<float>* shown = nullptr);

class SummaryTables {
 public:
  static constexpr size_t kMaxTables = 1024;
  static constexpr size_t kMaxAnomalyBytes = 4u << 20;
  static constexpr size_t kMaxHistoryBytes = 256u << 20;
  static constexpr size_t kMaxAnswerCells = 1u << 20;
  static constexpr size_t kChunkBytes = 1u << 20;
  static constexpr size_t kMaxShardedNames = 4096;  // per table

  explicit SummaryTables(std::string session_dir);

  // The rows of a DTensor's part (a row with a shard), with the (rank, pid) of its table,
  // as they are read (view/src/whole_tables.h merges them).
  using ShardedRows = std::function<void(int rank, int64_t pid, const recording::SummaryTableRow&)>;

  // Finds the tables that appeared (refresh() does too).
  void discover();
  // The (rank, pid) of each table followed.
  std::vector<std::pair<int, int64_t>> tables() const;
  const std::string& dir() const { return dir_; }

  // Reads what the tables and the anomaly file gained, round by round at most
  // kChunkBytes of each table (so the tables advance together: the parts of one step,
  // each in a rank's table, come in at about the same time); true when all is read.
  bool refresh(size_t budget = 16u << 20, const ShardedRows& sharded = nullptr);

  // {"metric", "complete", "skipped_lines", "tables_left_out", "tables": [{"rank", "pid", "rows", "first_steps",
  // "last_steps", "steps_per_column", "values" (per row, null: no value), "nonfinite" (per
  // row, 0/1), "shards" (how many of its rows are a DTensor's parts)}], "anomalies": {"count", "first_non_finite", "first" ({type: the earliest
  // of that type}), "others" (the first 20 but non-finite ones)}},
  // the whole run of each table in at most `max_columns` columns (and so many rows that
  // the answer holds at most kMaxAnswerCells cells), tables by rank. The cells' values
  // are appended to `shown` (NaN: no value), for the one color scale of every table shown.
  // `only`: the (rank, pid) of the tables to answer with (none: every table).
  nlohmann::json overview(size_t metric, size_t max_columns, std::vector<float>* shown = nullptr,
                          const std::optional<std::set<std::pair<int, int64_t>>>& only = std::nullopt) const;
  // Each table's whole-run column of `metric` that holds `step` (recording::OverviewHistory::
  // at_step), with its rank and pid, tables by rank; and the range of steps the tables
  // hold (first, newest), widened by this session's.
  struct RankColumn {
    int rank = 0;
    int64_t pid = 0;
    recording::OverviewGrid grid;
  };
  std::vector<RankColumn> at_step(size_t metric, int64_t step, int64_t* first, int64_t* newest) const;
  // Whether some table has rows of `metric` (recording::OverviewHistory::has_rows: the
  // fraction of zeros once an activation had zeros).
  bool has_rows(size_t metric) const;

 private:
  struct Table {
    int rank = 0;
    int64_t pid = 0;
    uint64_t offset = 0;                    // bytes read (whole lines)
    uint64_t inode = 0;                     // of the file read (a compaction replaces it)
    recording::OverviewHistory history{1};  // only whole_run() is shown: no window kept
    std::set<std::string> sharded;          // the streams that are a DTensor's parts
  };

  bool read_table(const std::string& name, Table& table, size_t* budget, const ShardedRows& sharded);
  void read_anomalies();

  const std::string dir_;
  std::map<std::string, Table> tables_;  // by file name
  bool complete_ = true;
  size_t tables_left_out_ = 0;  // not read further: the histories' memory is spent
  uint64_t skipped_lines_ = 0;
  int64_t anomalies_size_ = -1;
  nlohmann::json anomalies_ = {{"count", 0}, {"first_non_finite", nullptr}, {"others", nlohmann::json::array()}};
};

}  // namespace tensorscope::view
