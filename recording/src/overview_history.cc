// overview_history.cc — see overview_history.h.
#include "tensorscope/recording/overview_history.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <tuple>

namespace tensorscope::recording {
namespace {

constexpr float kNone = std::numeric_limits<float>::quiet_NaN();

bool is_gradient(wire::TensorKind kind) {
  return kind == wire::TensorKind::kGradient || kind == wire::TensorKind::kParameterGradient;
}
bool is_activation(wire::TensorKind kind) {
  return kind == wire::TensorKind::kActivation || kind == wire::TensorKind::kTensor;
}

constexpr size_t kFirstNumerics = static_cast<size_t>(OverviewMetricId::kDynamicRange);
bool is_numerics(size_t m) { return m >= kFirstNumerics && m < kOverviewMetrics.size(); }

// The cell slot a metric reads: [1] for the zero fraction, [0] for the row's own metric;
// a numerics metric's index into Numerics.
size_t slot_of(size_t m) {
  if (is_numerics(m)) return m - kFirstNumerics;
  return m == static_cast<size_t>(OverviewMetricId::kZeroFraction) ? 1 : 0;
}

}  // namespace

std::string overview_png_name(int rank, int64_t pid, size_t metric) {
  return std::string(kOverviewStream) + "__rank" + std::to_string(rank) + "__pid" + std::to_string(pid) + "__" +
      kOverviewMetrics[std::min(metric, kOverviewMetrics.size() - 1)].name + ".png";
}

int overview_metric_index(const std::string& name) {
  for (size_t m = 0; m < kOverviewMetrics.size(); ++m) {
    if (name == kOverviewMetrics[m].name) return static_cast<int>(m);
  }
  return -1;
}

bool overview_metric_applies(size_t m, wire::TensorKind kind) {
  switch (static_cast<OverviewMetricId>(m)) {
    case OverviewMetricId::kGradNorm: return is_gradient(kind);
    case OverviewMetricId::kActStd:
    case OverviewMetricId::kZeroFraction: return is_activation(kind);
    case OverviewMetricId::kUpdateRatio: return kind == wire::TensorKind::kParameter;
    case OverviewMetricId::kDynamicRange:
    case OverviewMetricId::kUnderflow:
    case OverviewMetricId::kOverflow: return true;
  }
  return false;
}

double overview_value(size_t m, const TensorSummary& s) {
  if (!overview_metric_applies(m, s.kind)) return std::numeric_limits<double>::quiet_NaN();
  switch (static_cast<OverviewMetricId>(m)) {
    case OverviewMetricId::kGradNorm: return s.l2;
    case OverviewMetricId::kActStd: return s.std;
    case OverviewMetricId::kZeroFraction: return s.zero_fraction();
    case OverviewMetricId::kUpdateRatio:
      return s.has_update_ratio ? s.update_ratio : std::numeric_limits<double>::quiet_NaN();
    case OverviewMetricId::kDynamicRange: return s.dynamic_range();  // NaN without numerics
    case OverviewMetricId::kUnderflow:
      return s.has_numerics() ? s.underflow_fraction() : std::numeric_limits<double>::quiet_NaN();
    case OverviewMetricId::kOverflow:
      return s.has_numerics() ? s.overflow_fraction() : std::numeric_limits<double>::quiet_NaN();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

OverviewHistory::OverviewHistory(int window_columns, int max_run_columns, int max_rows)
    : window_columns_(static_cast<size_t>(std::max(1, window_columns))),
      max_run_columns_(static_cast<size_t>(std::max(2, max_run_columns))),
      max_rows_(static_cast<size_t>(std::max(1, max_rows))) {}

void OverviewHistory::put(Column& column, size_t row, const Cell& cell, const Numerics* numerics) {
  if (column.cells.size() <= row) column.cells.resize(row + 1, Cell{{kNone, kNone}, 0});
  Cell& c = column.cells[row];
  for (size_t i = 0; i < 2; ++i) c.value[i] = std::fmax(c.value[i], cell.value[i]);  // NaN: the other
  c.nonfinite |= cell.nonfinite;
  if (numerics == nullptr) return;
  if (column.numerics.size() <= row) column.numerics.resize(row + 1, Numerics{kNone, kNone, kNone});
  for (size_t i = 0; i < numerics->size(); ++i) {
    column.numerics[row][i] = std::fmax(column.numerics[row][i], (*numerics)[i]);
  }
}

void OverviewHistory::merge(Column& into, const Column& from) {
  for (size_t row = 0; row < from.cells.size(); ++row) {
    put(into, row, from.cells[row], row < from.numerics.size() ? &from.numerics[row] : nullptr);
  }
  into.first_step = std::min(into.first_step, from.first_step);
  into.last_step = std::max(into.last_step, from.last_step);
  into.steps += from.steps;
}

OverviewHistory::Column* OverviewHistory::window_column(int64_t step, bool* opened) {
  if (window_.empty() || step > window_.back().first_step) {
    window_.push_back(Column{step, step, 1, {}, {}});
    if (window_.size() > window_columns_) window_.pop_front();
    *opened = true;
    return &window_.back();
  }
  if (step < window_.front().first_step) return nullptr;  // older than the window
  auto at = std::lower_bound(window_.begin(), window_.end(), step,
                             [](const Column& c, int64_t s) { return c.first_step < s; });
  if (at != window_.end() && at->first_step == step) return &*at;
  at = window_.insert(at, Column{step, step, 1, {}, {}});  // a late step of another track
  return &*at;
}

void OverviewHistory::halve_run() {
  std::deque<Column> halved;
  for (size_t i = 0; i < run_.size(); i += 2) {
    halved.push_back(std::move(run_[i]));
    if (i + 1 < run_.size()) merge(halved.back(), run_[i + 1]);
  }
  run_ = std::move(halved);
  run_stride_ *= 2;
}

OverviewHistory::Column* OverviewHistory::run_column(int64_t step, int64_t steps) {
  const int64_t last = step + steps - 1;
  // A line standing for many steps (a compacted table's): the whole run's columns widen
  // to hold it, so that every column covers about as many steps.
  while (run_stride_ < steps && run_stride_ < (int64_t{1} << 40)) halve_run();
  if (run_.empty() || step > run_.back().last_step) {
    if (!run_.empty() && run_.back().steps + steps <= run_stride_) {
      run_.back().last_step = last;
      run_.back().steps += steps;
      return &run_.back();
    }
    run_.push_back(Column{step, last, steps, {}, {}});
    if (run_.size() > max_run_columns_) halve_run();  // neighbours merge, a column covers twice the steps
    return &run_.back();
  }
  // An earlier step (another track's, late): the column that covers it.
  auto after =
      std::upper_bound(run_.begin(), run_.end(), step, [](int64_t s, const Column& c) { return s < c.first_step; });
  Column& c = after == run_.begin() ? run_.front() : *(after - 1);
  c.first_step = std::min(c.first_step, step);
  c.last_step = std::max(c.last_step, last);
  return &c;
}

bool OverviewHistory::observe(int64_t step, const std::vector<TensorSummary>& summaries, int64_t steps) {
  steps = std::max<int64_t>(1, steps);
  bool opened = false;
  Column* w = window_column(step, &opened);
  Column* r = run_column(step, steps);
  if (opened) {
    ++steps_seen_;
    newest_step_ = step;
  }
  for (const TensorSummary& s : summaries) {
    auto it = row_ids_.find(s.name);
    if (it == row_ids_.end()) {
      if (rows_.size() >= max_rows_) {
        ++summaries_left_out_;
        continue;
      }
      it = row_ids_.emplace(s.name, rows_.size()).first;
      rows_.push_back(Row{s.name, s.kind, rows_.size()});
    }
    zeros_seen_ = zeros_seen_ || (is_activation(s.kind) && s.zero_count > 0);
    numerics_seen_ = numerics_seen_ || s.has_numerics();
    Cell cell{{kNone, kNone}, static_cast<uint8_t>(s.finite() ? 0 : 1)};
    Numerics numerics{kNone, kNone, kNone};
    for (size_t m = 0; m < kOverviewMetrics.size(); ++m) {
      const double v = overview_value(m, s);
      if (std::isnan(v)) continue;
      (is_numerics(m) ? numerics[slot_of(m)] : cell.value[slot_of(m)]) = static_cast<float>(v);
    }
    const Numerics* with = s.has_numerics() ? &numerics : nullptr;
    if (w != nullptr) put(*w, it->second, cell, with);
    put(*r, it->second, cell, with);
  }
  return opened;
}

bool OverviewHistory::has_rows(size_t metric) const {
  if (metric == static_cast<size_t>(OverviewMetricId::kZeroFraction) && !zeros_seen_) return false;
  if (is_numerics(metric) && !numerics_seen_) return false;
  return std::any_of(rows_.begin(), rows_.end(),
                     [metric](const Row& r) { return overview_metric_applies(metric, r.kind); });
}

std::vector<size_t> OverviewHistory::rows_of(size_t metric) const {
  // Forward order; a gradient takes the place of the tensor it is the gradient of, and
  // gradients without one (a track of gradients only) come in the reverse of the order
  // backward delivered them: the first module's first.
  auto key = [this](size_t id) {
    const Row& row = rows_[id];
    if (!is_gradient(row.kind)) return std::make_tuple(0, row.seen, row.seen);
    constexpr std::string_view kGrad = ".grad";
    if (row.name.size() > kGrad.size() && std::string_view(row.name).substr(row.name.size() - kGrad.size()) == kGrad) {
      auto base = row_ids_.find(row.name.substr(0, row.name.size() - kGrad.size()));
      if (base != row_ids_.end()) return std::make_tuple(1, rows_[base->second].seen, row.seen);
    }
    return std::make_tuple(2, rows_.size() - row.seen, row.seen);
  };
  std::vector<size_t> ids;
  for (size_t id = 0; id < rows_.size(); ++id) {
    if (overview_metric_applies(metric, rows_[id].kind)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [&key](size_t a, size_t b) { return key(a) < key(b); });
  return ids;
}

OverviewGrid OverviewHistory::grid(size_t metric, const std::deque<Column>& columns, int64_t steps_per_column) const {
  OverviewGrid g;
  g.metric = metric;
  g.steps_per_column = steps_per_column;
  g.summaries_left_out = summaries_left_out_;
  if (metric >= kOverviewMetrics.size()) return g;
  const std::vector<size_t> ids = rows_of(metric);
  for (size_t id : ids) g.rows.push_back(rows_[id].name);
  for (const Column& c : columns) {
    g.first_steps.push_back(c.first_step);
    g.last_steps.push_back(c.last_step);
  }
  const size_t cols = columns.size(), slot = slot_of(metric);
  g.values.assign(ids.size() * cols, kNone);
  g.nonfinite.assign(ids.size() * cols, 0);
  const bool numerics = is_numerics(metric);
  for (size_t c = 0; c < cols; ++c) {
    const std::vector<Cell>& cells = columns[c].cells;
    for (size_t r = 0; r < ids.size(); ++r) {
      if (ids[r] >= cells.size()) continue;
      if (!numerics) {
        g.values[r * cols + c] = cells[ids[r]].value[slot];
      } else if (ids[r] < columns[c].numerics.size()) {
        g.values[r * cols + c] = columns[c].numerics[ids[r]][slot];
      }
      g.nonfinite[r * cols + c] = cells[ids[r]].nonfinite;
    }
  }
  return g;
}

OverviewGrid fit_overview_grid(const OverviewGrid& grid, size_t max_rows, size_t max_cols) {
  max_rows = std::max<size_t>(1, max_rows);
  max_cols = std::max<size_t>(1, max_cols);
  const size_t rows = grid.rows.size(), cols = grid.columns();
  if (rows <= max_rows && cols <= max_cols) return grid;
  // Block sides, rounded up without overflow (a bound may be SIZE_MAX: no limit).
  auto blocks = [](size_t n, size_t bound) { return std::max<size_t>(1, n / bound + (n % bound != 0 ? 1 : 0)); };
  const size_t rb = blocks(rows, max_rows), cb = blocks(cols, max_cols);
  OverviewGrid out;
  out.metric = grid.metric;
  out.summaries_left_out = grid.summaries_left_out;
  out.steps_per_column = grid.steps_per_column * static_cast<int64_t>(cb);
  for (size_t r = 0; r < rows; r += rb) {
    const size_t n = std::min(rb, rows - r);
    out.rows.push_back(n == 1 ? grid.rows[r] : grid.rows[r] + " +" + std::to_string(n - 1));
  }
  for (size_t c = 0; c < cols; c += cb) {
    out.first_steps.push_back(grid.first_steps[c]);
    out.last_steps.push_back(grid.last_steps[std::min(cols, c + cb) - 1]);
  }
  const size_t orows = out.rows.size(), ocols = out.columns();
  out.values.assign(orows * ocols, std::numeric_limits<float>::quiet_NaN());
  out.nonfinite.assign(orows * ocols, 0);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const size_t o = (r / rb) * ocols + c / cb;
      out.values[o] = std::fmax(out.values[o], grid.value(r, c));
      out.nonfinite[o] |= grid.nonfinite[r * cols + c];
    }
  }
  return out;
}

bool first_nonfinite_cell(const OverviewGrid& grid, size_t* row, size_t* column) {
  for (size_t c = 0; c < grid.columns(); ++c) {
    for (size_t r = 0; r < grid.rows.size(); ++r) {
      if (grid.is_nonfinite(r, c)) {
        *row = r;
        *column = c;
        return true;
      }
    }
  }
  return false;
}

size_t OverviewHistory::memory_bytes() const {
  size_t bytes = sizeof(*this);
  for (const auto* columns : {&window_, &run_}) {
    for (const Column& c : *columns) {
      bytes += sizeof(Column) + c.cells.capacity() * sizeof(Cell) + c.numerics.capacity() * sizeof(Numerics);
    }
  }
  // A row: its entry, its name twice (the row and the map's key) and the map's node.
  for (const Row& r : rows_) bytes += sizeof(Row) + 2 * r.name.capacity() + 64;
  return bytes;
}

OverviewGrid OverviewHistory::window(size_t metric) const { return grid(metric, window_, 1); }
OverviewGrid OverviewHistory::whole_run(size_t metric) const { return grid(metric, run_, run_stride_); }

OverviewGrid OverviewHistory::at_step(size_t metric, int64_t step) const {
  std::deque<Column> one;
  for (const Column& c : run_) {  // (ascending: the last that begins at or before the step)
    if (c.first_step > step) break;
    if (one.empty())
      one.push_back(c);
    else
      one.front() = c;
  }
  return grid(metric, one, run_stride_);
}

}  // namespace tensorscope::recording
