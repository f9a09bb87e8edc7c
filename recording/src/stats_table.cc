// stats_table.cc — see stats_table.h.
#include "tensorscope/recording/stats_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <utility>

#include "tensorscope/recording/csv_text.h"
#include "tensorscope/recording/wire_tensor.h"
#include "tensorscope/tensor/element_blocks.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace tensorscope::recording {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TensorStatsRow empty_row() {
  TensorStatsRow row;
  row.mean = row.std = row.min = row.max = row.l2_norm = row.zero_fraction = kNaN;
  return row;
}

// Second pass: zeros and the sum of squares of the finite values times `scale` (a
// power of two chosen so that no square overflows or vanishes needlessly).
struct NormPass {
  double scale = 1;
  double sum_sq = 0;
  uint64_t zeros = 0;

  void run(const tensor::TensorView& view) {
    double lanes[4] = {0, 0, 0, 0};
    tensor::for_each_ordered_block(view, [&](int64_t, const double* v, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        const double d = v[i];
        if (d == 0) {
          ++zeros;
        } else if (std::isfinite(d)) {
          const double s = d * scale;
          lanes[i & 3] += s * s;
        }
      }
    });
    sum_sq += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
};

std::string shape_field(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

}  // namespace

TensorStatsRow compute_stats_row(wire::DType dtype, const void* data, uint64_t numel) {
  const size_t item = wire::dtype_size(dtype);
  if (item == 0 || numel == 0 || data == nullptr ||
      numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / item) {
    return empty_row();
  }

  // Counts, mean, std, min and max: tensor's numerically careful pass (block-wise
  // corrected two-pass sums merged with Chan's formula, safe near DBL_MAX).
  tensor::TensorView view;
  view.data = data;
  view.type = wire::element_type(dtype);
  view.shape = {static_cast<int64_t>(numel)};
  const tensor::TensorStats stats = tensor::compute_stats(view);

  TensorStatsRow row;
  row.count = numel;
  row.finite_count = stats.finite_count;
  row.nan_count = stats.nan_count;
  row.inf_count = stats.pos_inf_count + stats.neg_inf_count;
  row.mean = stats.mean;
  row.std = stats.std;
  row.min = stats.min;
  row.max = stats.max;

  // L2 norm and zeros. Squares are taken of x * 2^-e, with 2^e the binade of the
  // largest magnitude, so they never overflow (float64 near DBL_MAX) nor lose tiny
  // values (1e-300) to underflow.
  NormPass pass;
  double max_abs = 0;
  if (stats.finite_count > 0) max_abs = std::max(std::fabs(stats.min), std::fabs(stats.max));
  int exponent = 0;
  if (max_abs > 0) {
    exponent = std::ilogb(max_abs);
    pass.scale = std::ldexp(1.0, -exponent);
  }
  pass.run(view);
  row.l2_norm = stats.finite_count == 0 ? kNaN : std::ldexp(std::sqrt(pass.sum_sq), exponent);
  row.zero_fraction = static_cast<double>(pass.zeros) / static_cast<double>(numel);
  return row;
}

std::string stats_table_line(const StatsRowMeta& meta, const TensorStatsRow& row) {
  std::string line;
  line.reserve(160 + meta.stream.size());
  line += std::to_string(meta.step);
  line += ',';
  line += csv_field(meta.stream);
  line += ',';
  line += csv_field(meta.kind);
  line += ',';
  line += std::to_string(meta.rank);
  line += ',';
  line += csv_field(meta.device);
  line += ',';
  line += csv_field(wire::dtype_name(meta.dtype));
  line += ',';
  line += shape_field(meta.shape);
  for (const double v : {row.mean, row.std, row.min, row.max, row.l2_norm}) {
    line += ',';
    line += csv_number(v);
  }
  line += ',';
  line += std::to_string(row.nan_count);
  line += ',';
  line += std::to_string(row.inf_count);
  line += ',';
  line += csv_number(row.zero_fraction);
  return line;
}

StatusOr<StatsTableWriter> StatsTableWriter::open(const std::string& path) {
  auto file = AppendFile::open(path, kStatsTableHeader, "stats table");
  if (!file) return file.status();
  StatsTableWriter writer;
  writer.file_.emplace(std::move(*file));
  return writer;
}

Status StatsTableWriter::append(const StatsRowMeta& meta, const TensorStatsRow& row) {
  try {
    std::string line = stats_table_line(meta, row);
    line += '\n';
    return file_->append(line);
  } catch (const std::exception& e) {
    return Status::error(path() + ": cannot append a row: " + e.what());
  }
}

}  // namespace tensorscope::recording
