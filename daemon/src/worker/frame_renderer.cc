#include "worker/frame_renderer.h"

#include <cstring>
#include <optional>
#include <regex>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/record_frame.h"
#include "tensorscope/recording/wire_tensor.h"
#include "tensorscope/plotting/adaptive_histogram.h"
#include "tensorscope/plotting/heatmap.h"
#include "tensorscope/plotting/histogram.h"
#include "tensorscope/plotting/line_plot.h"
#include "tensorscope/plotting/pca.h"
#include "tensorscope/plotting/point_classes.h"
#include "tensorscope/plotting/scatter_plot.h"
#include "tensorscope/plotting/tsne.h"
#include "tensorscope/plotting/stats_history.h"
#include "tensorscope/plotting/steady_axis.h"

namespace tensorscope::daemon {
namespace {

// Heatmaps are reduced to at most this many cells per side (a 640x480 frame shows
// fewer anyway); every source row and column contributes.
constexpr int kHeatmapMaxSide = 256;

// The label of each of `rows` projected rows: the record's labels label its first
// dimension, so under the first-two-dims layout each label covers rows / labels
// consecutive rows. Empty when the counts do not fit together.
std::vector<int64_t> labels_of_rows(const RowLabels& labels, int64_t rows) {
  const auto count = static_cast<int64_t>(labels.values.size());
  if (count == 0 || rows % count != 0) return {};
  const int64_t each = rows / count;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) out.push_back(labels.values[static_cast<size_t>(r / each)]);
  return out;
}

// What a frame coloured by class tells besides its pixels.
FrameNotes notes_of(const plotting::PointClasses& classes, const plotting::ScatterLegend& drawn) {
  FrameNotes notes;
  notes.legend = legend_json(drawn);
  notes.classes_shown = true;
  notes.classes = classes.labels;
  notes.points = classes.points;
  notes.silhouette = classes.separation;
  return notes;
}

DrawFrame message_frame(plotting::FrameInfo info, std::string text) {
  return [info = std::move(info), text = std::move(text)](const plotting::FrameStyle& style, FrameNotes*) {
    return plotting::draw_message_frame(info, text, style);
  };
}

plotting::AdaptiveHistogramOptions histogram_options(const RenderConfig& config, const std::string& stream) {
  plotting::AdaptiveHistogramOptions o;
  o.bins = config.histogram_bins;
  o.margin = config.histogram_margin;
  const auto* axis_rule = first_match(config.histogram_axis_streams, stream);
  switch (axis_rule != nullptr ? axis_rule->value : config.histogram_axis) {
    case ValueAxis::kAuto: o.axis = plotting::AxisChoice::kAuto; break;
    case ValueAxis::kLinear: o.axis = plotting::AxisChoice::kLinear; break;
    case ValueAxis::kSymlog: o.axis = plotting::AxisChoice::kSymlog; break;
  }
  const auto* scale_rule = first_match(config.histogram_scale_streams, stream);
  switch (scale_rule != nullptr ? scale_rule->value : config.histogram_scale) {
    case CountScale::kAuto: o.counts = plotting::CountChoice::kAuto; break;
    case CountScale::kLinear: o.counts = plotting::CountChoice::kLinear; break;
    case CountScale::kLog: o.counts = plotting::CountChoice::kLog; break;
  }
  o.rerange.min_frames = config.histogram_rerange_frames;
  // A configured range (render.histogram_ranges) fixes the bins from the first frame.
  if (const RangeRule* range = first_match(config.histogram_ranges, stream)) {
    o.fixed = plotting::HistogramRange{range->lo, range->hi, config.histogram_bins};
  }
  return o;
}

// Says so plainly when a tensor has nothing to plot (constant, all zero, one element,
// no finite values); nullptr otherwise.
DrawFrame degenerate_frame(const plotting::FrameInfo& info, const std::shared_ptr<tensor::TensorStats>& stats) {
  std::string text = plotting::degenerate_description(*stats);
  if (text.empty()) return nullptr;
  return [info, stats, text = std::move(text)](const plotting::FrameStyle& style, FrameNotes*) {
    return plotting::draw_message_frame(info, text, style, stats.get());
  };
}

// Range from the body, kept while it fits, changed (and marked) when it does not.
class HistogramRenderer final : public FrameRenderer {
 public:
  HistogramRenderer(const RenderConfig& config, const std::string& stream)
      : histogram_(histogram_options(config, stream)) {}

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const tensor::TensorView view = recording::tensor_view(record);
    auto frame = std::make_shared<plotting::HistogramFrame>(histogram_.next(view, info.step));
    auto stats = std::make_shared<tensor::TensorStats>(frame->stats);
    if (DrawFrame degenerate = degenerate_frame(info, stats)) return degenerate;
    return [info = std::move(info), frame](const plotting::FrameStyle& style, FrameNotes*) {
      return plotting::draw_histogram_frame(info, frame->stats, frame->hist, frame->display, style);
    };
  }

 private:
  plotting::AdaptiveHistogram histogram_;  // reader thread
};

// 1-D values (any shape flattened), min/max per pixel column when longer than the frame.
class LineRenderer final : public FrameRenderer {
 public:
  explicit LineRenderer(int columns) : columns_(columns) {}

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const tensor::TensorView view = recording::tensor_view(record);
    auto stats = std::make_shared<tensor::TensorStats>(tensor::compute_stats(view));
    if (DrawFrame degenerate = degenerate_frame(info, stats)) return degenerate;
    auto series = std::make_shared<plotting::LineSeries>(plotting::reduce_line(view, columns_));
    const plotting::AxisLimits y = y_axis_.update(series->finite_min, series->finite_max);
    return [info = std::move(info), stats, series, y](const plotting::FrameStyle& style, FrameNotes*) {
      return plotting::draw_line_frame(info, *stats, *series, style, &y);
    };
  }

 private:
  const int columns_;
  plotting::SteadyAxis y_axis_;  // reader thread
};

// 2-D heatmaps (force2d: any shape flattened and zero-padded to a square).
class HeatmapRenderer final : public FrameRenderer {
 public:
  HeatmapRenderer(bool force_square, plotting::HeatmapReduction reduction)
      : force_square_(force_square), reduction_(reduction) {}

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const tensor::TensorView view = recording::tensor_view(record);
    auto stats = std::make_shared<tensor::TensorStats>(tensor::compute_stats(view));
    if (DrawFrame degenerate = degenerate_frame(info, stats)) return degenerate;
    auto heatmap = std::make_shared<plotting::Heatmap>(
        force_square_ ? plotting::force2d(view, kHeatmapMaxSide, reduction_)
                      : plotting::reduce_heatmap(view, kHeatmapMaxSide, kHeatmapMaxSide, reduction_));
    return [info = std::move(info), stats, heatmap](const plotting::FrameStyle& style, FrameNotes*) {
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
    const tensor::TensorView view = recording::tensor_view(record);
    auto stats = std::make_shared<tensor::TensorStats>(tensor::compute_stats(view));
    return [this, info = std::move(info), stats](const plotting::FrameStyle& style, FrameNotes*) {
      history_.add(info.step, *stats);
      return plotting::draw_stats_frame(info, *stats, history_, style);
    };
  }

 private:
  plotting::StatsHistory history_;  // render thread
};

// Rows projected on their top two principal components. Computed on the reader thread
// straight from shared memory (no copy of a possibly huge tensor); only the n x 2
// projection goes to the render thread.
class PcaRenderer final : public FrameRenderer {
 public:
  explicit PcaRenderer(const RenderConfig& config) {
    options_.layout = config.pca_layout == PcaLayout::kFirstTwoDims ? plotting::PcaRowLayout::kFirstTwoDims
                                                                    : plotting::PcaRowLayout::kFirstDim;
  }

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const tensor::TensorView view = recording::tensor_view(record);
    auto stats = std::make_shared<tensor::TensorStats>(tensor::compute_stats(view));
    if (DrawFrame degenerate = degenerate_frame(info, stats)) return degenerate;
    auto result = std::make_shared<plotting::PcaResult>(plotting::compute_pca(view, options_));
    plotting::ScatterLimits limits{};
    std::shared_ptr<const plotting::PointClasses> classes;
    if (result->ok()) {
      std::vector<int64_t> labels;
      if (record.row_labels) labels = labels_of_rows(*record.row_labels, result->projection.rows());
      // Labelled rows (often another batch each frame): turned onto the previous frame's
      // class centroids; else the signs of the previous frame's scores (the same rows).
      if (labels.empty() || !classes_.align(&result->projection, labels)) {
        plotting::align_signs(&result->projection, previous_);
      }
      previous_ = result->projection;
      const plotting::ScatterLimits e = plotting::point_extent(result->projection);
      limits = {x_axis_.update(e.x.lo, e.x.hi), y_axis_.update(e.y.lo, e.y.hi)};
      if (record.row_labels) {
        classes = std::make_shared<const plotting::PointClasses>(
            classes_.classify(result->projection, labels, record.row_labels->names));
      }
    }
    return
        [info = std::move(info), stats, result, limits, classes](const plotting::FrameStyle& style, FrameNotes* notes) {
          plotting::ScatterLegend drawn;
          cv::Mat image = plotting::draw_pca_frame(info, stats.get(), *result, style, &limits, classes.get(), &drawn);
          if (notes != nullptr && classes) *notes = notes_of(*classes, drawn);
          return image;
        };
  }

 private:
  plotting::PcaOptions options_;
  // Reader thread: the previous projection (for its signs), the axes and the classes.
  Eigen::MatrixXf previous_;
  plotting::SteadyAxis x_axis_, y_axis_;
  plotting::ClassTracker classes_;
};

// A 2-D t-SNE embedding of the rows, warm-started from the stream's previous frame. The
// reader thread copies the rows t-SNE will use (every k-th row above tsne_max_rows, as
// the embedder would pick them) so the slot is released at once; the embedding runs on
// the render thread, which owns the embedder.
class TsneRenderer final : public FrameRenderer {
 public:
  explicit TsneRenderer(const RenderConfig& config) : embedder_(options_from(config)) {
    max_rows_ = config.tsne_max_rows;
  }

  DrawFrame prepare(const RecordView& record, plotting::FrameInfo info) override {
    const tensor::TensorView view = recording::tensor_view(record);
    auto stats = std::make_shared<tensor::TensorStats>(tensor::compute_stats(view));
    if (DrawFrame degenerate = degenerate_frame(info, stats)) return degenerate;
    const int64_t rows = view.shape.empty() ? 1 : view.shape[0];
    const int64_t numel = view.numel();
    if (rows <= 0 || numel <= 0) return message_frame(std::move(info), "empty tensor: nothing to embed");
    const int64_t features = numel / rows;
    const int64_t stride = rows > max_rows_ ? (rows + max_rows_ - 1) / max_rows_ : 1;
    const int64_t kept = (rows + stride - 1) / stride;
    const size_t element = tensor::element_size(view.type);
    const uint64_t row_bytes = static_cast<uint64_t>(features) * element;
    if (static_cast<uint64_t>(kept) * row_bytes > kMaxCopyBytes) {
      return message_frame(std::move(info),
                           "too large for t-SNE: " + std::to_string(kept) + " rows x " + std::to_string(features) +
                               " features (use pca)");
    }
    auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(kept * row_bytes));
    const auto* base = static_cast<const uint8_t*>(view.data);
    for (int64_t r = 0; r < kept; ++r) {
      std::memcpy(copy->data() + r * row_bytes, base + r * stride * row_bytes, row_bytes);
    }
    std::shared_ptr<const RowLabels> labels;  // of the kept rows
    if (record.row_labels) {
      auto kept_labels = std::make_shared<RowLabels>();
      kept_labels->names = record.row_labels->names;
      for (int64_t r = 0; r < kept; ++r) {
        kept_labels->values.push_back(record.row_labels->values[static_cast<size_t>(r * stride)]);
      }
      labels = std::move(kept_labels);
    }
    std::string note = std::to_string(rows) + " rows x " + std::to_string(features) + " features";
    if (stride > 1)
      note += ", subsampled to " + std::to_string(kept) + " rows (every " + std::to_string(stride) + "th)";
    return [this, info = std::move(info), stats, copy, kept, features, type = view.type, note, labels](
               const plotting::FrameStyle& style, FrameNotes* notes) {
      tensor::TensorView rows_view;
      rows_view.data = copy->data();
      rows_view.type = type;
      rows_view.shape = {kept, features};
      // Rows labelled otherwise than last frame's are other samples (another batch): a warm
      // start from unrelated points would mix the classes, so the run starts afresh.
      if (labels && labels->values != previous_labels_) {
        embedder_.reset();
        x_axis_ = y_axis_ = plotting::SteadyAxis();  // a fresh run has a scale of its own
        classes_.break_trails();                     // and a layout of its own
      }
      if (labels) previous_labels_ = labels->values;
      const plotting::TsneResult result = embedder_.embed(rows_view);
      if (!result.message.empty() && result.embedding.rows() == 0) {
        return plotting::draw_message_frame(info, result.message, style);
      }
      Eigen::MatrixXf embedding = result.embedding;
      std::vector<int64_t> of_rows;  // the embedding's rows are kept rows (row_index)
      if (labels) {
        of_rows.reserve(result.row_index.size());
        for (const int64_t r : result.row_index) of_rows.push_back(labels->values[static_cast<size_t>(r)]);
        classes_.align(&embedding, of_rows);  // a fresh run (other rows) comes out in any orientation
      }
      plotting::ScatterLabels scatter;
      scatter.x_title = "t-SNE 1";
      scatter.y_title = "t-SNE 2";
      scatter.note = note + (result.message.empty() ? "" : "; " + result.message);
      const plotting::ScatterLimits e = plotting::point_extent(embedding);
      const plotting::ScatterLimits limits{x_axis_.update(e.x.lo, e.x.hi), y_axis_.update(e.y.lo, e.y.hi)};
      plotting::PointClasses classes;
      if (labels) {
        classes = classes_.classify(embedding, of_rows, labels->names);
        scatter.classes = &classes;
      }
      plotting::ScatterLegend drawn;
      cv::Mat image = plotting::draw_scatter_frame(info, stats.get(), embedding, scatter, style, &limits, &drawn);
      if (notes != nullptr && labels) *notes = notes_of(classes, drawn);
      return image;
    };
  }

 private:
  static constexpr uint64_t kMaxCopyBytes = uint64_t{256} << 20;

  static plotting::TsneOptions options_from(const RenderConfig& config) {
    plotting::TsneOptions options;
    options.perplexity = config.tsne_perplexity;
    options.iterations = config.tsne_iterations;
    options.warm_iterations = config.tsne_warm_iterations;
    options.max_rows = config.tsne_max_rows;
    options.seed = static_cast<uint64_t>(config.tsne_seed);
    return options;
  }

  int64_t max_rows_ = 0;
  plotting::TsneEmbedder embedder_;       // render thread
  plotting::SteadyAxis x_axis_, y_axis_;  // render thread
  plotting::ClassTracker classes_;        // render thread
  std::vector<int64_t> previous_labels_;  // render thread: the last frame's kept rows' labels
};

}  // namespace

std::string legend_json(const plotting::ScatterLegend& legend) {
  if (legend.entries.empty() || legend.frame.width <= 0 || legend.frame.height <= 0) return {};
  const double w = legend.frame.width, h = legend.frame.height;
  const auto box = [&](const cv::Rect& r) {
    return nlohmann::json::array({r.x / w, r.y / h, (r.x + r.width) / w, (r.y + r.height) / h});
  };
  nlohmann::json classes = nlohmann::json::array();
  for (const plotting::ScatterLegend::Entry& e : legend.entries) {
    classes.push_back({{"name", e.name}, {"color", {e.color[2], e.color[1], e.color[0]}}, {"box", box(e.box)}});
  }
  return nlohmann::json{{"plot", box(legend.plot)}, {"classes", classes}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::unique_ptr<FrameRenderer> make_frame_renderer(RenderMode mode, const RenderConfig& config, int frame_width,
                                                   const std::string& stream) {
  const auto reduction = config.heatmap_reduction == HeatmapReduction::kMaxAbs ? plotting::HeatmapReduction::kMaxAbs
                                                                               : plotting::HeatmapReduction::kMean;
  switch (mode) {  // every mode (a new one without a case fails the build: -Werror=switch)
    case RenderMode::kHistogram: return std::make_unique<HistogramRenderer>(config, stream);
    case RenderMode::kLine: return std::make_unique<LineRenderer>(frame_width);
    case RenderMode::kHeatmap: return std::make_unique<HeatmapRenderer>(false, reduction);
    case RenderMode::kForce2d: return std::make_unique<HeatmapRenderer>(true, reduction);
    case RenderMode::kStats: return std::make_unique<StatsRenderer>();
    case RenderMode::kPca: return std::make_unique<PcaRenderer>(config);
    case RenderMode::kTsne: return std::make_unique<TsneRenderer>(config);
    case RenderMode::kDefault:
    case RenderMode::kAuto: break;
  }
  return nullptr;
}

}  // namespace tensorscope::daemon
