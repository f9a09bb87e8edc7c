// pca_bench — compute_pca on the float32 tensor shaped 16 x 16536 x 1000 that the seed
// pytorch_inspector's README calls slow ("seconds").
//
// The data (1 GiB) is generated once: rank-6 structure with decaying scales plus
// uniform noise, rows of the same leading index sharing an offset. Measured in one run:
//   (a) rows = first dimension: 16 rows x 16,536,000 features (exact Gram path), and
//       the randomized method on the same matrix for comparison;
//   (b) the seed's layout: 264,576 rows x 1000 features (randomized), and
//   (c) the exact method against the randomized one on the first 16,536 rows of (b)
//       (the exact d x d Gram of all of (b) takes ~10x longer; --full-exact runs it).
// For each comparison: time ratio randomized/exact, max principal angle between the
// two top-2 score subspaces, max relative score error (up to sign), explained-variance
// differences. Usage: pca_bench [--full-exact] [--threads N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Dense>

#include "tensorscope/plotting/pca.h"

namespace tp = tensorscope::plotting;
namespace tt = tensorscope::tensor;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kD0 = 16, kD1 = 16536, kD2 = 1000;
constexpr int kRank = 6;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
float uniform(uint64_t* s) {  // [-1, 1)
  return static_cast<float>(static_cast<double>(splitmix(s) >> 40) * 0x1p-23 - 1.0);
}

// X[r, :] = sum_k (a[r / kD1, k] + b[r, k]) * scale_k * v[k, :] + 0.3 * noise.
std::vector<float> make_data() {
  std::vector<float> data(static_cast<size_t>(kD0 * kD1 * kD2));
  uint64_t seed = 42;
  std::vector<float> v(kRank * kD2), a(kD0 * kRank);
  for (float& x : v) x = uniform(&seed);
  for (float& x : a) x = 2 * uniform(&seed);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      uint64_t s = 1000 + t;
      const int64_t rows = kD0 * kD1;
      for (int64_t r = t; r < rows; r += threads) {
        float coef[kRank];
        for (int k = 0; k < kRank; ++k) {
          coef[k] = (a[(r / kD1) * kRank + k] + uniform(&s)) * std::pow(0.5f, static_cast<float>(k));
        }
        float* row = data.data() + r * kD2;
        for (int64_t j = 0; j < kD2; ++j) {
          float x = 0.3f * uniform(&s);
          for (int k = 0; k < kRank; ++k) x += coef[k] * v[k * kD2 + j];
          row[j] = x;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return data;
}

struct Timed {
  tp::PcaResult result;
  double seconds;
};

Timed run(const tt::TensorView& view, tp::PcaOptions o) {
  const auto start = Clock::now();
  tp::PcaResult r = tp::compute_pca(view, o);
  return {std::move(r), seconds_since(start)};
}

// Largest principal angle (degrees) between the column spaces of two n x 2 score
// matrices; both must have 2 non-zero columns.
double max_principal_angle_deg(const Eigen::MatrixXf& a, const Eigen::MatrixXf& b) {
  const Eigen::MatrixXd qa = Eigen::HouseholderQR<Eigen::MatrixXd>(a.leftCols(2).cast<double>()).householderQ() *
      Eigen::MatrixXd::Identity(a.rows(), 2);
  const Eigen::MatrixXd qb = Eigen::HouseholderQR<Eigen::MatrixXd>(b.leftCols(2).cast<double>()).householderQ() *
      Eigen::MatrixXd::Identity(b.rows(), 2);
  const Eigen::VectorXd s = Eigen::JacobiSVD<Eigen::MatrixXd>(qa.transpose() * qb).singularValues();
  return std::acos(std::clamp(s.minCoeff(), -1.0, 1.0)) * 180.0 / M_PI;
}

double max_score_error(const Eigen::MatrixXf& a, const Eigen::MatrixXf& b) {
  double worst = 0;
  for (int j = 0; j < 2; ++j) {
    const Eigen::VectorXd x = a.col(j).cast<double>(), y = b.col(j).cast<double>();
    const double scale = std::max(y.cwiseAbs().maxCoeff(), 1e-300);
    worst = std::max(worst, std::min((x - y).cwiseAbs().maxCoeff(), (x + y).cwiseAbs().maxCoeff()) / scale);
  }
  return worst;
}

void print_result(const char* name, const Timed& t) {
  const auto& r = t.result;
  std::printf("%-34s %8.3f s  %s  %lld x %lld  ratios %.4f %.4f%s%s\n", name, t.seconds,
              r.randomized ? "randomized" : "exact     ", static_cast<long long>(r.rows),
              static_cast<long long>(r.features),
              r.explained_variance_ratio.size() > 0 ? r.explained_variance_ratio[0] : 0.f,
              r.explained_variance_ratio.size() > 1 ? r.explained_variance_ratio[1] : 0.f,
              r.ok() ? "" : "  FAILED: ", r.message.c_str());
}

void compare(const char* what, const Timed& randomized, const Timed& exact) {
  const auto& a = randomized.result;
  const auto& b = exact.result;
  if (!a.ok() || !b.ok()) return;
  std::printf(
      "  %s: time randomized/exact %.3f, max principal angle %.2e deg, max score error %.2e,"
      " |d ratio| %.1e %.1e\n",
      what, randomized.seconds / exact.seconds, max_principal_angle_deg(a.projection, b.projection),
      max_score_error(a.projection, b.projection),
      std::abs(a.explained_variance_ratio[0] - b.explained_variance_ratio[0]),
      std::abs(a.explained_variance_ratio[1] - b.explained_variance_ratio[1]));
}

}  // namespace

int main(int argc, char** argv) {
  bool full_exact = false;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--full-exact") == 0) full_exact = true;
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
  }
  std::printf("pca_bench: float32 [%lld, %lld, %lld] (%.2f GiB), %u hardware threads\n", static_cast<long long>(kD0),
              static_cast<long long>(kD1), static_cast<long long>(kD2), kD0 * kD1 * kD2 * 4.0 / (1 << 30),
              std::thread::hardware_concurrency());
  auto start = Clock::now();
  const std::vector<float> data = make_data();
  std::printf("data generated in %.2f s (rank %d + noise)\n\n", seconds_since(start), kRank);

  const tt::TensorView view{data.data(), tt::ElementType::kFloat32, {kD0, kD1, kD2}};
  tp::PcaOptions base;
  base.max_threads = threads;

  // (a) rows = first dimension.
  tp::PcaOptions a = base;
  const Timed a_default = run(view, a);
  print_result("(a) first dim, default", a_default);
  tp::PcaOptions a_rand = a;
  a_rand.exact_below = 1;
  const Timed a_randomized = run(view, a_rand);
  print_result("(a) first dim, randomized forced", a_randomized);
  compare("(a)", a_randomized, a_default);
  std::printf("  (a) goal < 1 s: %s\n\n", a_default.seconds < 1.0 ? "met" : "NOT met");

  // (b) the seed's layout.
  tp::PcaOptions b = base;
  b.layout = tp::PcaRowLayout::kFirstTwoDims;
  const Timed b_default = run(view, b);
  print_result("(b) first two dims, default", b_default);
  std::printf("  (b) goal < 2 s: %s\n", b_default.seconds < 2.0 ? "met" : "NOT met");
  if (full_exact) {
    tp::PcaOptions e = b;
    e.exact_below = int64_t{1} << 40;
    const Timed b_exact = run(view, e);
    print_result("(b) first two dims, exact", b_exact);
    compare("(b)", b_default, b_exact);
  }
  std::printf("\n");

  // (c) exact vs randomized on 16536 x 1000 (the first leading index of (b)).
  const tt::TensorView small{data.data(), tt::ElementType::kFloat32, {kD1, kD2}};
  tp::PcaOptions c_exact = base;
  c_exact.exact_below = int64_t{1} << 40;
  tp::PcaOptions c_rand = base;
  c_rand.exact_below = 1;
  const Timed ce = run(small, c_exact);
  const Timed cr = run(small, c_rand);
  print_result("(c) 16536 x 1000, exact", ce);
  print_result("(c) 16536 x 1000, randomized", cr);
  compare("(c)", cr, ce);
  return 0;
}
