// compute_pca against a reference (JacobiSVD of the centred matrix, in double), the
// randomized method against the exact one, and degenerate inputs that must give a
// message or a valid result, never a crash.
#include "tensorscope/plotting/pca.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <Eigen/SVD>

namespace tensorscope::plotting {
namespace {

// A tensor's bytes of any dtype, from doubles.
struct Tensor {
  std::vector<unsigned char> bytes;
  tensor::TensorView view;
};

uint16_t float_to_half(float f) {  // round to nearest even, normal range only
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int exponent = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  uint32_t h = (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

Tensor make_tensor(const std::vector<double>& values, tensor::ElementType type, std::vector<int64_t> shape) {
  Tensor t;
  const size_t es = tensor::element_size(type);
  t.bytes.resize(values.size() * es + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* p = t.bytes.data() + i * es;
    const double v = values[i];
    switch (type) {
      case tensor::ElementType::kFloat32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case tensor::ElementType::kFloat64: std::memcpy(p, &v, 8); break;
      case tensor::ElementType::kFloat16: {
        uint16_t h = float_to_half(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case tensor::ElementType::kBFloat16: {
        float f = static_cast<float>(v);
        uint32_t b;
        std::memcpy(&b, &f, 4);
        uint16_t h = static_cast<uint16_t>(b >> 16);
        std::memcpy(p, &h, 2);
        break;
      }
      case tensor::ElementType::kInt8: {
        int8_t x = static_cast<int8_t>(std::lround(v));
        std::memcpy(p, &x, 1);
        break;
      }
      case tensor::ElementType::kInt16: {
        int16_t x = static_cast<int16_t>(std::lround(v));
        std::memcpy(p, &x, 2);
        break;
      }
      case tensor::ElementType::kInt32: {
        int32_t x = static_cast<int32_t>(std::lround(v));
        std::memcpy(p, &x, 4);
        break;
      }
      case tensor::ElementType::kInt64: {
        int64_t x = std::llround(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case tensor::ElementType::kUInt8: {
        uint8_t x = static_cast<uint8_t>(std::lround(v));
        std::memcpy(p, &x, 1);
        break;
      }
      case tensor::ElementType::kBool: {
        uint8_t x = v != 0 ? 1 : 0;
        std::memcpy(p, &x, 1);
        break;
      }
    }
  }
  t.view = tensor::TensorView{t.bytes.data(), type, std::move(shape)};
  return t;
}

// The matrix as the view holds it (after dtype rounding), centred, in double.
Eigen::MatrixXd centred_matrix(const tensor::TensorView& view, PcaRowLayout layout) {
  int64_t n = 0, d = 0;
  pca_matrix_shape(view, layout, &n, &d);
  Eigen::MatrixXd x(n, d);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) x(i, j) = tensor::element_as_double(view.data, view.type, i * d + j);
  }
  x.rowwise() -= x.colwise().mean();
  return x;
}

struct Reference {
  Eigen::MatrixXd scores;  // U * Sigma
  Eigen::VectorXd ratios;
};

Reference reference_pca(const Eigen::MatrixXd& xc, int components) {
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(xc, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::VectorXd s = svd.singularValues();
  const double total = s.squaredNorm();
  const int c = std::min<int>(components, static_cast<int>(s.size()));
  Reference r;
  r.scores = svd.matrixU().leftCols(c) * s.head(c).asDiagonal();
  r.ratios = s.head(c).array().square() / total;
  return r;
}

// Max |a - b| over the column, up to the column's sign, relative to max |b|.
double column_error(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  const double scale = std::max(b.cwiseAbs().maxCoeff(), 1e-300);
  return std::min((a - b).cwiseAbs().maxCoeff(), (a + b).cwiseAbs().maxCoeff()) / scale;
}

std::vector<double> random_low_rank(int64_t n, int64_t d, uint32_t seed, double noise, std::vector<double> spectrum) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  const int r = static_cast<int>(spectrum.size());
  Eigen::MatrixXd u(n, r), v(r, d);
  for (int64_t i = 0; i < u.size(); ++i) u.data()[i] = normal(rng);
  for (int64_t i = 0; i < v.size(); ++i) v.data()[i] = normal(rng);
  Eigen::MatrixXd x = u * Eigen::VectorXd::Map(spectrum.data(), r).asDiagonal() * v;
  std::vector<double> out(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) out[static_cast<size_t>(i * d + j)] = x(i, j) + noise * normal(rng) + 3.0;
  }
  return out;
}

void expect_matches_reference(const tensor::TensorView& view, const PcaOptions& options, double tol) {
  const PcaResult r = compute_pca(view, options);
  ASSERT_TRUE(r.ok()) << r.message;
  const Reference ref = reference_pca(centred_matrix(view, options.layout), options.components);
  ASSERT_EQ(r.projection.cols(), options.components);
  ASSERT_EQ(r.projection.rows(), ref.scores.rows());
  for (int j = 0; j < ref.scores.cols(); ++j) {
    EXPECT_LT(column_error(r.projection.col(j).cast<double>(), ref.scores.col(j)), tol) << "component " << j;
    EXPECT_NEAR(r.explained_variance_ratio[static_cast<size_t>(j)], ref.ratios(j), tol) << "component " << j;
  }
}

TEST(PcaTest, MatchesExactSvdForBothLayoutsAndSeveralDtypes) {
  const std::vector<double> spectrum = {6, 3, 1.5};
  for (tensor::ElementType type :
       {tensor::ElementType::kFloat32, tensor::ElementType::kFloat64, tensor::ElementType::kFloat16,
        tensor::ElementType::kBFloat16, tensor::ElementType::kInt16}) {
    SCOPED_TRACE(tensor::element_type_name(type));
    const double mul = type == tensor::ElementType::kInt16 ? 100 : 1;  // integers: use the range
    auto values = random_low_rank(6 * 5, 7, 11, 0.3, spectrum);
    for (double& v : values) v *= mul;
    // 30 x 7 under kFirstDim as [30, 7]; under kFirstTwoDims as [6, 5, 7].
    const Tensor a = make_tensor(values, type, {30, 7});
    const Tensor b = make_tensor(values, type, {6, 5, 7});
    for (int components : {1, 2, 3}) {
      PcaOptions o;
      o.components = components;
      expect_matches_reference(a.view, o, 2e-5);
      o.layout = PcaRowLayout::kFirstTwoDims;
      expect_matches_reference(b.view, o, 2e-5);
      // Row space (rows <= features): [5, 6, 7] -> 5 rows of 42 features.
      const Tensor c = make_tensor(values, type, {5, 6, 7});
      o.layout = PcaRowLayout::kFirstDim;
      expect_matches_reference(c.view, o, 2e-5);
    }
  }
}

TEST(PcaTest, KnownVariancesOfOrthogonalScaledAxes) {
  // Columns 1..3 of an 8x8 Hadamard matrix (orthogonal, zero mean) scaled by 3, 2, 1:
  // variances 9, 4, 1 -> ratios 9/14, 4/14, 1/14.
  std::vector<double> v;
  for (int i = 0; i < 8; ++i) {
    for (int j = 1; j <= 3; ++j) {
      const int sign = (__builtin_popcount(i & j) % 2) ? -1 : 1;
      v.push_back(sign * (4 - j) + 10.0);
    }
  }
  const Tensor t = make_tensor(v, tensor::ElementType::kFloat32, {8, 3});
  PcaOptions o;
  o.components = 3;
  const PcaResult r = compute_pca(t.view, o);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_FALSE(r.randomized);
  EXPECT_NEAR(r.explained_variance_ratio[0], 9.0 / 14, 1e-6);
  EXPECT_NEAR(r.explained_variance_ratio[1], 4.0 / 14, 1e-6);
  EXPECT_NEAR(r.explained_variance_ratio[2], 1.0 / 14, 1e-6);
  // PC1 is the first axis: scores +-3.
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(std::abs(r.projection(i, 0)), 3.0, 1e-5);
}

TEST(PcaTest, RandomizedAgreesWithExactOnDecayingSpectrum) {
  std::vector<double> spectrum;
  for (int i = 0; i < 30; ++i) spectrum.push_back(10.0 * std::pow(0.7, i));
  // Feature space (2000 x 300) and row space (150 x 2500).
  for (auto [n, d] : {std::pair<int64_t, int64_t>{2000, 300}, {150, 2500}}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(d));
    const Tensor t = make_tensor(random_low_rank(n, d, 3, 0.05, spectrum), tensor::ElementType::kFloat32, {n, d});
    PcaOptions exact;
    exact.exact_below = 1 << 30;
    PcaOptions randomized;
    randomized.exact_below = 1;
    const PcaResult e = compute_pca(t.view, exact);
    const PcaResult r = compute_pca(t.view, randomized);
    ASSERT_TRUE(e.ok() && r.ok());
    EXPECT_FALSE(e.randomized);
    EXPECT_TRUE(r.randomized);
    for (int j = 0; j < 2; ++j) {
      EXPECT_LT(column_error(r.projection.col(j).cast<double>(), e.projection.col(j).cast<double>()), 1e-4);
      EXPECT_NEAR(r.explained_variance_ratio[static_cast<size_t>(j)],
                  e.explained_variance_ratio[static_cast<size_t>(j)], 1e-5);
    }
    // And the exact one against the reference SVD.
    const Reference ref = reference_pca(centred_matrix(t.view, PcaRowLayout::kFirstDim), 2);
    for (int j = 0; j < 2; ++j) {
      EXPECT_LT(column_error(e.projection.col(j).cast<double>(), ref.scores.col(j)), 1e-4);
    }
  }
}

TEST(PcaTest, DeterministicUnderSeedAndThreadCount) {
  const Tensor t = make_tensor(random_low_rank(600, 200, 5, 1.0, {3, 2, 1}), tensor::ElementType::kFloat32, {600, 200});
  PcaOptions o;
  o.exact_below = 1;
  o.max_threads = 1;
  const PcaResult a = compute_pca(t.view, o);
  o.max_threads = 3;
  const PcaResult b = compute_pca(t.view, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a.projection == b.projection);
  EXPECT_EQ(a.explained_variance_ratio, b.explained_variance_ratio);
}

TEST(PcaTest, NonFiniteValuesAreReplacedByColumnMeans) {
  std::vector<double> v = random_low_rank(20, 4, 9, 0.5, {3, 1});
  std::vector<double> clean = v;
  v[5] = NAN;
  v[9] = INFINITY;
  v[14] = -INFINITY;
  // The reference: the same matrix with those elements set to their column's mean of
  // the other (finite) values.
  for (int idx : {5, 9, 14}) {
    const int col = idx % 4;
    double sum = 0;
    int cnt = 0;
    for (int i = 0; i < 20; ++i) {
      const int k = i * 4 + col;
      if (k == 5 || k == 9 || k == 14) continue;
      sum += clean[static_cast<size_t>(k)];
      ++cnt;
    }
    clean[static_cast<size_t>(idx)] = sum / cnt;
  }
  const Tensor dirty = make_tensor(v, tensor::ElementType::kFloat64, {20, 4});
  const Tensor fixed = make_tensor(clean, tensor::ElementType::kFloat64, {20, 4});
  const PcaResult r = compute_pca(dirty.view, PcaOptions{});
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_NE(r.note.find("3 NaN/Inf values"), std::string::npos) << r.note;
  const Reference ref = reference_pca(centred_matrix(fixed.view, PcaRowLayout::kFirstDim), 2);
  for (int j = 0; j < 2; ++j) {
    EXPECT_LT(column_error(r.projection.col(j).cast<double>(), ref.scores.col(j)), 1e-5);
  }
}

TEST(PcaTest, DegenerateInputsGiveAMessageOrAValidResult) {
  struct Case {
    std::string name;
    std::vector<double> values;
    tensor::ElementType type;
    std::vector<int64_t> shape;
    bool ok;
  };
  std::vector<double> ramp(12);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<double>(i % 5);
  const std::vector<Case> cases = {
      {"empty rows", {}, tensor::ElementType::kFloat32, {0, 5}, false},
      {"empty features", {}, tensor::ElementType::kFloat32, {5, 0}, false},
      {"zero dim later", {}, tensor::ElementType::kFloat32, {0, 1LL << 40, 1LL << 40}, false},
      {"scalar", {1}, tensor::ElementType::kFloat32, {}, false},
      {"one row", {1, 2, 3}, tensor::ElementType::kFloat32, {1, 3}, false},
      {"all nan", std::vector<double>(12, NAN), tensor::ElementType::kFloat32, {4, 3}, false},
      {"one feature", {1, 2, 3, 4}, tensor::ElementType::kFloat32, {4}, true},
      {"two rows", {1, 2, 3, 5, 5, 5}, tensor::ElementType::kFloat32, {2, 3}, true},
      {"all equal", std::vector<double>(12, 7.0), tensor::ElementType::kFloat32, {4, 3}, true},
      {"inf column", {1, INFINITY, 2, INFINITY, 3, INFINITY}, tensor::ElementType::kFloat32, {3, 2}, true},
      {"bool", ramp, tensor::ElementType::kBool, {4, 3}, true},
      {"uint8", ramp, tensor::ElementType::kUInt8, {3, 4}, true},
      {"int64", ramp, tensor::ElementType::kInt64, {6, 2}, true},
      {"int8", ramp, tensor::ElementType::kInt8, {2, 2, 3}, true},
      {"huge float", {3e38, -3e38, 1, 2e38, 0, -1e38}, tensor::ElementType::kFloat32, {3, 2}, true},
      {"huge double", {1.7e308, -1.7e308, 1, 1e308, -1.7e308, 1.7e308}, tensor::ElementType::kFloat64, {3, 2}, true},
      {"tiny", {1e-40, 2e-45, 0, -1e-40, 3e-42, 1e-41}, tensor::ElementType::kFloat32, {3, 2}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor t = make_tensor(c.values, c.type, c.shape);
    for (PcaRowLayout layout : {PcaRowLayout::kFirstDim, PcaRowLayout::kFirstTwoDims}) {
      for (int64_t exact_below : {int64_t{1}, int64_t{1} << 20}) {
        PcaOptions o;
        o.layout = layout;
        o.exact_below = exact_below;
        const PcaResult r = compute_pca(t.view, o);
        if (!r.ok()) {
          EXPECT_FALSE(c.ok && layout == PcaRowLayout::kFirstDim) << r.message;
          continue;
        }
        EXPECT_EQ(r.projection.rows(), r.rows);
        EXPECT_EQ(r.projection.cols(), 2);
        EXPECT_TRUE(r.projection.allFinite());
        for (float ratio : r.explained_variance_ratio) {
          EXPECT_GE(ratio, 0.0f);
          EXPECT_LE(ratio, 1.0f + 1e-6f);
        }
      }
    }
  }
  // Invalid views.
  EXPECT_FALSE(compute_pca(tensor::TensorView{nullptr, tensor::ElementType::kFloat32, {4, 4}}, {}).ok());
  EXPECT_FALSE(compute_pca(tensor::TensorView{nullptr, static_cast<tensor::ElementType>(99), {4, 4}}, {}).ok());
  EXPECT_FALSE(compute_pca(tensor::TensorView{nullptr, tensor::ElementType::kFloat32, {-1, 4}}, {}).ok());
}

TEST(PcaTest, AllEqualRowsSayZeroVariance) {
  const Tensor t = make_tensor(std::vector<double>(12, 7.0), tensor::ElementType::kFloat32, {4, 3});
  const PcaResult r = compute_pca(t.view, PcaOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r.note.find("zero variance"), std::string::npos);
  EXPECT_TRUE(r.projection.isZero());
}

TEST(PcaTest, OneFeatureProjectsTheCentredValues) {
  const Tensor t = make_tensor({1, 2, 3, 6}, tensor::ElementType::kInt32, {4});
  const PcaResult r = compute_pca(t.view, PcaOptions{});
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_NEAR(r.explained_variance_ratio[0], 1.0, 1e-6);
  EXPECT_EQ(r.explained_variance_ratio[1], 0.0f);
  EXPECT_NEAR(r.projection(3, 0), 3.0, 1e-5);  // 6 - mean 3, largest score positive
  EXPECT_NEAR(r.projection(0, 0), -2.0, 1e-5);
  EXPECT_EQ(r.projection(0, 1), 0.0f);
}

TEST(PcaTest, AlignSignsUndoesAMirroredComponent) {
  Eigen::MatrixXf previous(5, 2);
  previous << 1, 0.5, 2, -1, 3, 0.2, -4, 1, -2, -0.7;
  Eigen::MatrixXf next = previous;
  next.col(1) *= -1.0f;  // the second component came out mirrored
  next(0, 0) += 0.1f;
  EXPECT_EQ(align_signs(&next, previous), 1);
  EXPECT_GT(next.col(1).dot(previous.col(1)), 0);
  EXPECT_GT(next.col(0).dot(previous.col(0)), 0);
  // Other row counts do not correspond: nothing changes.
  Eigen::MatrixXf other = -previous.topRows(4);
  EXPECT_EQ(align_signs(&other, previous), 0);
  EXPECT_LT(other(0, 0), 0);
  // Unrelated scores (correlation near 0) keep their sign.
  Eigen::MatrixXf unrelated(4, 1), before(4, 1);
  unrelated << 1, -1, 1, -1;
  before << 1, 1, -1, -1;
  EXPECT_EQ(align_signs(&unrelated, before), 0);
}

}  // namespace
}  // namespace tensorscope::plotting
