// summary_bench — the summary kernel alone: compute_summary_stats (tensor_stats.h) on
// float32 tensors of CNN-activation sizes, against the portable kernel (one loop per
// quantity, summary_kernel.h's float32_block_loops) on the same data in the same run;
// also with one NaN per block (a block with a NaN or Inf is read twice), and with a cast
// format's numerics (tensor_stats.h's CastLimits: fp16's, a second pass); and against
// reading the tensor once (the bits of every element summed as integers, 16 at a time:
// the least work that reads them all). Prints the best of 200 runs (the data in cache),
// ns per element and the ratios. Then the client's whole CPU summary (summarize_cpu: a
// large tensor's ranges on the summary threads) on tensors up to 256 MB, out of the
// cache, against compute_summary_stats and the read on one thread.
//   build/bin/summary_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "summary_kernel.h"
#include "summary_threads.h"
#include "tensor_summary.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace {

using namespace tensorscope::tensor;
using Clock = std::chrono::steady_clock;

template <class F>
double best_us(F&& f, int runs = 200) {
  double best = 1e18;
  for (int r = 0; r < runs; ++r) {
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

// Every element read once: their bits summed as 32-bit integers, 16 at a time in four
// independent vectors (GCC's vector extension: SSE2 on any x86-64, no float rules, no
// chain of dependent adds), the tail one by one.
uint32_t read_once(const std::vector<float>& v) {
  typedef uint32_t Lanes __attribute__((vector_size(16)));
  Lanes a = {}, b = {}, c = {}, d = {};
  size_t i = 0;
  for (; i + 16 <= v.size(); i += 16) {
    Lanes x[4];
    std::memcpy(x, v.data() + i, sizeof x);
    a += x[0];
    b += x[1];
    c += x[2];
    d += x[3];
  }
  const Lanes all = a + b + c + d;
  uint32_t total = all[0] + all[1] + all[2] + all[3];
  for (; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, v.data() + i, sizeof bits);
    total += bits;
  }
  return total;
}

}  // namespace

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::printf(
      "summary_bench: best of 200; ns per element; ratio = portable / compute_summary_stats; numerics = with fp16's "
      "cast limits / without; read = reading every element once; summary/read = compute_summary_stats / read\n");
  std::printf("%-10s %-9s %14s %14s %8s %16s %9s %11s %13s\n", "elements", "NaN", "summary ns/el", "portable ns/el",
              "ratio", "numerics ns/el", "numerics", "read ns/el", "summary/read");
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
      const double read = best_us([&] { sink = sink + static_cast<double>(read_once(v)); });
      std::printf("%-10zu %-9s %14.3f %14.3f %8.2f %16.3f %9.2f %11.3f %13.2f\n", n, nan ? "per block" : "none",
                  fast * 1000 / n, loops * 1000 / n, loops / fast, numerics * 1000 / n, numerics / fast,
                  read * 1000 / n, fast / read);
    }
  }
  std::printf(
      "\nsummarize_cpu (the client's summary: ranges of >= 1 M elements on %zu threads) against one thread; best of "
      "20\n",
      tensorscope::summary_threads().threads());
  std::printf("%-10s %16s %16s %11s %13s %16s\n", "elements", "threads ns/el", "1 thread ns/el", "read ns/el",
              "threads/read", "1 thread/read");
  for (const size_t n : {1u << 20, 4u << 20, 16u << 20, 64u << 20}) {
    std::vector<float> v(n);
    for (float& x : v) x = std::max(0.0f, normal(rng));
    const TensorView view{v.data(), ElementType::kFloat32, {static_cast<int64_t>(n)}};
    tensorscope::TensorRef ref;
    ref.data = v.data();
    ref.dtype = tensorscope::wire::DType::kFloat32;
    ref.ndim = 1;
    ref.shape[0] = static_cast<int64_t>(n);
    ref.strides[0] = 1;
    volatile double sink = 0;
    tensorscope::TensorSummary out;
    std::string why;
    const double threads = best_us(
        [&] {
          if (tensorscope::summarize_cpu(ref, tensorscope::CastFormat::kNone, &out, &why)) sink = sink + out.l2;
        },
        20);
    const double one = best_us([&] { sink = sink + compute_summary_stats(view).l2; }, 20);
    const double read = best_us([&] { sink = sink + static_cast<double>(read_once(v)); }, 20);
    std::printf("%-10zu %16.3f %16.3f %11.3f %13.2f %16.2f\n", n, threads * 1000 / n, one * 1000 / n, read * 1000 / n,
                threads / read, one / read);
  }
  return 0;
}
