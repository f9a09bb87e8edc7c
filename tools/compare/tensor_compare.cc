#include "compare/tensor_compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

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
  uint64_t poison = 0;  // a NaN or an infinity makes x - x a NaN
  for (size_t i = 0; i < n; ++i) {
    poison |= std::bit_cast<uint64_t>(a[i] - a[i]) | std::bit_cast<uint64_t>(b[i] - b[i]);
  }
  if (poison == 0) {
    add_finite(a, b, n);
    return;
  }
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

void TensorComparer::add_finite(const double* a, const double* b, size_t n) {
  // Every value finite (the common case): two elements at a time in vector registers
  // (GCC/Clang vector extensions: an SSE2 pair on any x86-64, NEON on arm64),
  // without a division or a branch. The largest relative error of each lane is kept as a
  // fraction rel_num / rel_den and compared by cross-multiplying.
  using v4d = double __attribute__((vector_size(16)));  // a pair: one SSE2 register
  using v4i = int64_t __attribute__((vector_size(16)));
  constexpr size_t kLanes = 2;
  const double atol = tolerance_.atol;
  const double rtol = tolerance_.rtol;
  const v4d zero = {0, 0};
  v4d dot = zero, norm_a = zero, norm_b = zero;
  v4d max_abs = zero + max_abs_, rel_num = zero + max_rel_, rel_den = zero + 1.0;
  v4i missed = {0, 0};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    v4d x, y;
    std::memcpy(&x, a + i, sizeof x);
    std::memcpy(&y, b + i, sizeof y);
    const v4d d = x - y;
    const v4d diff = d < zero ? -d : d;
    const v4d mag = y < zero ? -y : y;
    dot += x * y;
    norm_a += x * x;
    norm_b += y * y;
    max_abs = diff > max_abs ? diff : max_abs;
    const v4i larger = (mag > zero) & (diff * rel_den > rel_num * mag);
    rel_num = larger ? diff : rel_num;
    rel_den = larger ? mag : rel_den;
    missed -= diff > atol + rtol * mag;  // true is -1 (all values finite: "not close" is ">")
  }
  double dot_sum = 0, norm_a_sum = 0, norm_b_sum = 0;
  uint64_t mismatches = 0;
  for (size_t k = 0; k < kLanes; ++k) {
    dot_sum += dot[k];
    norm_a_sum += norm_a[k];
    norm_b_sum += norm_b[k];
    max_abs_ = std::max(max_abs_, max_abs[k]);
    max_rel_ = std::max(max_rel_, rel_num[k] / rel_den[k]);
    mismatches += static_cast<uint64_t>(missed[k]);
  }
  for (; i < n; ++i) {
    const double x = a[i], y = b[i];
    const double diff = std::fabs(x - y), mag = std::fabs(y);
    dot_sum += x * y;
    norm_a_sum += x * x;
    norm_b_sum += y * y;
    max_abs_ = std::max(max_abs_, diff);
    if (mag > 0.0 && diff > max_rel_ * mag) max_rel_ = diff / mag;
    mismatches += diff <= atol + rtol * mag ? 0 : 1;
  }
  dot_ += dot_sum;
  norm_a_ += norm_a_sum;
  norm_b_ += norm_b_sum;
  if (mismatches > 0 && mismatches_ == 0) {  // the first element that is not close
    for (size_t j = 0; j < n; ++j) {
      if (!(std::fabs(a[j] - b[j]) <= atol + rtol * std::fabs(b[j]))) {
        first_mismatch_ = static_cast<int64_t>(total_ + j);
        first_a_ = a[j];
        first_b_ = b[j];
        break;
      }
    }
  }
  total_ += n;
  mismatches_ += mismatches;
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

void TensorComparer::add_raw_on_cores(const void* a, wire::DType dtype_a, const void* b, wire::DType dtype_b,
                                      size_t n) {
  const size_t cores = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  const size_t threads = std::min(cores, n / (4 * kBlockElements));
  if (threads <= 1) {
    add_raw(a, dtype_a, b, dtype_b, n);
    return;
  }
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  const size_t size_a = wire::dtype_size(dtype_a), size_b = wire::dtype_size(dtype_b);
  const size_t per = (n / threads + kBlockElements - 1) / kBlockElements * kBlockElements;
  std::vector<TensorComparer> parts(threads, TensorComparer(tolerance_));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) {
    const size_t first = t * per;
    if (first >= n) break;
    const size_t count = std::min(per, n - first);
    pool.emplace_back([&, t, first, count] {
      parts[t].add_raw(pa + first * size_a, dtype_a, pb + first * size_b, dtype_b, count);
    });
  }
  parts[0].add_raw(pa, dtype_a, pb, dtype_b, std::min(per, n));
  for (std::thread& thread : pool) thread.join();
  for (const TensorComparer& part : parts) merge(part);
}

void TensorComparer::merge(const TensorComparer& next) {
  if (mismatches_ == 0 && next.mismatches_ > 0) {
    first_mismatch_ = static_cast<int64_t>(total_) + next.first_mismatch_;
    first_a_ = next.first_a_;
    first_b_ = next.first_b_;
  }
  total_ += next.total_;
  mismatches_ += next.mismatches_;
  nonfinite_mismatches_ += next.nonfinite_mismatches_;
  max_abs_ = std::max(max_abs_, next.max_abs_);
  max_rel_ = std::max(max_rel_, next.max_rel_);
  dot_ += next.dot_;
  norm_a_ += next.norm_a_;
  norm_b_ += next.norm_b_;
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
    comparer.add_raw_on_cores(buffer_a.get(), result.dtype_a, buffer_b.get(), result.dtype_b, count);
    left -= count;
  }
  return comparer.result(std::move(result));
}

}  // namespace tensorscope::compare
