#include "compare/tensor_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "compare/mapped_file.h"
#include "tensorscope/recording/npy_file.h"
#include "tensorscope/recording/wire_tensor.h"
#include "tensorscope/tensor/element_type.h"

namespace tensorscope::compare {
namespace {

// Elements converted to double at a time (two stack buffers of 16 KiB).
constexpr size_t kBlockElements = 2048;

// Element i of `p`, which may be unaligned (a file's bytes), as a double.
template <typename T>
double element(const T* p, size_t i) {
  T v;
  std::memcpy(&v, reinterpret_cast<const unsigned char*>(p) + i * sizeof(T), sizeof v);
  return static_cast<double>(v);
}

// Vector types over the element types compared directly.
using v4u = uint32_t __attribute__((vector_size(16)));
using v2u = uint64_t __attribute__((vector_size(16)));

template <typename T>
struct Layout;
template <>
struct Layout<float> {
  using Four = float __attribute__((vector_size(16)));  // four elements
  using Bits = uint32_t;
  using Vec = v4u;  // the bit patterns of four
  static constexpr Bits kExponent = 0x7f800000u;
};
template <>
struct Layout<double> {
  using Four = double __attribute__((vector_size(32)));
  using Bits = uint64_t;
  using Vec = v2u;
  static constexpr Bits kExponent = 0x7ff0000000000000ull;
};

// Whether the n floating-point values of type T at `bytes` are all finite: no value has
// its exponent bits all set. Reads the bit patterns, 16 bytes at a time.
template <typename T>
bool all_finite(const unsigned char* bytes, size_t n) {
  using L = Layout<T>;
  constexpr size_t kLanes = 16 / sizeof(T);
  typename L::Vec any = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    typename L::Vec v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof v);
    any |= (v & L::kExponent) == L::kExponent;
  }
  typename L::Bits seen = 0;
  for (size_t k = 0; k < kLanes; ++k) seen |= any[k];
  for (; i < n; ++i) {
    typename L::Bits v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof v);
    seen |= (v & L::kExponent) == L::kExponent;
  }
  return seen == 0;
}

// What add_finite's kernel adds up over a block.
struct FiniteSums {
  double dot, norm_a, norm_b;
  double max_abs, max_rel;  // in: the maxima so far; out: including the block
  uint64_t mismatches;
};

// The kernel of add_finite, every value finite (the common case): four elements at a
// time in vector registers (GCC/Clang vector extensions: one AVX2 register in the avx2
// clone below, two SSE2 registers otherwise), without a division or a branch. The largest
// relative error of each lane is kept as a fraction rel_num / rel_den and compared by
// cross-multiplying. float32 elements are widened in the registers (exactly), so the
// arithmetic is the double one either way; no fused multiply-add (numpy's rounding).
template <typename T>
[[gnu::always_inline]] inline void finite_sums_kernel(const T* a, const T* b, size_t n, double atol, double rtol,
                                                      FiniteSums* out) {
  using v4d = double __attribute__((vector_size(32)));
  using v4i = int64_t __attribute__((vector_size(32)));
  using Four = typename Layout<T>::Four;
  constexpr size_t kLanes = 4;
  const v4d zero = {0, 0, 0, 0};
  v4d dot = zero, norm_a = zero, norm_b = zero;
  v4d max_abs = zero + out->max_abs, rel_num = zero + out->max_rel, rel_den = zero + 1.0;
  v4i missed = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Four fa, fb;
    std::memcpy(&fa, a + i, sizeof fa);
    std::memcpy(&fb, b + i, sizeof fb);
    const v4d x = __builtin_convertvector(fa, v4d), y = __builtin_convertvector(fb, v4d);
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
  FiniteSums sums{0, 0, 0, out->max_abs, out->max_rel, 0};
  for (size_t k = 0; k < kLanes; ++k) {
    sums.dot += dot[k];
    sums.norm_a += norm_a[k];
    sums.norm_b += norm_b[k];
    sums.max_abs = std::max(sums.max_abs, max_abs[k]);
    sums.max_rel = std::max(sums.max_rel, rel_num[k] / rel_den[k]);
    sums.mismatches += static_cast<uint64_t>(missed[k]);
  }
  for (; i < n; ++i) {
    const double x = element(a, i), y = element(b, i);
    const double diff = std::fabs(x - y), mag = std::fabs(y);
    sums.dot += x * y;
    sums.norm_a += x * x;
    sums.norm_b += y * y;
    sums.max_abs = std::max(sums.max_abs, diff);
    if (mag > 0.0 && diff > sums.max_rel * mag) sums.max_rel = diff / mag;
    sums.mismatches += diff <= atol + rtol * mag ? 0 : 1;
  }
  *out = sums;
}

// The kernel compiled twice, chosen when the program starts: AVX2 where the CPU has it,
// SSE2 (any x86-64) otherwise.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TENSORSCOPE_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define TENSORSCOPE_AVX2_CLONE
#endif

TENSORSCOPE_AVX2_CLONE void finite_sums(const float* a, const float* b, size_t n, double atol, double rtol,
                                        FiniteSums* out) {
  finite_sums_kernel(a, b, n, atol, rtol, out);
}

TENSORSCOPE_AVX2_CLONE void finite_sums(const double* a, const double* b, size_t n, double atol, double rtol,
                                        FiniteSums* out) {
  finite_sums_kernel(a, b, n, atol, rtol, out);
}

}  // namespace

void convert_to_double(const void* src, wire::DType dtype, size_t n, double* dst) {
  TENSORSCOPE_CHECK(dtype != wire::DType::kInvalid && "convert_to_double: invalid dtype");
  tensor::convert_to_double(src, wire::element_type(dtype), n, dst);
}

void TensorComparer::add(const double* a, const double* b, size_t n) {
  if (all_finite<double>(reinterpret_cast<const unsigned char*>(a), n) &&
      all_finite<double>(reinterpret_cast<const unsigned char*>(b), n)) {
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

template <typename T>
void TensorComparer::add_finite(const T* a, const T* b, size_t n) {
  const double atol = tolerance_.atol;
  const double rtol = tolerance_.rtol;
  FiniteSums sums{0, 0, 0, max_abs_, max_rel_, 0};
  finite_sums(a, b, n, atol, rtol, &sums);
  dot_ += sums.dot;
  norm_a_ += sums.norm_a;
  norm_b_ += sums.norm_b;
  max_abs_ = sums.max_abs;
  max_rel_ = sums.max_rel;
  if (sums.mismatches > 0 && mismatches_ == 0) {  // the first element that is not close
    for (size_t j = 0; j < n; ++j) {
      const double x = element(a, j), y = element(b, j);
      if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
        first_mismatch_ = static_cast<int64_t>(total_ + j);
        first_a_ = x;
        first_b_ = y;
        break;
      }
    }
  }
  total_ += n;
  mismatches_ += sums.mismatches;
}

void TensorComparer::add_raw(const void* a, wire::DType dtype_a, const void* b, wire::DType dtype_b, size_t n) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  const size_t size_a = wire::dtype_size(dtype_a);
  const size_t size_b = wire::dtype_size(dtype_b);
  double block_a[kBlockElements];
  double block_b[kBlockElements];
  const bool f32 = dtype_a == wire::DType::kFloat32 && dtype_b == wire::DType::kFloat32;
  const bool f64 = dtype_a == wire::DType::kFloat64 && dtype_b == wire::DType::kFloat64;
  // The same blocks and the same arithmetic as through add(); a block of finite floats of
  // one width (T) goes to the kernel straight from the file's bytes (aligned or not).
  auto direct = [&](auto width, size_t done, size_t count) {
    using T = decltype(width);
    const unsigned char* block_a_bytes = pa + done * sizeof(T);
    const unsigned char* block_b_bytes = pb + done * sizeof(T);
    if (!all_finite<T>(block_a_bytes, count) || !all_finite<T>(block_b_bytes, count)) return false;
    add_finite(reinterpret_cast<const T*>(block_a_bytes), reinterpret_cast<const T*>(block_b_bytes), count);
    return true;
  };
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(kBlockElements, n - done);
    if ((f32 && direct(float{}, done, count)) || (f64 && direct(double{}, done, count))) {
      done += count;
      continue;
    }
    convert_to_double(pa + done * size_a, dtype_a, count, block_a);
    convert_to_double(pb + done * size_b, dtype_b, count, block_b);
    add(block_a, block_b, count);
    done += count;
  }
}

bool TensorComparer::add_raw_on_cores(const void* a, wire::DType dtype_a, const void* b, wire::DType dtype_b,
                                      size_t n) {
  const size_t cores = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  const size_t threads = std::min(cores, n / (4 * kBlockElements));
  if (threads <= 1) return catch_bus_error([&] { add_raw(a, dtype_a, b, dtype_b, n); });
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  const size_t size_a = wire::dtype_size(dtype_a), size_b = wire::dtype_size(dtype_b);
  const size_t per = (n / threads + kBlockElements - 1) / kBlockElements * kBlockElements;
  std::vector<TensorComparer> parts(threads, TensorComparer(tolerance_));
  std::unique_ptr<bool[]> read(new bool[threads]());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) {
    const size_t first = t * per;
    if (first >= n) break;
    const size_t count = std::min(per, n - first);
    TensorComparer& part = parts[t];
    pool.emplace_back([&part, &read, t, pa, pb, dtype_a, dtype_b, first, count, size_a, size_b] {
      read[t] =
          catch_bus_error([&] { part.add_raw(pa + first * size_a, dtype_a, pb + first * size_b, dtype_b, count); });
    });
  }
  TensorComparer& first_part = parts[0];
  read[0] = catch_bus_error([&] { first_part.add_raw(pa, dtype_a, pb, dtype_b, std::min(per, n)); });
  for (std::thread& thread : pool) thread.join();
  for (size_t t = 0; t <= pool.size(); ++t) {
    if (!read[t]) return false;
  }
  for (const TensorComparer& part : parts) merge(part);
  return true;
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

namespace {

// The values of both files compared from their mappings, chunk by chunk.
StatusOr<TensorCompareResult> compare_mapped(const recording::NpyReader& reader_a, const MappedFile& a,
                                             const recording::NpyReader& reader_b, const MappedFile& b,
                                             TensorCompareResult&& layout, const CompareTolerance& tolerance) {
  const size_t size_a = wire::dtype_size(layout.dtype_a), size_b = wire::dtype_size(layout.dtype_b);
  const unsigned char* pa = a.data() + reader_a.data_offset();
  const unsigned char* pb = b.data() + reader_b.data_offset();
  const size_t per_step = kMappedStepBytes / std::max(size_a, size_b);
  TensorComparer comparer(tolerance);
  for (uint64_t done = 0, n = reader_a.numel(); done < n;) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(n - done, per_step));
    if (!comparer.add_raw_on_cores(pa + done * size_a, layout.dtype_a, pb + done * size_b, layout.dtype_b, count)) {
      return shrank_while_compared(a.shrunk() || !b.shrunk() ? a.path() : b.path());
    }
    done += count;
  }
  return comparer.result(std::move(layout));
}

// The same through read() into two buffers per file: the next chunk is read on another
// thread while this one is compared on every core (chunks of at least 256 KiB; smaller
// ones are read in turn).
StatusOr<TensorCompareResult> compare_buffered(recording::NpyReader& reader_a, recording::NpyReader& reader_b,
                                               TensorCompareResult&& layout, const CompareTolerance& tolerance,
                                               size_t per_chunk) {
  const size_t size_a = wire::dtype_size(layout.dtype_a), size_b = wire::dtype_size(layout.dtype_b);
  const bool overlap = per_chunk * std::max(size_a, size_b) >= (size_t{256} << 10);
  std::unique_ptr<unsigned char[]> buffers_a[2] = {std::make_unique<unsigned char[]>(per_chunk * size_a),
                                                   std::make_unique<unsigned char[]>(per_chunk * size_a)};
  std::unique_ptr<unsigned char[]> buffers_b[2] = {std::make_unique<unsigned char[]>(per_chunk * size_b),
                                                   std::make_unique<unsigned char[]>(per_chunk * size_b)};
  auto read_chunk = [&](int slot, size_t count) -> Status {
    auto got_a = reader_a.read(buffers_a[slot].get(), count * size_a);
    if (!got_a) return got_a.status();
    auto got_b = reader_b.read(buffers_b[slot].get(), count * size_b);
    if (!got_b) return got_b.status();
    if (*got_a != count * size_a || *got_b != count * size_b) {
      return Status::error((*got_a != count * size_a ? reader_a.path() : reader_b.path()) + ": unexpected end of data");
    }
    return Status::ok();
  };
  TensorComparer comparer(tolerance);
  uint64_t left = reader_a.numel();
  size_t count = static_cast<size_t>(std::min<uint64_t>(left, per_chunk));
  if (Status s = read_chunk(0, count); !s) return s;
  for (int slot = 0; left > 0; slot ^= 1) {
    left -= count;
    const size_t next = static_cast<size_t>(std::min<uint64_t>(left, per_chunk));
    Status next_read = Status::ok();
    std::thread reader;
    if (next > 0 && overlap) reader = std::thread([&] { next_read = read_chunk(slot ^ 1, next); });
    comparer.add_raw_on_cores(buffers_a[slot].get(), layout.dtype_a, buffers_b[slot].get(), layout.dtype_b, count);
    if (reader.joinable()) {
      reader.join();
    } else if (next > 0) {
      next_read = read_chunk(slot ^ 1, next);
    }
    if (!next_read) return next_read;
    count = next;
  }
  return comparer.result(std::move(layout));
}

}  // namespace

StatusOr<TensorCompareResult> compare_npy_files(const std::string& path_a, const std::string& path_b,
                                                const CompareTolerance& tolerance, size_t chunk_bytes,
                                                CompareReads reads) {
  if (chunk_bytes < 8) return Status::error("compare: chunk size must be at least 8 bytes");
  auto reader_a = recording::NpyReader::open(path_a);
  if (!reader_a) return reader_a.status();
  auto reader_b = recording::NpyReader::open(path_b);
  if (!reader_b) return reader_b.status();

  TensorCompareResult layout;
  layout.dtype_a = reader_a->dtype();
  layout.dtype_b = reader_b->dtype();
  layout.shape_a = reader_a->shape();
  layout.shape_b = reader_b->shape();
  if (layout.shape_a != layout.shape_b) {
    layout.shape_mismatch = true;
    layout.cosine = 0.0;
    return layout;
  }
  if (reads == CompareReads::kMapped && reader_a->numel() > 0) {
    // Mapped after NpyReader checked each file's size against its header.
    auto a = MappedFile::open(path_a);
    auto b = MappedFile::open(path_b);
    if (a && b && a->size() >= reader_a->data_offset() + reader_a->data_bytes() &&
        b->size() >= reader_b->data_offset() + reader_b->data_bytes()) {
      return compare_mapped(*reader_a, *a, *reader_b, *b, std::move(layout), tolerance);
    }
  }
  const size_t per_chunk = chunk_bytes / std::max(wire::dtype_size(layout.dtype_a), wire::dtype_size(layout.dtype_b));
  return compare_buffered(*reader_a, *reader_b, std::move(layout), tolerance, per_chunk);
}

}  // namespace tensorscope::compare
