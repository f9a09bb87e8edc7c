// overview_history.h — the per-step summaries of one producer (a training process: one
// rank) as a matrix per overview metric: one row per tracked tensor in forward order
// (gradients after, in the same module order; without their module's output, in the
// reverse of backward's order), one column per summarised step. What the
// overview videos and PNGs (daemon) and the live view's overview page draw.
//
// The overview metrics are defined here once (kOverviewMetrics): the file names
// (overview__rank<r>__pid<p>__<metric>.png), the daemon's videos, the live view's API and
// page and the Python package take them from this table.
//
// Two views of the same history:
//  - window(): the last `window_columns` summarised steps, one column each (the
//    scrolling window of the video while training);
//  - whole_run(): every step since the start in at most `max_run_columns` columns; when
//    full, neighbouring columns merge (each cell keeps the larger value, and a
//    non-finite value anywhere in the block), so a column covers 2^k steps.
// Memory: rows x (window_columns + max_run_columns) cells of 12 bytes, 12 more once a
// summary with numerics was seen; tensors beyond max_rows rows are left out (their
// summaries counted in summaries_left_out).
//
// Used by a worker's reader thread (one history per producer) and the view server's
// network thread (one per summary table it follows). Thread safety: none; one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "tensorscope/shared/summary_format.h"

namespace tensorscope::recording {

struct OverviewMetric {
  const char* name;   // in file names and the API: "grad_norm"
  const char* title;  // on frames and the page
  bool log_scale;     // colour on log10 (values <= 0 shown below the scale)
};

// X(id, name, title, log_scale); the last three are the low-precision numerics (tracks
// with a cast format): a row for every tracked tensor, once a summary with numerics was
// seen.
#define TENSORSCOPE_OVERVIEW_METRICS(X)                                                         \
  X(kGradNorm, "grad_norm", "gradient L2 norm", true)                                           \
  X(kActStd, "act_std", "activation std", true)                                                 \
  X(kZeroFraction, "zero_fraction", "fraction of exact zeros (dead units)", false)              \
  X(kUpdateRatio, "update_ratio", "update ratio |w_t - w_prev| / |w_prev|", true)               \
  X(kDynamicRange, "dynamic_range", "dynamic range, log2(max |x| / min non-zero |x|)", false)   \
  X(kUnderflow, "underflow", "fraction a cast to the track's format makes 0 (underflow)", true) \
  X(kOverflow, "overflow", "fraction a cast to the track's format makes Inf (overflow)", true)

// Index into kOverviewMetrics (an id and its entry come from the same line).
enum class OverviewMetricId : uint8_t {
#define TENSORSCOPE_OVERVIEW_METRIC_ID(id, name, title, log) id,
  TENSORSCOPE_OVERVIEW_METRICS(TENSORSCOPE_OVERVIEW_METRIC_ID)
#undef TENSORSCOPE_OVERVIEW_METRIC_ID
};

inline constexpr std::array kOverviewMetrics = {
#define TENSORSCOPE_OVERVIEW_METRIC_ENTRY(id, name, title, log) OverviewMetric{name, title, log},
    TENSORSCOPE_OVERVIEW_METRICS(TENSORSCOPE_OVERVIEW_METRIC_ENTRY)
#undef TENSORSCOPE_OVERVIEW_METRIC_ENTRY
};

// How the overview is listed in index.json and named on disk: stream "overview", device
// "all", kind "summary", mode = the metric's name; the videos are named like every
// stream's (file_naming.h), the PNG of a whole run overview__rank<r>__pid<p>__<metric>.png.
inline constexpr char kOverviewStream[] = "overview";
inline constexpr char kOverviewDevice[] = "all";
inline constexpr char kOverviewKind[] = "summary";
std::string overview_png_name(int rank, int64_t pid, size_t metric);

// The metric called `name`, or -1.
int overview_metric_index(const std::string& name);
// Whether a tensor of `kind` has a row in metric `m`'s matrix.
bool overview_metric_applies(size_t m, wire::TensorKind kind);
// Metric m of one summary (NaN when it has none, e.g. an update ratio at the first step).
double overview_value(size_t m, const TensorSummary& s);

// One metric's matrix, ready to draw or send.
struct OverviewGrid {
  size_t metric = 0;
  std::vector<std::string> rows;     // stream names, top to bottom
  std::vector<int64_t> first_steps;  // per column, ascending
  std::vector<int64_t> last_steps;   // per column (== first_steps unless merged)
  int64_t steps_per_column = 1;      // whole_run(): 2^k; window(): 1
  std::vector<float> values;         // rows x columns, row-major; NaN: no value
  std::vector<uint8_t> nonfinite;    // rows x columns: 1 when the tensor had a NaN/Inf
  int64_t summaries_left_out = 0;

  size_t columns() const { return first_steps.size(); }
  float value(size_t r, size_t c) const { return values[r * columns() + c]; }
  bool is_nonfinite(size_t r, size_t c) const { return nonfinite[r * columns() + c] != 0; }
  bool empty() const { return rows.empty() || first_steps.empty(); }
};

// `grid` reduced to at most max_rows x max_cols cells for display: blocks of rows and
// columns merge into their largest value, non-finite when any cell was; a merged row is
// named after its first row and "+k".
OverviewGrid fit_overview_grid(const OverviewGrid& grid, size_t max_rows, size_t max_cols);

// The first non-finite cell: the earliest column, in it the first row (forward order);
// false when there is none.
bool first_nonfinite_cell(const OverviewGrid& grid, size_t* row, size_t* column);

class OverviewHistory {
 public:
  explicit OverviewHistory(int window_columns = 200, int max_run_columns = 1024, int max_rows = 2048);

  // The summaries of one track at `step` (several tracks may report the same step), or
  // of `steps` steps from `step` on (a line of a compacted summary table: the whole run's
  // columns widen to hold it). True when `step` opened a new newest column.
  bool observe(int64_t step, const std::vector<TensorSummary>& summaries, int64_t steps = 1);

  OverviewGrid window(size_t metric) const;
  OverviewGrid whole_run(size_t metric) const;
  // whole_run()'s column that holds `step` (or the last one before it), alone: no column
  // before the first step.
  OverviewGrid at_step(size_t metric, int64_t step) const;
  // Whether any row belongs to `metric` (else its grid has no rows). The fraction of
  // zeros has rows once an activation with exact zeros was summarised: tracked outputs
  // that are never zero (a convolution's, not its ReLU's) show no dead units. The
  // numerics' metrics have rows once a summary with numerics was seen.
  bool has_rows(size_t metric) const;
  int64_t steps_seen() const { return steps_seen_; }
  int64_t newest_step() const { return newest_step_; }
  // The memory the history holds, in bytes (its cells and row names; an estimate within
  // the allocator's rounding).
  size_t memory_bytes() const;

 private:
  struct Cell {
    float value[2];     // [0]: the row's own metric, [1]: zero fraction; NaN: none
    uint8_t nonfinite;  // 1: the tensor had a NaN or an Inf
  };
  using Numerics = std::array<float, 3>;  // dynamic range, underflow, overflow; NaN: none
  struct Column {
    int64_t first_step = 0;
    int64_t last_step = 0;
    int64_t steps = 1;               // distinct steps merged into it
    std::vector<Cell> cells;         // by row id (grows as rows appear)
    std::vector<Numerics> numerics;  // by row id, once a summary with numerics came
  };
  struct Row {
    std::string name;
    wire::TensorKind kind;
    size_t seen;  // order of first appearance
  };

  static void put(Column& column, size_t row, const Cell& cell, const Numerics* numerics);
  static void merge(Column& into, const Column& from);
  Column* window_column(int64_t step, bool* opened);
  Column* run_column(int64_t step, int64_t steps);
  void halve_run();
  std::vector<size_t> rows_of(size_t metric) const;  // row ids in display order
  OverviewGrid grid(size_t metric, const std::deque<Column>& columns, int64_t steps_per_column) const;

  size_t window_columns_, max_run_columns_, max_rows_;
  std::vector<Row> rows_;
  std::map<std::string, size_t> row_ids_;
  std::deque<Column> window_;
  std::deque<Column> run_;
  int64_t run_stride_ = 1;  // distinct steps per run column
  int64_t summaries_left_out_ = 0;
  bool zeros_seen_ = false;     // an activation with exact zeros was summarised
  bool numerics_seen_ = false;  // a summary with numerics was
  int64_t steps_seen_ = 0;
  int64_t newest_step_ = -1;
};

}  // namespace tensorscope::recording
