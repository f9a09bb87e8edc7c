// histogram_range.h — a histogram's range taken from the distribution's body, and the
// measures that say whether a histogram reads well.
//
// Used by the daemon's worker processes (through adaptive_histogram.h) and by the tests'
// readability checks. choose_body_range() starts from the 1st and 99th percentiles of
// the finite values (value_sketch.h), not the extremes: the full [min, max] (widened by
// `margin` of its width each side) is kept while the central 90 % still spans 30 % of
// it (well-behaved data, no tails to count), otherwise the body widened by `margin` of
// its width each side, and the heavy tails are counted as underflow/overflow. A body around 0 with both sides of comparable size (gradients)
// gets a range symmetric around 0. Edges are rounded outward to a grid of 1, 2 or 5
// times a power of ten (a twentieth of the width) so that a slightly different frame
// picks the same range. Where the body spans orders of magnitude (the central 90 %
// would cover under a quarter of a linear axis), a symlog axis is taken when it spreads the
// body half as wide again. Integer data keep whole-number bins.
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstdint>

#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/value_sketch.h"

namespace tensorscope::plotting {

// The value axis a stream asks for: kAuto lets choose_body_range decide.
enum class AxisChoice : uint8_t { kAuto, kLinear, kSymlog };

struct BodyRangeOptions {
  int bins = 64;
  double margin = 0.1;          // of the body's width, each side; clamped to [0, 10]
  bool integer_valued = false;  // integer/bool data: bins at whole numbers, linear
  AxisChoice axis = AxisChoice::kAuto;
};

// A valid range for the values `sketch` saw (see the header comment). No finite values
// give [-1, 1]; all-equal values a small range centred on the value.
HistogramRange choose_body_range(const ValueSketch& sketch, const BodyRangeOptions& options);

// How many of the bins the central `mass` of the finite values spreads over, as a
// fraction of the bins: from the point of the bins where the (1 - mass) / 2 quantile
// falls to where the (1 + mass) / 2 quantile falls (interpolated inside a bin;
// underflow sits before the first bin, overflow after the last). 0 for no finite
// values; near 0 for a single bar.
double central_spread(const Histogram& hist, double mass = 0.9);

// Finite values outside the range (underflow + overflow) over all finite values; 0 when
// there are none.
double outside_fraction(const Histogram& hist);

// The bin of a spike that would flatten every other bar (a count over 4 times the next
// tallest, e.g. the zeros of a ReLU output), or -1. Drawn clipped, its count written.
int spike_bin(const Histogram& hist);

// True when most non-empty bars would be under 2 % of the plot's height on a linear
// count axis (the spike of spike_bin() aside): a log count axis shows them.
bool prefers_log_counts(const Histogram& hist);

}  // namespace tensorscope::plotting
