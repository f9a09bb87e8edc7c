// tsne_bench — t-SNE of 10,000 points of dimension 50 (10 Gaussian clusters): full run,
// then the per-frame cost warm-started on slightly perturbed data (the next frame of a
// stream), with the quality of both results and the ratio warm/full, in one run.
// Usage: tsne_bench [points] [threads]   (defaults 10000, 0 = all cores)
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "tensorscope/plotting/tsne.h"

using tensorscope::plotting::TsneEmbedder;
using tensorscope::plotting::TsneOptions;
using tensorscope::plotting::TsneResult;
using tensorscope::tensor::ElementType;
using tensorscope::tensor::TensorView;

namespace {

constexpr int kDims = 50;
constexpr int kClusters = 10;
constexpr int kNeighbours = 10;
constexpr int kQueries = 1000;  // trustworthiness estimated on this many points

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Trustworthiness with k neighbours (Venna & Kaski), estimated over `queries` evenly
// spaced points (each against all n), and kNN preservation over the same points.
void quality(const std::vector<float>& x, const Eigen::MatrixXf& y, int queries, double* trust, double* preserved) {
  const int64_t n = y.rows();
  std::vector<std::pair<float, int64_t>> order(static_cast<size_t>(n));
  std::vector<int64_t> rank(static_cast<size_t>(n));
  double penalty = 0;
  int64_t kept = 0;
  for (int q = 0; q < queries; ++q) {
    const int64_t i = q * n / queries;
    for (int64_t j = 0; j < n; ++j) {
      float d = 0;
      for (int f = 0; f < kDims; ++f) {
        const float e = x[static_cast<size_t>(i * kDims + f)] - x[static_cast<size_t>(j * kDims + f)];
        d += e * e;
      }
      order[static_cast<size_t>(j)] = {j == i ? -1.0f : d, j};
    }
    std::sort(order.begin(), order.end());
    std::vector<int64_t> high(static_cast<size_t>(kNeighbours));
    for (int64_t r = 0; r < n; ++r) rank[static_cast<size_t>(order[static_cast<size_t>(r)].second)] = r;
    for (int r = 1; r <= kNeighbours; ++r) high[static_cast<size_t>(r - 1)] = order[static_cast<size_t>(r)].second;
    for (int64_t j = 0; j < n; ++j) {
      order[static_cast<size_t>(j)] = {j == i ? -1.0f : (y.row(i) - y.row(j)).squaredNorm(), j};
    }
    std::partial_sort(order.begin(), order.begin() + kNeighbours + 1, order.end());
    for (int r = 1; r <= kNeighbours; ++r) {
      const int64_t j = order[static_cast<size_t>(r)].second;
      const int64_t hr = rank[static_cast<size_t>(j)];
      if (hr > kNeighbours) penalty += static_cast<double>(hr - kNeighbours);
      kept += std::count(high.begin(), high.end(), j);
    }
  }
  const double k = kNeighbours;
  *trust = 1.0 - 2.0 / (queries * k * (2.0 * n - 3.0 * k - 1.0)) * penalty;
  *preserved = static_cast<double>(kept) / (queries * k);
}

double mean_displacement_over_spread(const Eigen::MatrixXf& a, const Eigen::MatrixXf& b) {
  const Eigen::RowVector2f mean = a.colwise().mean();
  const double spread = std::sqrt((a.rowwise() - mean).rowwise().squaredNorm().mean());
  return (a - b).rowwise().norm().mean() / spread;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::max(100L, std::atol(argv[1])) : 10000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 0;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(static_cast<size_t>(kClusters * kDims));
  for (float& c : centres) c = 4.0f * normal(rng);
  std::vector<float> x(static_cast<size_t>(n * kDims));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % kClusters;
    for (int f = 0; f < kDims; ++f) {
      x[static_cast<size_t>(i * kDims + f)] = centres[static_cast<size_t>(c * kDims + f)] + normal(rng);
    }
  }
  std::vector<float> next = x;
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (float& v : next) v += noise(rng);

  TsneOptions options;
  options.threads = threads;
  TsneEmbedder embedder(options);
  std::printf(
      "t-SNE of %lld points x %d features (%d Gaussian clusters), perplexity %.0f, "
      "theta %.2f, threads %d (0 = all cores)\n",
      static_cast<long long>(n), kDims, kClusters, options.perplexity, options.theta, threads);

  auto t0 = std::chrono::steady_clock::now();
  const TsneResult full = embedder.embed(TensorView{x.data(), ElementType::kFloat32, {n, kDims}});
  const double full_s = seconds_since(t0);
  if (full.embedding.rows() != n) {
    std::printf("FAILED: %s\n", full.message.c_str());
    return 1;
  }
  double trust = 0, preserved = 0;
  quality(x, full.embedding, std::min<int>(kQueries, static_cast<int>(n)), &trust, &preserved);
  std::printf(
      "full run:   %6.2f s  (%d iterations, KL %.3f)  trustworthiness(k=%d) %.4f  "
      "kNN preservation %.4f  [goal < 15 s; scikit-learn ~90 s single-threaded]\n",
      full_s, full.iterations_run, full.kl_divergence, kNeighbours, trust, preserved);

  t0 = std::chrono::steady_clock::now();
  const TsneResult warm = embedder.embed(TensorView{next.data(), ElementType::kFloat32, {n, kDims}});
  const double warm_s = seconds_since(t0);
  if (warm.embedding.rows() != n || !warm.warm_started) {
    std::printf("FAILED: warm start did not happen: %s\n", warm.message.c_str());
    return 1;
  }
  quality(next, warm.embedding, std::min<int>(kQueries, static_cast<int>(n)), &trust, &preserved);
  std::printf(
      "warm frame: %6.2f s  (%d iterations, KL %.3f)  trustworthiness(k=%d) %.4f  "
      "kNN preservation %.4f  mean displacement / spread %.4f\n",
      warm_s, warm.iterations_run, warm.kl_divergence, kNeighbours, trust, preserved,
      mean_displacement_over_spread(full.embedding, warm.embedding));
  std::printf("ratio warm/full: %.3f\n", warm_s / full_s);
  return 0;
}
