// pca.h — principal component analysis of a tensor's rows, for the `pca` render mode.
//
// Used by the daemon's worker processes (one call per frame). The tensor is read as a
// rows x features matrix straight from its TensorView (untrusted bytes, any of the 10
// element types), block by block: each element of the buffer is read once per pass,
// never copied whole. Columns are centred; NaN/Inf elements are replaced by their
// column's mean of finite values (the result's `note` says how many). Small inputs get
// an exact eigendecomposition of the smaller Gram matrix (rows x rows or features x
// features, accumulated in double); large ones the randomized range finder of Halko,
// Martinsson and Tropp (2011) in Gram form: a Gaussian test block Z of components +
// oversampling columns, q = power_iterations times Z <- orth(G Z) (re-orthonormalised
// after every product, cf. their Algorithm 4.4), then Rayleigh-Ritz with G Z: q + 1
// passes over the data after the pass for the column means. Big matrix products run on std::threads over a
// fixed partition of the data, so a result depends only on the input, the options and
// the machine (not on timing or the thread count). Never throws: anything that cannot
// be computed (no rows, one row, invalid view, out of memory) comes back in `message`.
// Thread safety: pure function, thread-safe (it starts and joins its own threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

enum class PcaRowLayout : uint8_t {
  kFirstDim,      // rows = shape[0], features = product of the other dims
  kFirstTwoDims,  // rows = shape[0] * shape[1], features = the rest (pytorch_inspector)
};

struct PcaOptions {
  PcaRowLayout layout = PcaRowLayout::kFirstDim;
  int components = 2;  // clamped to [1, 16]
  // Exact when min(rows, features) < exact_below (or when the randomized subspace
  // would not be smaller than min(rows, features)); randomized otherwise.
  int64_t exact_below = 256;
  int oversampling = 10;     // extra subspace dimensions of the randomized method
  int power_iterations = 2;  // q of Halko et al.; clamped to [0, 20]
  uint64_t seed = 0;         // of the Gaussian test matrix
  int max_threads = 0;       // 0 = std::thread::hardware_concurrency(), at most 16
};

struct PcaResult {
  // rows x components (float): the centred rows projected on the principal axes
  // (scores, = U * Sigma). Components beyond the data's rank are 0. Signs are fixed so
  // that the largest-magnitude score of each component is positive.
  Eigen::MatrixXf projection;
  // Per component: its variance over the total variance (squared Frobenius norm of the
  // centred data, NaN/Inf replaced); 0 beyond the rank; all 0 when the total is 0.
  std::vector<float> explained_variance_ratio;
  int64_t rows = 0;
  int64_t features = 0;
  bool randomized = false;
  // Why nothing could be computed ("1 row: PCA needs at least 2", ...); empty on
  // success, when `projection` and `explained_variance_ratio` are valid.
  std::string message;
  // Remarks on a successful result ("12 NaN/Inf values replaced by column means",
  // "zero variance: all rows equal").
  std::string note;

  bool ok() const { return message.empty(); }
};

// rows/features of `view` under `layout` (a scalar is 1 x 1; a 1-D tensor has 1
// feature; kFirstTwoDims of a 1-D tensor falls back to kFirstDim). {0, 0} for an
// invalid view.
void pca_matrix_shape(const tensor::TensorView& view, PcaRowLayout layout, int64_t* rows, int64_t* features);

PcaResult compute_pca(const tensor::TensorView& view, const PcaOptions& options);

// A component's sign is arbitrary, so a video of projections may mirror from one frame
// to the next. Flips each column of `projection` whose scores run against the same
// column of `previous` (a correlation below -0.3 over rows that correspond: same row
// count), so that motion in the video means change in the data. Columns without such a
// counterpart keep compute_pca's sign. Returns the number of columns flipped.
int align_signs(Eigen::MatrixXf* projection, const Eigen::MatrixXf& previous);

}  // namespace tensorscope::plotting
