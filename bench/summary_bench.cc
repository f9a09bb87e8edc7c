// summary_bench — the summary kernel alone: compute_summary_stats (tensor_stats.h) on
// float32 tensors of CNN-activation sizes, against the portable kernel (one loop per
// quantity, summary_kernel.h's float32_block_loops) on the same data in the same run;
// also with one NaN per block (a block with a NaN or Inf is read twice), and with a cast
// format's numerics (tensor_stats.h's CastLimits: fp16's, a second pass). Prints the best
// of 200 runs, ns per element and the ratios.
//   build/bin/summary_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "summary_kernel.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace {

using namespace tensorscope::tensor;
using Clock = std::chrono::steady_clock;

template <class F>
double best_us(F&& f) {
  double best = 1e18;
  for (int r = 0; r < 200; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return best;
}

// What compute_summary_stats does per 4096-element block, with the portable kernel.
double portable_pass(const std::vector<float>& v) {
  double total = 0;
  for (size_t at = 0; at < v.size(); at += 4096) {
    const auto b = detail::float32_block_loops(v.data() + at, std::min<size_t>(4096, v.size() - at), 0.0f);
    total += b.squares + b.zeros;
  }
  return total;
}

}  // namespace

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::printf(
      "summary_bench: best of 200; ns per element; ratio = portable / compute_summary_stats; numerics = with fp16's "
      "cast limits / without\n");
  std::printf("%-10s %-9s %14s %14s %8s %16s %9s\n", "elements", "NaN", "summary ns/el", "portable ns/el", "ratio",
              "numerics ns/el", "numerics");
  const CastLimits fp16{std::ldexp(1.0, -25), 65520.0};
  for (const size_t n : {16384u, 200704u, 401408u, 1048576u}) {
    for (const bool nan : {false, true}) {
      std::vector<float> v(n);
      for (float& x : v) x = std::max(0.0f, normal(rng));  // after a ReLU: half zeros
      if (nan) {
        for (size_t at = 100; at < n; at += 4096) v[at] = std::numeric_limits<float>::quiet_NaN();
      }
      const TensorView view{v.data(), ElementType::kFloat32, {static_cast<int64_t>(n)}};
      volatile double sink = 0;
      const double fast = best_us([&] { sink = sink + compute_summary_stats(view).l2; });
      const double loops = best_us([&] { sink = sink + portable_pass(v); });
      const double numerics = best_us([&] { sink = sink + compute_summary_stats(view, &fp16).l2; });
      std::printf("%-10zu %-9s %14.3f %14.3f %8.2f %16.3f %9.2f\n", n, nan ? "per block" : "none", fast * 1000 / n,
                  loops * 1000 / n, loops / fast, numerics * 1000 / n, numerics / fast);
    }
  }
  return 0;
}
