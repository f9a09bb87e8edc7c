// tensor_compare.h — streaming element-wise comparison of two tensors (numpy allclose
// semantics plus error metrics), and of two .npy files read in fixed-size chunks.
//
// Used by the `tensorscope compare` command-line tool (and its benchmark); no daemon
// process uses it. Semantics, all computed in double:
//   close(a, b)  :=  |a - b| <= atol + rtol * |b|   (numpy.isclose; asymmetric in b)
//   NaN is close to NaN only at the same position (numpy's equal_nan=True; numpy's
//   default is equal_nan=False); +Inf/-Inf are close only to the same infinity.
//   max_abs_error = max |a - b| and max_rel_error = max |a - b| / |b| over the
//   positions where both values are finite; positions with b == 0 are skipped for
//   max_rel_error (never inf). Non-finite positions that are not close are counted in
//   nonfinite_mismatches (and in mismatches).
//   cosine = sum(a*b) / (||a|| * ||b||) over positions where both are finite; 1 when
//   both norms are 0 (two all-zero or empty tensors), 0 when exactly one is 0.
//   int64 values beyond 2^53 lose precision on the way to double.
//   Different dtypes are compared as values. A shape difference (number of dims or
//   any dim) is a difference ("shape mismatch"); no values are read then.
// Thread safety: TensorComparer is used by one thread at a time (add_raw_on_cores runs
// its own threads inside); the free functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::compare {

// numpy.allclose defaults.
struct CompareTolerance {
  double atol = 1e-8;
  double rtol = 1e-5;
};

// Default read size per file and per step of compare_npy_files.
inline constexpr size_t kCompareChunkBytes = size_t{4} << 20;
// Bytes per file compared at a time from mapped files (a step of compare_npy_files on
// every core: fewer, longer steps than through buffers, as no memory is held for them).
inline constexpr size_t kMappedStepBytes = size_t{64} << 20;

struct TensorCompareResult {
  wire::DType dtype_a = wire::DType::kInvalid;
  wire::DType dtype_b = wire::DType::kInvalid;
  std::vector<int64_t> shape_a;
  std::vector<int64_t> shape_b;
  bool shape_mismatch = false;
  uint64_t total = 0;       // elements compared (0 on a shape mismatch)
  uint64_t mismatches = 0;  // elements that are not close
  uint64_t nonfinite_mismatches = 0;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  double cosine = 1.0;
  int64_t first_mismatch = -1;  // flat index of the first element not close, -1 if none
  double first_mismatch_a = 0.0;
  double first_mismatch_b = 0.0;

  bool allclose() const { return !shape_mismatch && mismatches == 0; }
};

// Accumulates the comparison of two equally long element sequences fed in pieces.
class TensorComparer {
 public:
  explicit TensorComparer(CompareTolerance tolerance) : tolerance_(tolerance) {}

  // Compares a[0..n) with b[0..n), the next n elements of both tensors.
  void add(const double* a, const double* b, size_t n);
  // Converts the next n elements of each side (raw little-endian bytes of the given
  // dtypes) to double and adds them. Both dtypes must be valid.
  void add_raw(const void* a, wire::DType dtype_a, const void* b, wire::DType dtype_b, size_t n);
  // Like add_raw, in parts of whole blocks compared on up to one thread per core and
  // merged in order: the same counts, maxima and first mismatch as add_raw; the sums of
  // the cosine in another order, within rounding. Returns false when reading a or b
  // raised a bus error (a mapped file that shrank, see mapped_file.h): the comparer then
  // holds part of the elements at most, and is to be dropped.
  bool add_raw_on_cores(const void* a, wire::DType dtype_a, const void* b, wire::DType dtype_b, size_t n);
  // Takes in `next`, the comparison of the elements that follow this one's (a part
  // compared on another thread).
  void merge(const TensorComparer& next);
  // Metrics so far (total, mismatches, errors, cosine, first mismatch); dtype and
  // shape fields are left for the caller.
  TensorCompareResult result() const;
  // The metrics with the dtypes and shapes of `layout`.
  TensorCompareResult result(TensorCompareResult&& layout) const;

 private:
  template <typename T>
  void add_finite(const T* a, const T* b, size_t n);  // add() when all are finite (T: float or double)

  CompareTolerance tolerance_;
  uint64_t total_ = 0;
  uint64_t mismatches_ = 0;
  uint64_t nonfinite_mismatches_ = 0;
  double max_abs_ = 0.0;
  double max_rel_ = 0.0;
  double dot_ = 0.0;
  double norm_a_ = 0.0;
  double norm_b_ = 0.0;
  int64_t first_mismatch_ = -1;
  double first_a_ = 0.0;
  double first_b_ = 0.0;
};

// Converts n elements of `dtype` at `src` to double (bool is 0/1). dtype must be valid.
void convert_to_double(const void* src, wire::DType dtype, size_t n, double* dst);

// "float32[4,8]" ("float32[]" for a 0-d array).
std::string describe_tensor(wire::DType dtype, const std::vector<int64_t>& shape);

// How a comparison reads the values of .npy files and of contiguous tensors in .pt files.
enum class CompareReads {
  kMapped,    // straight from the page cache (mapped_file.h); kBuffered where a file cannot be mapped
  kBuffered,  // read() into buffers of the chunk size
};

// Opens both files with NpyReader and compares them, from their mappings
// kMappedStepBytes per file at a time, or read into buffers `chunk_bytes` at a time
// (never a whole file at once); each step is compared on every core (TensorComparer::add_raw_on_cores). Errors: those of
// NpyReader (they name the file: missing, corrupt, truncated, unsupported dtype); a file
// that became shorter while it was compared (names it); chunk_bytes < 8.
StatusOr<TensorCompareResult> compare_npy_files(const std::string& path_a, const std::string& path_b,
                                                const CompareTolerance& tolerance,
                                                size_t chunk_bytes = kCompareChunkBytes,
                                                CompareReads reads = CompareReads::kMapped);

}  // namespace tensorscope::compare
