// tsne_affinities.h — internal: the input side of t-SNE. Reduces rows to at most 50
// features (randomized PCA), finds exact k nearest neighbours (blocked brute force) and
// turns them into the symmetric, perplexity-calibrated sparse matrix P.
//
// Used by TsneEmbedder (tsne.cc) in the daemon's worker processes.
// Determinism: blocks have a fixed size whatever the thread count, neighbour ties are
// broken by index and every sum runs in a fixed order, so the result depends only on
// the data and the seed.
// Thread safety: stateless functions; each uses `threads` std::threads internally.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

namespace tensorscope::plotting::internal {

// Symmetric sparse matrix in CSR form; values sum to 1 over all entries.
struct SparseAffinities {
  std::vector<int64_t> row_begin;  // n + 1 entries
  std::vector<int32_t> column;
  std::vector<double> value;
};

// Centres the columns of x and projects it on its top `max_dims` principal components
// (randomized range finder with one power iteration, seeded) when it has more
// columns; otherwise only centres. x must hold finite values of modest magnitude.
Eigen::MatrixXd reduce_dimensions(const Eigen::MatrixXd& x, int max_dims, uint64_t seed, int threads);

// k nearest neighbours of every row of x (self excluded), by squared Euclidean
// distance, ties broken by the lower index. Output row-major n × k.
void nearest_neighbours(const Eigen::MatrixXd& x, int k, int threads, std::vector<int32_t>* index,
                        std::vector<double>* distance_sq);

// Gaussian conditional probabilities calibrated to `perplexity` over each row's k
// neighbours, symmetrized: P = (P_cond + P_cond^T) / (2n).
SparseAffinities perplexity_affinities(int64_t n, int k, const std::vector<int32_t>& index,
                                       const std::vector<double>& distance_sq, double perplexity, int threads);

}  // namespace tensorscope::plotting::internal
