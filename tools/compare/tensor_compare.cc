#include "compare/tensor_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "tensorscope/recording/npy_file.h"
#include "tensorscope/recording/wire_tensor.h"
#include "tensorscope/tensor/element_type.h"

namespace tensorscope::compare {
namespace {

// Elements converted to double at a time (two stack buffers of 16 KiB).
constexpr size_t kBlockElements = 2048;

}  // namespace

void convert_to_double(const void* src, wire::DType dtype, size_t n, double* dst) {
  TENSORSCOPE_CHECK(dtype != wire::DType::kInvalid && "convert_to_double: invalid dtype");
  tensor::convert_to_double(src, wire::element_type(dtype), n, dst);
}

void TensorComparer::add(const double* a, const double* b, size_t n) {
  const double atol = tolerance_.atol;
  const double rtol = tolerance_.rtol;
  double dot = 0.0, norm_a = 0.0, norm_b = 0.0;
  double max_abs = max_abs_, max_rel = max_rel_;
  uint64_t mismatches = 0, nonfinite = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i];
    const double y = b[i];
    bool close;
    if (std::isfinite(x) && std::isfinite(y)) {
      const double diff = std::fabs(x - y);
      const double mag = std::fabs(y);
      dot += x * y;
      norm_a += x * x;
      norm_b += y * y;
      if (diff > max_abs) max_abs = diff;
      if (mag > 0.0 && diff > max_rel * mag) max_rel = diff / mag;
      close = diff <= atol + rtol * mag;
    } else {
      // NaN only with NaN; an infinity only with the same infinity.
      close = (std::isnan(x) && std::isnan(y)) || x == y;
      if (!close) ++nonfinite;
    }
    if (!close) {
      if (mismatches_ + mismatches == 0) {
        first_mismatch_ = static_cast<int64_t>(total_ + i);
        first_a_ = x;
        first_b_ = y;
      }
      ++mismatches;
    }
  }
  total_ += n;
  mismatches_ += mismatches;
  nonfinite_mismatches_ += nonfinite;
  max_abs_ = max_abs;
  max_rel_ = max_rel;
  dot_ += dot;
  norm_a_ += norm_a;
  norm_b_ += norm_b;
}

void TensorComparer::add_raw(const void* a, wire::DType dtype_a, const void* b,
                             wire::DType dtype_b, size_t n) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  const size_t size_a = wire::dtype_size(dtype_a);
  const size_t size_b = wire::dtype_size(dtype_b);
  double block_a[kBlockElements];
  double block_b[kBlockElements];
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(kBlockElements, n - done);
    convert_to_double(pa + done * size_a, dtype_a, count, block_a);
    convert_to_double(pb + done * size_b, dtype_b, count, block_b);
    add(block_a, block_b, count);
    done += count;
  }
}

TensorCompareResult TensorComparer::result() const {
  TensorCompareResult r;
  r.total = total_;
  r.mismatches = mismatches_;
  r.nonfinite_mismatches = nonfinite_mismatches_;
  r.max_abs_error = max_abs_;
  r.max_rel_error = max_rel_;
  if (norm_a_ == 0.0 && norm_b_ == 0.0) {
    r.cosine = 1.0;
  } else if (norm_a_ == 0.0 || norm_b_ == 0.0) {
    r.cosine = 0.0;
  } else {
    r.cosine = dot_ / (std::sqrt(norm_a_) * std::sqrt(norm_b_));
  }
  r.first_mismatch = first_mismatch_;
  r.first_mismatch_a = first_a_;
  r.first_mismatch_b = first_b_;
  return r;
}

TensorCompareResult TensorComparer::result(TensorCompareResult&& layout) const {
  TensorCompareResult metrics = result();
  metrics.dtype_a = layout.dtype_a;
  metrics.dtype_b = layout.dtype_b;
  metrics.shape_a = std::move(layout.shape_a);
  metrics.shape_b = std::move(layout.shape_b);
  return metrics;
}

std::string describe_tensor(wire::DType dtype, const std::vector<int64_t>& shape) {
  std::string text = wire::dtype_name(dtype);
  text += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(shape[i]);
  }
  text += ']';
  return text;
}

StatusOr<TensorCompareResult> compare_npy_files(const std::string& path_a,
                                                const std::string& path_b,
                                                const CompareTolerance& tolerance,
                                                size_t chunk_bytes) {
  if (chunk_bytes < 8) return Status::error("compare: chunk size must be at least 8 bytes");
  auto reader_a = recording::NpyReader::open(path_a);
  if (!reader_a) return reader_a.status();
  auto reader_b = recording::NpyReader::open(path_b);
  if (!reader_b) return reader_b.status();

  TensorCompareResult result;
  result.dtype_a = reader_a->dtype();
  result.dtype_b = reader_b->dtype();
  result.shape_a = reader_a->shape();
  result.shape_b = reader_b->shape();
  if (result.shape_a != result.shape_b) {
    result.shape_mismatch = true;
    result.cosine = 0.0;
    return result;
  }

  const size_t size_a = wire::dtype_size(result.dtype_a);
  const size_t size_b = wire::dtype_size(result.dtype_b);
  const size_t per_chunk = chunk_bytes / std::max(size_a, size_b);
  std::unique_ptr<unsigned char[]> buffer_a(new unsigned char[per_chunk * size_a]);
  std::unique_ptr<unsigned char[]> buffer_b(new unsigned char[per_chunk * size_b]);
  TensorComparer comparer(tolerance);
  uint64_t left = reader_a->numel();
  while (left > 0) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(left, per_chunk));
    auto got_a = reader_a->read(buffer_a.get(), count * size_a);
    if (!got_a) return got_a.status();
    auto got_b = reader_b->read(buffer_b.get(), count * size_b);
    if (!got_b) return got_b.status();
    if (*got_a != count * size_a || *got_b != count * size_b) {
      return Status::error((*got_a != count * size_a ? path_a : path_b) +
                           ": unexpected end of data");
    }
    comparer.add_raw(buffer_a.get(), result.dtype_a, buffer_b.get(), result.dtype_b, count);
    left -= count;
  }
  return comparer.result(std::move(result));
}

}  // namespace tensorscope::compare
