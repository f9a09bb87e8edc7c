// adaptive_histogram.cc — the first range, the re-range check, the change notice.
#include "tensorscope/plotting/adaptive_histogram.h"

#include <string>
#include <utility>

#include "tensorscope/plotting/axis_ticks.h"
#include "tensorscope/plotting/value_sketch.h"
#include "tensorscope/tensor/element_blocks.h"

namespace tensorscope::plotting {
namespace {

// Statistics and the value sketch in one pass.
tensor::TensorStats stats_and_sketch(const tensor::TensorView& view, ValueSketch* sketch) {
  tensor::StatsAccumulator acc;
  tensor::NonFiniteCounts nf;
  tensor::for_each_finite_block(view, &nf, [&](const double* v, size_t n) {
    acc.add_block(v, n);
    sketch->add_block(v, n);
  });
  return acc.finish(view.valid() ? static_cast<uint64_t>(view.numel()) : 0, nf);
}

bool has_spread(const tensor::TensorStats& s) { return s.finite_count > 0 && s.min < s.max; }

std::string range_text(const HistogramRange& r) {
  return format_number(r.lo) + " .. " + format_number(r.hi) + (r.axis == HistogramAxis::kSymlog ? " symlog" : "");
}

}  // namespace

AdaptiveHistogram::AdaptiveHistogram(AdaptiveHistogramOptions options)
    : options_(std::move(options)), policy_(options_.rerange) {}

bool AdaptiveHistogram::log_counts_for(const Histogram& hist) const {
  if (options_.counts == CountChoice::kAuto) return prefers_log_counts(hist);
  return options_.counts == CountChoice::kLog;
}

HistogramFrame AdaptiveHistogram::next(const tensor::TensorView& view, int64_t step) {
  HistogramFrame f;
  const BodyRangeOptions body{options_.bins, options_.margin, !tensor::is_floating(view.type), options_.axis};
  if (!range_) {
    ValueSketch sketch;
    f.stats = stats_and_sketch(view, &sketch);
    f.hist = compute_histogram(view, options_.fixed ? *options_.fixed : choose_body_range(sketch, body));
    if (options_.fixed || has_spread(f.stats)) {
      range_ = f.hist.range;
      log_counts_ = log_counts_for(f.hist);
      policy_.took_range();
    }
  } else {
    summarize(view, &*range_, options_.bins, options_.margin, &f.stats, &f.hist);
    if (!options_.fixed && has_spread(f.stats)) {
      const HistogramRangePolicy::Decision d = policy_.on_frame(f.hist);
      if (d.rerange) {
        policy_.took_range();
        const HistogramRange chosen = choose_body_range(sketch_values(view), body);
        if (!(chosen == *range_)) {
          note_ =
              "range changed at step " + std::to_string(step) + " (" + d.reason + "; was " + range_text(*range_) + ")";
          range_ = chosen;
          f.hist = compute_histogram(view, chosen);
          log_counts_ = log_counts_for(f.hist);
          frames_since_change_ = 0;
        }
      }
    }
  }
  f.display.log_counts = range_ ? log_counts_ : log_counts_for(f.hist);
  if (frames_since_change_ >= 0 && frames_since_change_ <= options_.notice_frames) {
    f.display.range_changed = frames_since_change_ == 0;
    f.display.range_note = note_;
    ++frames_since_change_;
  }
  return f;
}

}  // namespace tensorscope::plotting
