// Readability of histogram frames on realistic distributions: in every frame the central
// 90 % of the values spreads over at least a quarter of the bins (no single bar), over
// long runs whose scale shrinks or grows, and every range change is marked on the frames.
// The distributions: a Student-t (nu = 2) gradient, a ReLU output (half zeros), log-normal
// weights, a bimodal mixture, scales shrinking 100x over 500 frames, growing 10x, jumping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensorscope/plotting/adaptive_histogram.h"
#include "tensorscope/plotting/histogram_range.h"
#include "tensorscope/tensor/tensor_stats.h"

namespace tensorscope::plotting {
namespace {

constexpr size_t kElements = 1 << 16;
constexpr double kReadable = 0.25;

using Sampler = std::function<double(std::mt19937&)>;

double normal(std::mt19937& rng) { return std::normal_distribution<double>()(rng); }
double uniform01(std::mt19937& rng) { return std::uniform_real_distribution<double>(1e-12, 1.0)(rng); }
// Student-t with 2 degrees of freedom: Z / sqrt(chi2_2 / 2), chi2_2 = -2 ln U.
double student_t2(std::mt19937& rng) { return normal(rng) / std::sqrt(-std::log(uniform01(rng))); }

std::vector<float> sample(const Sampler& f, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::vector<float> v(kElements);
  for (float& x : v) x = static_cast<float>(scale * f(rng));
  return v;
}

tensor::TensorView view_of(const std::vector<float>& v) {
  return tensor::TensorView{v.data(), tensor::ElementType::kFloat32, {static_cast<int64_t>(v.size())}};
}

struct Case {
  const char* name;
  Sampler sampler;
};

std::vector<Case> cases() {
  return {
      {"student_t2_gradient", [](std::mt19937& r) { return 1e-4 * student_t2(r); }},
      {"relu_output", [](std::mt19937& r) { return std::max(0.0, normal(r)); }},
      {"lognormal_weight", [](std::mt19937& r) { return std::exp(2.0 * normal(r)); }},
      {"lognormal_weight_narrow", [](std::mt19937& r) { return 0.02 * std::exp(0.5 * normal(r)); }},
      {"bimodal", [](std::mt19937& r) { return uniform01(r) < 0.5 ? -3 + 0.5 * normal(r) : 2 + normal(r); }},
      {"normal", [](std::mt19937& r) { return normal(r); }},
  };
}

TEST(HistogramReadability, EveryCaseSpreadsOverAQuarterOfTheBins) {
  for (const Case& c : cases()) {
    AdaptiveHistogram h(AdaptiveHistogramOptions{});
    const std::vector<float> v = sample(c.sampler, 1);
    const HistogramFrame f = h.next(view_of(v), 0);
    EXPECT_GE(central_spread(f.hist), kReadable) << c.name;
    EXPECT_EQ(f.hist.total(), kElements) << c.name;
    EXPECT_LT(outside_fraction(f.hist), 0.05) << c.name;
  }
}

// The range from the extremes (what frames used before) makes a heavy-tailed gradient a
// single bar: the check above can fail.
TEST(HistogramReadability, ExtremesWouldGiveASingleBar) {
  const std::vector<float> v = sample([](std::mt19937& r) { return 1e-4 * student_t2(r); }, 1);
  const tensor::TensorStats stats = tensor::compute_stats(view_of(v));
  const Histogram old = compute_histogram(view_of(v), choose_histogram_range(stats, 64, 0.1));
  EXPECT_LT(central_spread(old), 0.1);
}

TEST(HistogramReadability, GradientsAreSymmetricAroundZero) {
  AdaptiveHistogram h(AdaptiveHistogramOptions{});
  const std::vector<float> v = sample([](std::mt19937& r) { return 1e-4 * student_t2(r); }, 3);
  const HistogramFrame f = h.next(view_of(v), 0);
  EXPECT_DOUBLE_EQ(f.hist.range.lo, -f.hist.range.hi);
  EXPECT_EQ(f.hist.range.axis, HistogramAxis::kLinear);
}

TEST(HistogramReadability, BodiesOverDecadesTakeASymlogAxis) {
  AdaptiveHistogram h(AdaptiveHistogramOptions{});
  const std::vector<float> v = sample([](std::mt19937& r) { return std::exp(2.0 * normal(r)); }, 1);
  EXPECT_EQ(h.next(view_of(v), 0).hist.range.axis, HistogramAxis::kSymlog);
  AdaptiveHistogramOptions linear;
  linear.axis = AxisChoice::kLinear;
  AdaptiveHistogram forced(linear);
  const HistogramFrame f = forced.next(view_of(v), 0);
  EXPECT_EQ(f.hist.range.axis, HistogramAxis::kLinear);
  EXPECT_LT(central_spread(f.hist), kReadable);  // why symlog is chosen
}

// Runs `frames` frames whose values are sampler * scale(frame); checks every frame and
// returns the frames on which the range changed.
std::vector<int> run(const Sampler& sampler, int frames, const std::function<double(int)>& scale,
                     const AdaptiveHistogramOptions& options = {}) {
  AdaptiveHistogram h(options);
  std::vector<int> changes;
  HistogramRange previous;
  int since_change = 1 << 30;
  for (int i = 0; i < frames; ++i) {
    const std::vector<float> v = sample(sampler, static_cast<uint32_t>(100 + i), scale(i));
    const HistogramFrame f = h.next(view_of(v), 1000 + i);
    EXPECT_GE(central_spread(f.hist), kReadable) << "frame " << i;
    EXPECT_LT(outside_fraction(f.hist), 0.2) << "frame " << i;
    const bool changed = i > 0 && !(f.hist.range == previous);
    EXPECT_EQ(f.display.range_changed, changed) << "frame " << i;
    if (changed) {
      changes.push_back(i);
      since_change = 0;
      EXPECT_NE(f.display.range_note.find("range changed at step " + std::to_string(1000 + i)), std::string::npos)
          << f.display.range_note;
    }
    // The notice stays for the next notice_frames frames.
    EXPECT_EQ(!f.display.range_note.empty(), since_change <= options.notice_frames) << "frame " << i;
    ++since_change;
    previous = f.hist.range;
  }
  return changes;
}

TEST(HistogramReadability, ScaleShrinking100xOver500Frames) {
  for (const Case& c : {cases()[0], cases()[5]}) {
    const std::vector<int> changes = run(c.sampler, 500, [](int i) { return std::pow(100.0, -i / 499.0); });
    // 100x needs a few new ranges, never more often than every 10 frames.
    EXPECT_GE(changes.size(), 3u) << c.name;
    for (size_t k = 1; k < changes.size(); ++k) EXPECT_GE(changes[k] - changes[k - 1], 10) << c.name;
  }
}

TEST(HistogramReadability, ScaleGrowing10xAndJumping) {
  const Sampler n = [](std::mt19937& r) { return normal(r); };
  const std::vector<int> grow = run(n, 200, [](int i) { return std::pow(10.0, i / 199.0); });
  EXPECT_GE(grow.size(), 1u);
  // A 10x jump is seen at once: most values would be off the plot.
  const std::vector<int> jump = run(n, 40, [](int i) { return i < 20 ? 1.0 : 10.0; });
  ASSERT_FALSE(jump.empty());
  EXPECT_EQ(jump.front(), 20);
}

TEST(HistogramReadability, ASteadyDistributionKeepsItsRange) {
  const std::vector<int> changes =
      run([](std::mt19937& r) { return 1e-3 * student_t2(r); }, 200, [](int) { return 1.0; });
  EXPECT_TRUE(changes.empty()) << changes.size() << " changes";
}

TEST(HistogramReadability, FixedRangesAndLinearAxesAreKept) {
  AdaptiveHistogramOptions fixed;
  fixed.fixed = HistogramRange{-1, 1, 64};
  AdaptiveHistogram h(fixed);
  for (int i = 0; i < 30; ++i) {
    const std::vector<float> v = sample([](std::mt19937& r) { return normal(r); }, i, 0.001);
    const HistogramFrame f = h.next(view_of(v), i);
    EXPECT_EQ(f.hist.range, (HistogramRange{-1, 1, 64}));
    EXPECT_TRUE(f.display.range_note.empty());
  }
}

// A constant frame (a zero-initialised bias) neither picks nor changes the range.
TEST(HistogramReadability, ConstantFramesDoNotPickTheRange) {
  AdaptiveHistogram h(AdaptiveHistogramOptions{});
  const std::vector<float> zeros(1000, 0.f);
  h.next(view_of(zeros), 0);
  EXPECT_FALSE(h.range().has_value());
  const std::vector<float> v = sample([](std::mt19937& r) { return normal(r); }, 5);
  h.next(view_of(v), 1);
  ASSERT_TRUE(h.range().has_value());
  const HistogramRange picked = *h.range();
  for (int i = 0; i < 30; ++i) h.next(view_of(zeros), 2 + i);
  EXPECT_EQ(*h.range(), picked);
}

TEST(HistogramReadability, CountAxisFollowsTheSetting) {
  const std::vector<float> v = sample([](std::mt19937& r) { return normal(r); }, 9);
  for (auto [choice, want] : {std::pair{CountChoice::kLog, true}, std::pair{CountChoice::kLinear, false},
                              std::pair{CountChoice::kAuto, false}}) {
    AdaptiveHistogramOptions o;
    o.counts = choice;
    AdaptiveHistogram h(o);
    EXPECT_EQ(h.next(view_of(v), 0).display.log_counts, want);
  }
}

TEST(HistogramReadability, IntegerDataKeepWholeNumberBins) {
  std::vector<int8_t> v(5000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int8_t>(static_cast<int>(i * 7919 % 41) - 20);
  v[3] = 127;  // a far outlier
  AdaptiveHistogram ints(AdaptiveHistogramOptions{});
  const HistogramFrame f = ints.next(tensor::TensorView{v.data(), tensor::ElementType::kInt8, {5000}}, 0);
  const double width = (f.hist.range.hi - f.hist.range.lo) / f.hist.range.bins;
  EXPECT_EQ(width, std::round(width));
  EXPECT_EQ(f.hist.range.lo - std::floor(f.hist.range.lo), 0.5);
  EXPECT_EQ(f.hist.total(), 5000u);
  std::vector<uint8_t> flags(100, 0);
  for (size_t i = 0; i < flags.size(); i += 3) flags[i] = 1;
  AdaptiveHistogram bools(AdaptiveHistogramOptions{});
  const HistogramFrame b = bools.next(tensor::TensorView{flags.data(), tensor::ElementType::kBool, {100}}, 0);
  EXPECT_EQ(b.hist.counts.size(), 2u);
  EXPECT_EQ(b.hist.counts[0] + b.hist.counts[1], 100u);
}

TEST(HistogramReadability, ExtremeMagnitudesGiveValidRanges) {
  for (double scale : {1e300, 1e-300, 1e-40}) {
    std::vector<double> v(4000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(static_cast<double>(i)) * (1 + i % 5);
    v[7] = scale * 1e6;
    AdaptiveHistogram h(AdaptiveHistogramOptions{});
    for (int frame = 0; frame < 3; ++frame) {
      const HistogramFrame f = h.next(tensor::TensorView{v.data(), tensor::ElementType::kFloat64, {4000}}, frame);
      EXPECT_TRUE(f.hist.range.valid()) << scale;
      EXPECT_EQ(f.hist.total(), 4000u) << scale;
    }
  }
}

}  // namespace
}  // namespace tensorscope::plotting
