// stats_table.cc — see stats_table.h.
#include "sinks/stats_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <utility>

#include "record_frame.h"
#include "tensorscope/tensor/tensor_stats.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::daemon {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Elements copied (one memcpy) into a private buffer per step of the second pass.
constexpr size_t kBlockElements = 2048;

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

  template <typename T, typename Convert>
  void run(const void* data, uint64_t numel, Convert convert) {
    const auto* src = static_cast<const unsigned char*>(data);
    T raw[kBlockElements];
    double lanes[4] = {0, 0, 0, 0};
    for (uint64_t start = 0; start < numel; start += kBlockElements) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlockElements, numel - start));
      std::memcpy(raw, src + start * sizeof(T), n * sizeof(T));
      for (size_t i = 0; i < n; ++i) {
        const double d = convert(raw[i]);
        if (d == 0) {
          ++zeros;
        } else if (std::isfinite(d)) {
          const double s = d * scale;
          lanes[i & 3] += s * s;
        }
      }
    }
    sum_sq += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
};

template <typename T>
double as_double(T v) {
  return static_cast<double>(v);
}

std::string number(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "";  // cannot happen with 64 bytes
  return std::string(buf, end);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

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

  // Counts, mean, std, min and max: plotting's numerically careful pass (block-wise
  // corrected two-pass sums merged with Chan's formula, safe near DBL_MAX).
  tensor::TensorView view;
  view.data = data;
  view.type = element_type(dtype);
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
  switch (dtype) {
    case wire::DType::kFloat32: pass.run<float>(data, numel, as_double<float>); break;
    case wire::DType::kFloat64: pass.run<double>(data, numel, as_double<double>); break;
    case wire::DType::kFloat16:
      pass.run<uint16_t>(data, numel, [](uint16_t b) {
        return static_cast<double>(tensor::float16_to_float(b));
      });
      break;
    case wire::DType::kBFloat16:
      pass.run<uint16_t>(data, numel, [](uint16_t b) {
        return static_cast<double>(tensor::bfloat16_to_float(b));
      });
      break;
    case wire::DType::kInt8: pass.run<int8_t>(data, numel, as_double<int8_t>); break;
    case wire::DType::kInt16: pass.run<int16_t>(data, numel, as_double<int16_t>); break;
    case wire::DType::kInt32: pass.run<int32_t>(data, numel, as_double<int32_t>); break;
    case wire::DType::kInt64: pass.run<int64_t>(data, numel, as_double<int64_t>); break;
    case wire::DType::kUInt8: pass.run<uint8_t>(data, numel, as_double<uint8_t>); break;
    case wire::DType::kBool:
      pass.run<uint8_t>(data, numel, [](uint8_t b) { return b != 0 ? 1.0 : 0.0; });
      break;
    case wire::DType::kInvalid: break;  // refused above
  }
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
    line += number(v);
  }
  line += ',';
  line += std::to_string(row.nan_count);
  line += ',';
  line += std::to_string(row.inf_count);
  line += ',';
  line += number(row.zero_fraction);
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

}  // namespace tensorscope::daemon
