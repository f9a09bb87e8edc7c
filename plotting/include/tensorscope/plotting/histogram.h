// histogram.h — exact histograms with a fixed range, and how to choose that range.
//
// Used by the daemon's worker processes for the `histogram` render mode: the first
// frame of a stream picks a range (choose_histogram_range), later frames reuse it so the
// video's axes stay still; values outside it are counted as underflow/overflow and
// NaN/+Inf/-Inf are counted apart, never dropped. Counts are exact 64-bit integers.
// Speed: a few ns per element single-threaded (about 1-2 ms per 1M float32).
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorscope/plotting/axis_ticks.h"
#include "tensorscope/tensor/tensor_stats.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

inline constexpr int kMaxHistogramBins = 1 << 20;

// The value axis of a histogram. kLinear: bins of equal width in x. kSymlog: bins of
// equal width in symlog(x) = sign(x) * log10(1 + |x| / linthresh), linear within about
// +-linthresh and logarithmic beyond, for bodies that span orders of magnitude (both
// signs and zero allowed, unlike a log axis).
enum class HistogramAxis : uint8_t { kLinear, kSymlog };

// Bins of equal width over [lo, hi] on the axis: with kLinear, bin i holds
// lo + i*w <= x < lo + (i+1)*w with w = (hi - lo) / bins; with kSymlog the same in
// symlog(x). x == hi goes to the last bin.
struct HistogramRange {
  double lo = 0;
  double hi = 1;
  int bins = 64;
  HistogramAxis axis = HistogramAxis::kLinear;
  double linthresh = 1;  // kSymlog only: finite, > 0

  // lo < hi, both finite, hi - lo finite, 1 <= bins <= kMaxHistogramBins; with kSymlog
  // also a finite linthresh > 0 that keeps symlog(hi) - symlog(lo) > 0.
  bool valid() const;
  // Left edge of bin i (i == bins gives hi), in x.
  double edge(int i) const;
  // Where x sits on the axis, 0 at lo and 1 at hi (outside [0, 1] beyond them).
  double position(double x) const;
  bool operator==(const HistogramRange&) const = default;
};

// Makes any range valid: clamps bins, orders lo/hi, widens an empty or non-finite one.
HistogramRange sanitize_range(HistogramRange range);

// A valid range covering [stats.min, stats.max] plus margin_fraction * (max - min) on
// each side. All-equal values get a small range centred on the value; no finite values
// give [-1, 1]. With integer_valued (integer/bool data) the edges sit at half-integers
// and every bin spans the same whole number of integers (so `bins` may come back
// smaller, e.g. 2 bins for bool); the margin is then rounded down to whole integers.
HistogramRange choose_histogram_range(const tensor::TensorStats& stats, int bins, double margin_fraction,
                                      bool integer_valued = false);

struct Histogram {
  HistogramRange range;
  std::vector<uint64_t> counts;  // range.bins entries
  uint64_t underflow = 0;        // finite, < lo
  uint64_t overflow = 0;         // finite, > hi
  uint64_t nan = 0;
  uint64_t pos_inf = 0;
  uint64_t neg_inf = 0;

  // Sum of everything above: the number of elements seen.
  uint64_t total() const;
};

// Exact counts of every element; `range` is sanitized first (result.range is the one
// used). An invalid or empty view gives all-zero counts.
Histogram compute_histogram(const tensor::TensorView& view, const HistogramRange& range);

// Stats and histogram with as few passes as possible. With fixed_range != nullptr: one
// pass over the data, histogram over *fixed_range. Without: two passes (stats, then a
// histogram over choose_histogram_range(stats, bins, margin, integer type)); if another
// process rewrites the data between the passes, both results stay self-consistent
// but may disagree with each other. Either output pointer may be null.
void summarize(const tensor::TensorView& view, const HistogramRange* fixed_range, int bins, double margin_fraction,
               tensor::TensorStats* stats, Histogram* hist);

}  // namespace tensorscope::plotting
