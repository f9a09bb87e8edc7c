#include "frame_renderer.h"

#include <optional>

#include "record_frame.h"
#include "tensorscope/plotting/heatmap.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/line_plot.h"
#include "tensorscope/plotting/stats_history.h"

namespace tensorscope::daemon {
namespace {

// Heatmaps are reduced to at most this many cells per side (a 640x480 frame shows
// fewer anyway); every source row and column contributes.
constexpr int kHeatmapMaxSide = 256;

DrawFrame message_frame(plotting::FrameInfo info, std::string text) {
  return [info = std::move(info), text = std::move(text)](const plotting::FrameStyle& style) {
    return plotting::draw_message_frame(info, text, style);
  };
}

class HistogramRenderer final : public FrameRenderer {
 public:
  explicit HistogramRenderer(const RenderConfig& config) : config_(config) {}

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const plotting::TensorView view = tensor_view(record);
    if (view.numel() == 0) return message_frame(std::move(info), "empty tensor: nothing to plot");
    auto stats = std::make_shared<plotting::TensorStats>();
    auto hist = std::make_shared<plotting::Histogram>();
    plotting::summarize(view, range_ ? &*range_ : nullptr, config_.histogram_bins,
                        config_.histogram_margin, stats.get(), hist.get());
    // Bins are fixed from the first frame that has a spread of finite values (a constant
    // first frame, e.g. a zero-initialized bias, would give a uselessly narrow range).
    if (!range_ && stats->finite_count > 0 && stats->min < stats->max) range_ = hist->range;
    return [info = std::move(info), stats, hist](const plotting::FrameStyle& style) {
      return plotting::draw_histogram_frame(info, *stats, *hist, style);
    };
  }

 private:
  const RenderConfig& config_;
  std::optional<plotting::HistogramRange> range_;  // reader thread
};

// 1-D values (any shape flattened), min/max per pixel column when longer than the frame.
class LineRenderer final : public FrameRenderer {
 public:
  explicit LineRenderer(int columns) : columns_(columns) {}

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const plotting::TensorView view = tensor_view(record);
    auto stats = std::make_shared<plotting::TensorStats>(plotting::compute_stats(view));
    auto series = std::make_shared<plotting::LineSeries>(plotting::reduce_line(view, columns_));
    return [info = std::move(info), stats, series](const plotting::FrameStyle& style) {
      return plotting::draw_line_frame(info, *stats, *series, style);
    };
  }

 private:
  const int columns_;
};

// 2-D heatmaps (force2d: any shape flattened and zero-padded to a square).
class HeatmapRenderer final : public FrameRenderer {
 public:
  HeatmapRenderer(bool force_square, plotting::HeatmapReduction reduction)
      : force_square_(force_square), reduction_(reduction) {}

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const plotting::TensorView view = tensor_view(record);
    auto stats = std::make_shared<plotting::TensorStats>(plotting::compute_stats(view));
    auto heatmap = std::make_shared<plotting::Heatmap>(
        force_square_ ? plotting::force2d(view, kHeatmapMaxSide, reduction_)
                      : plotting::reduce_heatmap(view, kHeatmapMaxSide, kHeatmapMaxSide, reduction_));
    return [info = std::move(info), stats, heatmap](const plotting::FrameStyle& style) {
      return plotting::draw_heatmap_frame(info, *stats, *heatmap, style);
    };
  }

 private:
  const bool force_square_;
  const plotting::HeatmapReduction reduction_;
};

// Mean, std, min, max and NaN/Inf of the stream over steps. The history lives on the
// render thread (frames are drawn in order); prepare() only computes the statistics.
class StatsRenderer final : public FrameRenderer {
 public:
  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const plotting::TensorView view = tensor_view(record);
    auto stats = std::make_shared<plotting::TensorStats>(plotting::compute_stats(view));
    return [this, info = std::move(info), stats](const plotting::FrameStyle& style) {
      history_.add(info.step, *stats);
      return plotting::draw_stats_frame(info, *stats, history_, style);
    };
  }

 private:
  plotting::StatsHistory history_;  // render thread
};

}  // namespace

bool can_render(const std::string& mode) {
  return mode == "histogram" || mode == "line" || mode == "heatmap" || mode == "force2d" ||
         mode == "stats";
}

std::unique_ptr<FrameRenderer> make_frame_renderer(const std::string& mode,
                                                   const RenderConfig& config, int frame_width) {
  const auto reduction = config.heatmap_reduction == "max_abs" ? plotting::HeatmapReduction::kMaxAbs
                                                               : plotting::HeatmapReduction::kMean;
  if (mode == "histogram") return std::make_unique<HistogramRenderer>(config);
  if (mode == "line") return std::make_unique<LineRenderer>(frame_width);
  if (mode == "heatmap") return std::make_unique<HeatmapRenderer>(false, reduction);
  if (mode == "force2d") return std::make_unique<HeatmapRenderer>(true, reduction);
  if (mode == "stats") return std::make_unique<StatsRenderer>();
  return nullptr;
}

}  // namespace tensorscope::daemon
