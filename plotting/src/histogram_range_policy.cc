// histogram_range_policy.cc — the re-range rules over one frame's histogram.
#include "tensorscope/plotting/histogram_range_policy.h"

#include <algorithm>

#include "tensorscope/plotting/histogram_range.h"

namespace tensorscope::plotting {

HistogramRangePolicy::HistogramRangePolicy(RerangeRules rules) : rules_(rules) {
  rules_.min_frames = std::max(1, rules_.min_frames);
}

HistogramRangePolicy::Decision HistogramRangePolicy::on_frame(const Histogram& hist) {
  frames_ = std::min(frames_ + 1, rules_.min_frames);  // no further than "due"
  const double outside = outside_fraction(hist);
  const bool due = frames_ >= rules_.min_frames;
  Decision d;
  if (outside > rules_.urgent_outside || (due && outside > rules_.max_outside)) {
    d.rerange = true;
    // Both tails grew, or the body moved to one side.
    const bool both = hist.underflow > 0 && hist.overflow > 0 &&
        std::min(hist.underflow, hist.overflow) * 4 >= std::max(hist.underflow, hist.overflow);
    d.reason = both ? "values grew" : "values moved";
  } else if (due && central_spread(hist) < rules_.min_spread) {
    d.rerange = true;
    d.reason = "values shrank";
  }
  return d;
}

void HistogramRangePolicy::took_range() { frames_ = 0; }

}  // namespace tensorscope::plotting
