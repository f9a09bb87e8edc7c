// tsne_affinities.cc — dimension reduction, exact kNN and perplexity calibration.
#include "tsne_affinities.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "parallel_chunks.h"

namespace tensorscope::plotting::internal {
namespace {

// Rows per kNN block: fixed, so each block's GEMM is the same whatever the threads.
constexpr int64_t kKnnBlockRows = 256;
constexpr int kPowerIterations = 1;
constexpr int kOversampling = 10;
constexpr int kCalibrationSteps = 200;
constexpr double kEntropyTolerance = 1e-5;

// Deterministic standard normals (Box-Muller over mt19937_64, the same on every
// standard library, unlike std::normal_distribution).
double standard_normal(std::mt19937_64& rng) {
  constexpr double kTwoPi = 6.283185307179586;
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53;
  const double u2 = static_cast<double>(rng() >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

Eigen::MatrixXd orthonormal_basis(const Eigen::MatrixXd& y) {
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(y);
  return qr.householderQ() * Eigen::MatrixXd::Identity(y.rows(), y.cols());
}

}  // namespace

Eigen::MatrixXd reduce_dimensions(const Eigen::MatrixXd& x_in, int max_dims, uint64_t seed, int threads) {
  (void)threads;
  Eigen::MatrixXd x = x_in.rowwise() - x_in.colwise().mean();
  const int64_t n = x.rows();
  const int64_t d = x.cols();
  if (d <= max_dims || n == 0) return x;
  const int64_t l = std::min<int64_t>({d, n, static_cast<int64_t>(max_dims) + kOversampling});
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  Eigen::MatrixXd omega(d, l);
  for (int64_t c = 0; c < l; ++c) {
    for (int64_t r = 0; r < d; ++r) omega(r, c) = standard_normal(rng);
  }
  Eigen::MatrixXd q = orthonormal_basis(x * omega);
  for (int it = 0; it < kPowerIterations; ++it) {
    const Eigen::MatrixXd z = orthonormal_basis(x.transpose() * q);
    q = orthonormal_basis(x * z);
  }
  const Eigen::MatrixXd b = q.transpose() * x;  // l × d
  const Eigen::MatrixXd bbt = b * b.transpose();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(bbt);
  const int64_t keep = std::min<int64_t>(max_dims, l);
  // Eigenvalues ascend: take the last `keep` columns, largest first.
  Eigen::MatrixXd u(l, keep);
  for (int64_t c = 0; c < keep; ++c) {
    const int64_t src = l - 1 - c;
    const double s = std::sqrt(std::max(0.0, eig.eigenvalues()(src)));
    u.col(c) = eig.eigenvectors().col(src) * s;
  }
  return q * u;  // = X V (n × keep): coordinates on the top components
}

void nearest_neighbours(const Eigen::MatrixXd& x, int k, int threads, std::vector<int32_t>* index,
                        std::vector<double>* distance_sq) {
  const int64_t n = x.rows();
  index->assign(static_cast<size_t>(n * k), 0);
  distance_sq->assign(static_cast<size_t>(n * k), 0.0);
  if (n == 0 || k <= 0) return;
  const Eigen::VectorXd norms = x.rowwise().squaredNorm();
  const Eigen::MatrixXd xt = x.transpose();
  const int64_t blocks = (n + kKnnBlockRows - 1) / kKnnBlockRows;
  parallel_chunks(blocks, threads, [&](int64_t b0, int64_t b1) {
    Eigen::MatrixXd dist;
    std::vector<std::pair<double, int32_t>> row;
    row.reserve(static_cast<size_t>(n));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kKnnBlockRows;
      const int64_t rows = std::min(kKnnBlockRows, n - r0);
      // dist(j, r) = |x_r|^2 + |x_j|^2 - 2 x_j·x_r, column r per query row.
      dist.noalias() = x * xt.middleCols(r0, rows);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r0 + r;
        row.clear();
        const double* col = dist.col(r).data();
        for (int64_t j = 0; j < n; ++j) {
          if (j == i) continue;
          const double d2 = std::max(0.0, norms(i) + norms(j) - 2.0 * col[j]);
          row.emplace_back(d2, static_cast<int32_t>(j));
        }
        auto mid = row.begin() + k;
        std::nth_element(row.begin(), mid - 1, row.end());
        std::sort(row.begin(), mid);
        for (int c = 0; c < k; ++c) {
          (*index)[static_cast<size_t>(i * k + c)] = row[static_cast<size_t>(c)].second;
          (*distance_sq)[static_cast<size_t>(i * k + c)] = row[static_cast<size_t>(c)].first;
        }
      }
    }
  });
}

SparseAffinities perplexity_affinities(int64_t n, int k, const std::vector<int32_t>& index,
                                       const std::vector<double>& distance_sq, double perplexity, int threads) {
  std::vector<double> conditional(static_cast<size_t>(n * k), 0.0);
  const double log_u = std::log(perplexity);
  parallel_chunks(n, threads, [&](int64_t i0, int64_t i1) {
    std::vector<double> d(static_cast<size_t>(k));
    std::vector<double> p(static_cast<size_t>(k));
    for (int64_t i = i0; i < i1; ++i) {
      const double* di = &distance_sq[static_cast<size_t>(i * k)];
      // Shift by the nearest distance (P is invariant to it) and scale by the mean
      // so the search starts near beta = 1 whatever the data's magnitude.
      double mean = 0;
      for (int c = 0; c < k; ++c) {
        d[static_cast<size_t>(c)] = di[c] - di[0];
        mean += d[static_cast<size_t>(c)];
      }
      mean /= k;
      const double scale = mean > 0 && std::isfinite(mean) ? 1.0 / mean : 1.0;
      for (double& v : d) v *= scale;
      double beta = 1.0;
      double lo = -std::numeric_limits<double>::max();
      double hi = std::numeric_limits<double>::max();
      for (int step = 0; step < kCalibrationSteps; ++step) {
        double sum = 0, weighted = 0;
        for (int c = 0; c < k; ++c) {
          const double e = std::exp(-beta * d[static_cast<size_t>(c)]);
          p[static_cast<size_t>(c)] = e;
          sum += e;
          weighted += d[static_cast<size_t>(c)] * e;
        }
        // sum >= 1 (the nearest has d = 0), so the log is finite.
        const double entropy = beta * weighted / sum + std::log(sum);
        const double diff = entropy - log_u;
        if (std::abs(diff) < kEntropyTolerance) break;
        if (diff > 0) {
          lo = beta;
          beta = hi == std::numeric_limits<double>::max() ? beta * 2 : (beta + hi) / 2;
        } else {
          hi = beta;
          beta = lo == -std::numeric_limits<double>::max() ? beta / 2 : (beta + lo) / 2;
        }
      }
      double sum = 0;
      for (int c = 0; c < k; ++c) sum += p[static_cast<size_t>(c)];
      for (int c = 0; c < k; ++c) {
        conditional[static_cast<size_t>(i * k + c)] = p[static_cast<size_t>(c)] / sum;
      }
    }
  });

  // Symmetrize: row i gets (j, p_j|i) from its own list and (j, p_i|j) from every j
  // that lists i; entries are appended in index order, then sorted and merged.
  std::vector<std::vector<std::pair<int32_t, double>>> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)].reserve(static_cast<size_t>(2 * k));
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < k; ++c) {
      const int32_t j = index[static_cast<size_t>(i * k + c)];
      const double v = conditional[static_cast<size_t>(i * k + c)];
      rows[static_cast<size_t>(i)].emplace_back(j, v);
      rows[static_cast<size_t>(j)].emplace_back(static_cast<int32_t>(i), v);
    }
  }
  SparseAffinities p;
  p.row_begin.assign(static_cast<size_t>(n + 1), 0);
  const double norm = 1.0 / (2.0 * static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto& r = rows[static_cast<size_t>(i)];
    std::sort(r.begin(), r.end());  // by column, then value: a fixed merge order
    for (size_t a = 0; a < r.size();) {
      double v = 0;
      size_t b = a;
      for (; b < r.size() && r[b].first == r[a].first; ++b) v += r[b].second;
      p.column.push_back(r[a].first);
      p.value.push_back(v * norm);
      a = b;
    }
    p.row_begin[static_cast<size_t>(i + 1)] = static_cast<int64_t>(p.column.size());
    std::vector<std::pair<int32_t, double>>().swap(r);
  }
  return p;
}

}  // namespace tensorscope::plotting::internal
