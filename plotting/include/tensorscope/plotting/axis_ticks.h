// axis_ticks.h — "nice" axis tick positions and compact number formatting for frames.
//
// Used by the painters in the daemon's worker processes (histogram axes, statistics
// line; also meant for the line/heatmap/colorbar painters).
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorscope::plotting {

// Tick step and positions at 1, 2 or 5 times a power of ten inside [lo, hi], at most
// max_ticks of them. A tick within 1e-9 steps
// of zero is exactly 0. Returns an empty list for a non-finite or empty range.
struct AxisTicks {
  double step = 0;
  std::vector<double> values;
};
AxisTicks nice_ticks(double lo, double hi, int max_ticks);

// The symlog axis: sign(x) * log10(1 + |x| / linthresh) and its inverse (linthresh > 0):
// linear within about +-linthresh, logarithmic beyond, both signs and 0 allowed.
double symlog(double x, double linthresh);
double symlog_inverse(double t, double linthresh);

// Tick candidates of a symlog axis over [lo, hi], most telling first: 0 (when inside),
// then +-10^k from the outermost decade in, down to the linear threshold. A painter keeps
// each candidate whose label clears those it kept before.
std::vector<double> symlog_tick_candidates(double lo, double hi, double linthresh);

// A tick label with just enough digits to tell ticks `step` apart: "0.25", "1000.5",
// "-3", "1.5e-7", "2e38". Never "-0".
std::string format_tick(double value, double step);

// Compact %.4g-style number with short exponents: "0.001234", "-1.235e-5", "1e38",
// "nan", "inf", "-inf".
std::string format_number(double value);

// Exact below 10000, then 3 significant digits: "12.3k", "60k", "4.56M", "1.2G".
std::string format_count(uint64_t count);

}  // namespace tensorscope::plotting
