// heatmap.h — the `heatmap` and `force2d` render modes: a matrix as coloured cells.
//
// Used by the daemon's worker processes. reduce_heatmap() views a tensor as rows x cols
// (1-D: one row; 2-D as is; more: first dim x product of the rest) and, when that is
// larger than max_rows x max_cols, reduces blocks of it by mean or by max |x|, so every
// row and column contributes to a cell (nothing is skipped). It makes one pass over the
// data in memory order (about 1-2 ms per 1M float32). force2d() lays any tensor out as
// the smallest square that holds it, the tail filled with explicit zeros. The painter
// draws cells with the viridis colormap over limits taken from the body of the cell
// values (a few extreme cells do not wash out the rest; they are marked and counted), a
// colorbar with values, row/column axes with the original indices, and cells without a
// finite value in a distinct colour.
// No exception escapes; NaN, Inf, empty and huge inputs never crash.
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "tensorscope/plotting/frame_painter.h"
#include "tensorscope/tensor/tensor_stats.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

inline constexpr int kMaxHeatmapSide = 4096;

enum class HeatmapReduction : uint8_t {
  kMean,    // mean of the block's finite values
  kMaxAbs,  // the block's finite value of largest magnitude (sign kept)
};

// Flags of one cell.
inline constexpr uint8_t kCellNaN = 1;
inline constexpr uint8_t kCellPosInf = 2;
inline constexpr uint8_t kCellNegInf = 4;

struct Heatmap {
  int64_t rows = 0;  // the source matrix (after the 2-D view, before reduction)
  int64_t cols = 0;
  int out_rows = 0;  // cells
  int out_cols = 0;
  HeatmapReduction reduction = HeatmapReduction::kMean;
  // out_rows * out_cols, row-major. Cell (r, c) covers source rows
  // [r*rows/out_rows, (r+1)*rows/out_rows) and likewise columns. NaN when the block
  // has no finite value.
  std::vector<double> values;
  std::vector<uint8_t> flags;  // kCellNaN | kCellPosInf | kCellNegInf per cell
  double value_min = 0;        // over finite cell values; NaN when none
  double value_max = 0;
  // Colour limits: the body of the finite cell values (choose_body_range: the full
  // range unless a few cells lie far outside it, then the 1st to 99th percentile),
  // edges on a nice grid; NaN when no finite cell. Cells outside are drawn in the
  // colorbar's end-cap colours (white above, black below) and counted.
  double color_lo = 0;
  double color_hi = 0;
  int64_t cells_above = 0;
  int64_t cells_below = 0;
  uint64_t nan_count = 0;  // elements
  uint64_t pos_inf_count = 0;
  uint64_t neg_inf_count = 0;
  bool square = false;       // made by force2d: rows = cols = side of the square
  int64_t padded_zeros = 0;  // force2d: zeros appended to fill the square

  // Source row/column where cell r/c starts.
  int64_t row_start(int r) const;
  int64_t col_start(int c) const;
};

// max_rows/max_cols are clamped to [1, kMaxHeatmapSide]. An invalid or empty view gives
// an empty heatmap (out_rows == 0).
Heatmap reduce_heatmap(const tensor::TensorView& view, int max_rows, int max_cols,
                       HeatmapReduction reduction = HeatmapReduction::kMean);

// Any shape flattened into a side x side square, side = ceil(sqrt(numel)), filled row
// by row; the side*side - numel cells after the data are zeros (padded_zeros), then
// block-mean reduced to at most max_side x max_side.
Heatmap force2d(const tensor::TensorView& view, int max_side, HeatmapReduction reduction = HeatmapReduction::kMean);

// Header with statistics, the cells (viridis over [color_lo, color_hi]; cells beyond
// in white/black; no-finite-value cells in a distinct red), a colorbar with value ticks
// and end caps, with their cell counts, when cells lie beyond it, row and column axes
// with source indices, and a footer naming the reduction, NaN/Inf counts and padding.
cv::Mat draw_heatmap_frame(const FrameInfo& info, const tensor::TensorStats& stats, const Heatmap& heatmap,
                           const FrameStyle& style);

}  // namespace tensorscope::plotting
