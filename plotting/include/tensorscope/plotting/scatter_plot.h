// scatter_plot.h — frames with a 2-D point cloud: the `pca` mode (draw_pca_frame) and a
// generic scatter painter other 2-D embeddings (t-SNE) reuse.
//
// Used by the daemon's worker processes, one frame per tensor. Points are splatted as
// small anti-aliased discs into a density buffer and composited with opacity
// 1 - (1 - p)^coverage, so dense clouds show their density instead of a solid blob;
// optionally coloured by row index with a perceptual colormap (viridis) and a small
// legend. Points with a NaN/Inf coordinate are skipped and counted in the note line;
// all-equal points and a single point get a sensible range. Frames are CV_8UC3 of
// exactly style.width x style.height (clamped like every frame); no exception escapes.
// Thread safety: pure functions, thread-safe.
#pragma once

#include <string>

#include <Eigen/Core>
#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/plotting/pca.h"
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
cv::Mat draw_scatter_frame(const FrameInfo& info, const tensor::TensorStats* stats, const Eigen::MatrixXf& points,
                           const ScatterLabels& labels, const FrameStyle& style, const ScatterLimits* limits = nullptr);

// The `pca` frame: the first two columns of result.projection with the explained
// variance on the axis titles and the matrix shape and method in the note; a message
// frame when !result.ok().
cv::Mat draw_pca_frame(const FrameInfo& info, const tensor::TensorStats* stats, const PcaResult& result,
                       const FrameStyle& style, const ScatterLimits* limits = nullptr);

}  // namespace tensorscope::plotting
