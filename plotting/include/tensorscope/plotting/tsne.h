// tsne.h — Barnes-Hut t-SNE: a 2-D embedding of a tensor's rows, warm-started frame
// to frame so a video of successive steps is coherent.
//
// Used by the daemon's worker processes for the `tsne` render mode; the drawing is
// done elsewhere (scatter_plot.h). Rows are the first dimension, the other
// dimensions are flattened into features. Pipeline: read rows (non-finite rows dropped,
// more than max_rows subsampled with a fixed stride), center and scale, reduce to at
// most 50 features (randomized PCA), exact kNN (k = 3·perplexity, blocked brute force),
// perplexity-calibrated sparse P, then gradient descent with momentum and gains
// (van der Maaten's bhtsne) whose repulsive forces come from a Barnes-Hut quadtree.
// Untrusted input (NaN, Inf, huge values, duplicates, constant rows, any dtype, any
// shape) never crashes and never throws: problems are reported in TsneResult::message.
// Determinism: for a fixed seed the result does not depend on the thread count (every
// floating-point reduction runs in a fixed order).
// Thread safety: TsneEmbedder is stateful (it keeps the previous embedding) and not
// thread-safe; use one per stream. embed() itself uses `threads` worker std::threads.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting {

struct TsneOptions {
  double perplexity = 30;
  int iterations = 750;       // fresh run (exaggeration phase included)
  int warm_iterations = 150;  // warm-started run, no exaggeration
  double theta = 0.5;         // Barnes-Hut accuracy: 0 = exact, clamped to 0.7
  double learning_rate = 0;   // 0 = auto: max(n / early_exaggeration / 4, 50)
  double early_exaggeration = 12;
  int exaggeration_iterations = 250;
  int max_rows = 10000;  // above: deterministic (strided) subsample
  int threads = 0;       // 0 = std::thread::hardware_concurrency()
  uint64_t seed = 0;
};

struct TsneResult {
  Eigen::MatrixXf embedding;       // n × 2, one row per entry of row_index
  std::vector<int64_t> row_index;  // which input rows, after dropping and subsampling
  bool subsampled = false;
  bool warm_started = false;  // started from the previous call's embedding
  int iterations_run = 0;
  double kl_divergence = 0;  // KL(P || Q) at the end (BH estimate of Q's norm)
  std::string message;       // empty when all went well; else why / what was dropped
};

class TsneEmbedder {
 public:
  explicit TsneEmbedder(TsneOptions options = {});

  // Embeds the rows of `rows` (first dim = points, the rest flattened = features).
  // Warm-starts from the previous result when the kept rows are the same input rows
  // as last time (same row_index); otherwise starts fresh (PCA initialization scaled
  // to std 1e-4, seeded random when the data is degenerate). Fewer than 5 usable rows:
  // empty embedding and a message. Never throws.
  TsneResult embed(const tensor::TensorView& rows);

  // Forgets the previous embedding: the next embed() starts fresh.
  void reset();

  const TsneOptions& options() const { return options_; }

 private:
  TsneOptions options_;
  std::vector<int64_t> previous_rows_;
  Eigen::MatrixXd previous_embedding_;  // n × 2, empty = none
};

}  // namespace tensorscope::plotting
