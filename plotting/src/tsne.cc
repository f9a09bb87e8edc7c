// tsne.cc — TsneEmbedder: reads rows, builds P, runs Barnes-Hut gradient descent.
#include "tensorscope/plotting/tsne.h"

#include "tensorscope/plotting/axis_ticks.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <new>
#include <random>
#include <string>
#include <thread>

#include "barnes_hut_tree.h"
#include "parallel_chunks.h"
#include "tsne_affinities.h"

namespace tensorscope::plotting {
namespace {

constexpr int64_t kMinRows = 5;
constexpr int kMaxFeatures = 50;
constexpr double kInitialStd = 1e-4;
constexpr double kMinGain = 0.01;
constexpr double kStartMomentum = 0.5;
constexpr double kFinalMomentum = 0.8;
constexpr int kWarmStartMomentumIterations = 20;
constexpr int64_t kMaxElements = int64_t{1} << 28;  // 2 GiB of doubles at most
constexpr int kMaxIterations = 100000;

struct Sanitized {
  double perplexity, theta, learning_rate, exaggeration;
  int iterations, warm_iterations, exaggeration_iterations, threads;
  int64_t max_rows;
};

Sanitized sanitize(const TsneOptions& o) {
  Sanitized s;
  s.perplexity = std::isfinite(o.perplexity) && o.perplexity > 0 ? o.perplexity : 30.0;
  s.perplexity = std::clamp(s.perplexity, 1.0, 1000.0);
  // Above ~0.7 a cell could be summarized with the point itself inside it.
  s.theta = std::isfinite(o.theta) ? std::clamp(o.theta, 0.0, 0.7) : 0.5;
  s.learning_rate = std::isfinite(o.learning_rate) && o.learning_rate > 0 ? o.learning_rate : 0;
  s.exaggeration = std::isfinite(o.early_exaggeration) ? std::clamp(o.early_exaggeration, 1.0, 1000.0) : 12.0;
  s.iterations = std::clamp(o.iterations, 0, kMaxIterations);
  s.warm_iterations = std::clamp(o.warm_iterations, 0, kMaxIterations);
  s.exaggeration_iterations = std::clamp(o.exaggeration_iterations, 0, s.iterations);
  int threads = o.threads;
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  s.threads = std::clamp(threads, 1, 256);
  s.max_rows = std::max<int64_t>(o.max_rows, kMinRows);
  return s;
}

void append(std::string* message, const std::string& text) {
  if (!message->empty()) *message += "; ";
  *message += text;
}

// Reads the selected rows into x (kept rows only, scaled by 1/max|value| so huge
// magnitudes cannot overflow later sums); rows holding NaN/Inf are dropped.
int64_t read_rows(const tensor::TensorView& view, int64_t features, const std::vector<int64_t>& rows,
                  Eigen::MatrixXd* x, std::vector<int64_t>* kept) {
  std::vector<double> buffer(static_cast<size_t>(features));
  std::vector<float> floats(static_cast<size_t>(features));
  std::vector<double> values;
  values.reserve(rows.size() * static_cast<size_t>(features));
  kept->clear();
  int64_t dropped = 0;
  const auto* base = static_cast<const unsigned char*>(view.data);
  const size_t esize = tensor::element_size(view.type);
  double max_abs = 0;
  for (int64_t r : rows) {
    const int64_t offset = r * features;
    if (view.type == tensor::ElementType::kFloat32) {
      std::memcpy(floats.data(), base + static_cast<size_t>(offset) * esize, floats.size() * esize);
      for (int64_t j = 0; j < features; ++j) {
        buffer[static_cast<size_t>(j)] = floats[static_cast<size_t>(j)];
      }
    } else if (view.type == tensor::ElementType::kFloat64) {
      std::memcpy(buffer.data(), base + static_cast<size_t>(offset) * esize, buffer.size() * esize);
    } else {
      for (int64_t j = 0; j < features; ++j) {
        buffer[static_cast<size_t>(j)] = tensor::element_as_double(view.data, view.type, offset + j);
      }
    }
    bool finite = true;
    double row_max = 0;
    for (double v : buffer) {
      finite = finite && std::isfinite(v);
      row_max = std::max(row_max, std::abs(v));
    }
    if (!finite) {
      ++dropped;
      continue;
    }
    max_abs = std::max(max_abs, row_max);
    values.insert(values.end(), buffer.begin(), buffer.end());
    kept->push_back(r);
  }
  const int64_t n = static_cast<int64_t>(kept->size());
  const double scale = max_abs > 0 ? 1.0 / max_abs : 1.0;
  x->resize(n, features);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < features; ++j) {
      (*x)(i, j) = values[static_cast<size_t>(i * features + j)] * scale;
    }
  }
  return dropped;
}

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

// Fresh start: top-2 principal components scaled to std kInitialStd; seeded Gaussian
// noise when the data has (almost) no variance.
Eigen::MatrixXd initial_embedding(const Eigen::MatrixXd& x, uint64_t seed) {
  const int64_t n = x.rows();
  Eigen::MatrixXd y = Eigen::MatrixXd::Zero(n, 2);
  if (x.cols() >= 1) {
    const Eigen::MatrixXd cov = (x.transpose() * x) / static_cast<double>(n);
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov);
    const int64_t d = cov.rows();
    for (int c = 0; c < 2 && c < d; ++c) {
      Eigen::VectorXd v = eig.eigenvectors().col(d - 1 - c);
      Eigen::Index arg = 0;
      v.cwiseAbs().maxCoeff(&arg);
      if (v(arg) < 0) v = -v;  // a fixed sign
      y.col(c) = x * v;
    }
  }
  double sd = 0;
  for (int64_t i = 0; i < n; ++i) sd += y(i, 0) * y(i, 0);
  sd = std::sqrt(sd / static_cast<double>(n));
  std::mt19937_64 rng(seed);
  if (!(sd > 1e-12) || !std::isfinite(sd)) {
    for (int64_t i = 0; i < n; ++i) {
      for (int c = 0; c < 2; ++c) {
        const double u1 = uniform01(rng) + 0x1p-54;
        const double u2 = uniform01(rng);
        y(i, c) = kInitialStd * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      }
    }
    return y;
  }
  y *= kInitialStd / sd;
  // 1-D data: spread the second coordinate a little so the tree has width.
  if (x.cols() < 2) {
    for (int64_t i = 0; i < n; ++i) y(i, 1) = kInitialStd * 1e-2 * (uniform01(rng) - 0.5);
  }
  return y;
}

// One evaluation of the t-SNE gradient. y and grad are n × 2 row-major (x0,y0,...).
double compute_gradient(const internal::SparseAffinities& p, const std::vector<double>& y, double exaggeration,
                        double theta, int threads, internal::BarnesHutTree* tree, std::vector<double>* sum_q_per_point,
                        std::vector<double>* grad) {
  const int64_t n = static_cast<int64_t>(y.size() / 2);
  tree->build(y.data(), n);
  const double theta_sq = theta * theta;
  const auto& order = tree->order();
  internal::parallel_chunks(n, threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = order[static_cast<size_t>(t)];
      const double xi = y[static_cast<size_t>(2 * i)], yi = y[static_cast<size_t>(2 * i + 1)];
      double sq = 0, rx = 0, ry = 0;
      tree->repulsion(i, xi, yi, theta_sq, &sq, &rx, &ry);
      double ax = 0, ay = 0;
      for (int64_t e = p.row_begin[static_cast<size_t>(i)]; e < p.row_begin[static_cast<size_t>(i + 1)]; ++e) {
        const int32_t j = p.column[static_cast<size_t>(e)];
        const double dx = xi - y[static_cast<size_t>(2 * j)];
        const double dy = yi - y[static_cast<size_t>(2 * j + 1)];
        const double w = p.value[static_cast<size_t>(e)] / (1.0 + dx * dx + dy * dy);
        ax += w * dx;
        ay += w * dy;
      }
      (*sum_q_per_point)[static_cast<size_t>(i)] = sq;
      (*grad)[static_cast<size_t>(2 * i)] = exaggeration * ax;
      (*grad)[static_cast<size_t>(2 * i + 1)] = exaggeration * ay;
      // Repulsion is stored apart until sum_q is known: keep it in grad's sign slot.
      (*grad)[static_cast<size_t>(2 * n + 2 * i)] = rx;
      (*grad)[static_cast<size_t>(2 * n + 2 * i + 1)] = ry;
    }
  });
  double sum_q = 0;
  for (int64_t i = 0; i < n; ++i) sum_q += (*sum_q_per_point)[static_cast<size_t>(i)];
  const double inv = sum_q > 0 ? 1.0 / sum_q : 0.0;
  for (int64_t k = 0; k < 2 * n; ++k) {
    (*grad)[static_cast<size_t>(k)] =
        4.0 * ((*grad)[static_cast<size_t>(k)] - (*grad)[static_cast<size_t>(2 * n + k)] * inv);
  }
  return sum_q;
}

double kl_divergence(const internal::SparseAffinities& p, const std::vector<double>& y, double sum_q) {
  if (!(sum_q > 0)) return 0;
  const int64_t n = static_cast<int64_t>(y.size() / 2);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t e = p.row_begin[static_cast<size_t>(i)]; e < p.row_begin[static_cast<size_t>(i + 1)]; ++e) {
      const int32_t j = p.column[static_cast<size_t>(e)];
      const double pij = p.value[static_cast<size_t>(e)];
      if (!(pij > 0)) continue;
      const double dx = y[static_cast<size_t>(2 * i)] - y[static_cast<size_t>(2 * j)];
      const double dy = y[static_cast<size_t>(2 * i + 1)] - y[static_cast<size_t>(2 * j + 1)];
      const double q = 1.0 / (1.0 + dx * dx + dy * dy) / sum_q;
      kl += pij * std::log(pij / std::max(q, 1e-300));
    }
  }
  return kl;
}

}  // namespace

TsneEmbedder::TsneEmbedder(TsneOptions options) : options_(options) {}

void TsneEmbedder::reset() {
  previous_rows_.clear();
  previous_embedding_.resize(0, 0);
}

TsneResult TsneEmbedder::embed(const tensor::TensorView& view) {
  TsneResult result;
  try {
    const Sanitized s = sanitize(options_);
    if (!view.valid()) {
      result.message = "t-SNE: invalid tensor (bad shape, type or null data)";
      return result;
    }
    const int64_t numel = view.numel();
    const int64_t total_rows = view.shape.empty() ? 1 : view.shape[0];
    if (numel == 0 || total_rows == 0) {
      result.message = "t-SNE: empty tensor, nothing to embed";
      return result;
    }
    const int64_t features = numel / total_rows;
    const int64_t selected = std::min(total_rows, s.max_rows);
    if (selected > kMaxElements / std::max<int64_t>(features, 1)) {
      result.message = "t-SNE: too large (" + std::to_string(selected) + " rows × " + std::to_string(features) +
          " features); lower max_rows";
      return result;
    }
    // Rows to read: all, or a fixed stride (the same rows frame after frame).
    std::vector<int64_t> rows;
    if (total_rows > s.max_rows) {
      result.subsampled = true;
      rows.resize(static_cast<size_t>(s.max_rows));
      for (int64_t r = 0; r < s.max_rows; ++r) {
        rows[static_cast<size_t>(r)] = static_cast<int64_t>(static_cast<long double>(r) * total_rows / s.max_rows);
      }
      append(&result.message,
             "subsampled " + std::to_string(s.max_rows) + " of " + std::to_string(total_rows) + " rows");
    } else {
      rows.resize(static_cast<size_t>(total_rows));
      for (int64_t r = 0; r < total_rows; ++r) rows[static_cast<size_t>(r)] = r;
    }
    Eigen::MatrixXd x;
    const int64_t dropped = read_rows(view, features, rows, &x, &result.row_index);
    if (dropped > 0) {
      append(&result.message, "dropped " + std::to_string(dropped) + " rows with NaN/Inf");
    }
    const int64_t n = x.rows();
    if (n < kMinRows) {
      append(&result.message,
             "t-SNE needs at least " + std::to_string(kMinRows) + " finite rows, got " + std::to_string(n));
      result.embedding.resize(0, 2);
      result.row_index.clear();
      return result;
    }

    // Affinities.
    const Eigen::MatrixXd reduced = internal::reduce_dimensions(x, kMaxFeatures, options_.seed, s.threads);
    x.resize(0, 0);
    const double perplexity = std::min(s.perplexity, static_cast<double>(n - 1) / 3.0);
    const int k = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(3.0 * perplexity), 1, n - 1));
    std::vector<int32_t> nn_index;
    std::vector<double> nn_distance;
    internal::nearest_neighbours(reduced, k, s.threads, &nn_index, &nn_distance);
    const internal::SparseAffinities p =
        internal::perplexity_affinities(n, k, nn_index, nn_distance, std::max(perplexity, 1.0), s.threads);
    if (perplexity < s.perplexity) {
      append(&result.message,
             "perplexity lowered to " + format_number(perplexity) + " for " + std::to_string(n) + " rows");
    }

    // Start point.
    const bool warm = previous_embedding_.rows() == n && previous_rows_ == result.row_index;
    Eigen::MatrixXd start = warm ? previous_embedding_ : initial_embedding(reduced, options_.seed);
    std::vector<double> y(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      y[static_cast<size_t>(2 * i)] = start(i, 0);
      y[static_cast<size_t>(2 * i + 1)] = start(i, 1);
    }
    const int iterations = warm ? s.warm_iterations : s.iterations;
    const int exaggerated = warm ? 0 : s.exaggeration_iterations;
    const double learning_rate =
        s.learning_rate > 0 ? s.learning_rate : std::max(static_cast<double>(n) / s.exaggeration / 4.0, 50.0);

    // Gradient descent with momentum and gains (bhtsne).
    internal::BarnesHutTree tree;
    std::vector<double> grad(static_cast<size_t>(4 * n)), update(static_cast<size_t>(2 * n), 0.0),
        gains(static_cast<size_t>(2 * n), 1.0), sum_q_point(static_cast<size_t>(n));
    double sum_q = 0;
    for (int it = 0; it < iterations; ++it) {
      const double exaggeration = it < exaggerated ? s.exaggeration : 1.0;
      const double momentum = warm ? (it < kWarmStartMomentumIterations ? kStartMomentum : kFinalMomentum)
                                   : (it < exaggerated ? kStartMomentum : kFinalMomentum);
      sum_q = compute_gradient(p, y, exaggeration, s.theta, s.threads, &tree, &sum_q_point, &grad);
      double mean_x = 0, mean_y = 0;
      for (int64_t k2 = 0; k2 < 2 * n; ++k2) {
        const size_t u = static_cast<size_t>(k2);
        const double g = grad[u];
        gains[u] = (g > 0) != (update[u] > 0) ? gains[u] + 0.2 : gains[u] * 0.8;
        gains[u] = std::max(gains[u], kMinGain);
        update[u] = momentum * update[u] - learning_rate * gains[u] * g;
        y[u] += update[u];
      }
      for (int64_t i = 0; i < n; ++i) {
        mean_x += y[static_cast<size_t>(2 * i)];
        mean_y += y[static_cast<size_t>(2 * i + 1)];
      }
      mean_x /= static_cast<double>(n);
      mean_y /= static_cast<double>(n);
      bool finite = std::isfinite(mean_x) && std::isfinite(mean_y);
      if (!finite) break;
      for (int64_t i = 0; i < n; ++i) {
        y[static_cast<size_t>(2 * i)] -= mean_x;
        y[static_cast<size_t>(2 * i + 1)] -= mean_y;
      }
      result.iterations_run = it + 1;
    }
    // Final KL with the final positions (one more repulsion pass for sum_q).
    sum_q = compute_gradient(p, y, 1.0, s.theta, s.threads, &tree, &sum_q_point, &grad);
    result.kl_divergence = kl_divergence(p, y, sum_q);

    bool finite = true;
    for (double v : y) finite = finite && std::isfinite(v);
    if (!finite) {
      // Cannot happen with sane options; never hand out NaN coordinates.
      append(&result.message, "t-SNE diverged (non-finite coordinates); restarting next call");
      reset();
      result.embedding.resize(0, 2);
      result.row_index.clear();
      return result;
    }
    result.warm_started = warm;
    result.embedding.resize(n, 2);
    previous_embedding_.resize(n, 2);
    for (int64_t i = 0; i < n; ++i) {
      for (int c = 0; c < 2; ++c) {
        const double v = y[static_cast<size_t>(2 * i + c)];
        previous_embedding_(i, c) = v;
        result.embedding(i, c) = static_cast<float>(v);
      }
    }
    previous_rows_ = result.row_index;
    return result;
  } catch (const std::bad_alloc&) {
    result = TsneResult{};
    result.message = "t-SNE: out of memory";
  } catch (const std::exception& e) {
    result = TsneResult{};
    result.message = std::string("t-SNE failed: ") + e.what();
  } catch (...) {
    result = TsneResult{};
    result.message = "t-SNE failed";
  }
  reset();
  result.embedding.resize(0, 2);
  return result;
}

}  // namespace tensorscope::plotting
