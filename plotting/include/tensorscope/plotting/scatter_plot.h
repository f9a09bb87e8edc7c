// scatter_plot.h — frames with a 2-D point cloud: the `pca` mode (draw_pca_frame) and a
// generic scatter painter other 2-D embeddings (t-SNE) reuse.
//
// Used by the daemon's worker processes, one frame per tensor. Points are splatted as
// small anti-aliased discs into a density buffer and composited with opacity
// 1 - (1 - p)^coverage, so dense clouds show their density instead of a solid blob;
// optionally coloured by row index with a perceptual colormap (viridis) and a small
// legend, or by class (point_classes.h) with the classes' legend, centroids and trails. Points with a NaN/Inf coordinate are skipped and counted in the note line;
// all-equal points and a single point get a sensible range. Frames are CV_8UC3 of
// exactly style.width x style.height (clamped like every frame); no exception escapes.
// Thread safety: pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include <Eigen/Core>
#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/pca.h"
#include "tensorscope/plotting/point_classes.h"
#include "tensorscope/plotting/steady_axis.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace tensorscope::plotting {

struct ScatterLabels {
  std::string x_title;  // e.g. "PC1 (43.2%)", drawn under the x axis
  std::string y_title;  // e.g. "PC2 (12.0%)", drawn above the y axis
  // A line under the plot: "16 rows x 1000 features, randomized PCA",
  // "subsampled 5000 of 20000 rows", ...
  std::string note;
  // Colour point i by i / (n - 1) (viridis) and show a legend "row 0 ... row n-1";
  // otherwise every point has style.bar's colour.
  bool color_by_index = true;
  std::string index_name = "row";
  // When set (rows pushed with labels): each point in its class's colour, a legend of the
  // classes under the top line, each class's centroid ringed and its trail over the last
  // frames drawn, and the separation (silhouette) at the end of the note line. Replaces
  // color_by_index.
  const PointClasses* classes = nullptr;
};

// Where a frame coloured by class shows what (pixels of the frame): the plot's box and each
// legend entry's box, name and colour; what lets the live view highlight a class under the
// pointer. Empty (no entries) for frames without classes.
struct ScatterLegend {
  struct Entry {
    std::string name;
    cv::Vec3b color;  // BGR, as drawn
    cv::Rect box;     // the swatch and the name
  };
  cv::Size frame;  // the frame's size
  cv::Rect plot;   // the points' box
  std::vector<Entry> entries;
};

// Axis ranges kept across a stream's frames (SteadyAxis), instead of each frame's own.
struct ScatterLimits {
  AxisLimits x;
  AxisLimits y;
};

// The finite extent of the first two columns of `points` (a single column: y is 0):
// {x: [min, max], y: [min, max]}; NaN limits when no point is finite.
ScatterLimits point_extent(const Eigen::MatrixXf& points);

// Header (with the statistics line when stats != nullptr) and a scatter plot of the
// n x 2 `points` (extra columns are ignored; a single column is plotted against 0),
// over `limits` when given, else around the points.
// `legend`, when given, receives where the classes' legend and the plot were drawn.
cv::Mat draw_scatter_frame(const FrameInfo& info, const tensor::TensorStats* stats, const Eigen::MatrixXf& points,
                           const ScatterLabels& labels, const FrameStyle& style, const ScatterLimits* limits = nullptr,
                           ScatterLegend* legend = nullptr);

// The `pca` frame: the first two columns of result.projection with the explained
// variance on the axis titles and the matrix shape and method in the note; a message
// frame when !result.ok().
cv::Mat draw_pca_frame(const FrameInfo& info, const tensor::TensorStats* stats, const PcaResult& result,
                       const FrameStyle& style, const ScatterLimits* limits = nullptr,
                       const PointClasses* classes = nullptr, ScatterLegend* legend = nullptr);

// "silhouette 0.62 (10 classes)": how a frame states its classes' separation.
std::string separation_text(const PointClasses& classes);

}  // namespace tensorscope::plotting
