// t-SNE (tsne.h): neighbourhoods of well-separated clusters are kept, results are
// reproducible under a seed and independent of the thread count, warm starts move
// points little, and untrusted inputs (empty, tiny, constant, NaN, integer, bool,
// one feature, huge values) never crash.
#include "tensorscope/plotting/tsne.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace tensorscope::plotting {
namespace {

struct Clusters {
  std::vector<float> data;  // n × dims, row-major
  std::vector<int> label;
  int64_t n = 0;
  int64_t dims = 0;
};

Clusters make_clusters(int clusters, int per_cluster, int dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Clusters c;
  c.n = static_cast<int64_t>(clusters) * per_cluster;
  c.dims = dims;
  std::vector<std::vector<float>> centres(static_cast<size_t>(clusters));
  for (auto& centre : centres) {
    centre.resize(static_cast<size_t>(dims));
    for (float& v : centre) v = 10.0f * normal(rng);
  }
  for (int k = 0; k < clusters; ++k) {
    for (int p = 0; p < per_cluster; ++p) {
      for (int d = 0; d < dims; ++d)
        c.data.push_back(centres[static_cast<size_t>(k)][static_cast<size_t>(d)] + normal(rng));
      c.label.push_back(k);
    }
  }
  return c;
}

tensor::TensorView view_of(const Clusters& c) {
  return tensor::TensorView{c.data.data(), tensor::ElementType::kFloat32, {c.n, c.dims}};
}

// Trustworthiness (Venna & Kaski) with k neighbours, exact, O(n² log n).
double trustworthiness(const std::vector<float>& high, int64_t dims, const Eigen::MatrixXf& low, int k) {
  const int64_t n = low.rows();
  double penalty = 0;
  std::vector<std::pair<double, int64_t>> order(static_cast<size_t>(n));
  std::vector<int64_t> rank(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double d = 0;
      for (int64_t f = 0; f < dims; ++f) {
        const double e = high[static_cast<size_t>(i * dims + f)] - high[static_cast<size_t>(j * dims + f)];
        d += e * e;
      }
      order[static_cast<size_t>(j)] = {j == i ? -1.0 : d, j};
    }
    std::sort(order.begin(), order.end());
    for (int64_t r = 0; r < n; ++r) rank[static_cast<size_t>(order[static_cast<size_t>(r)].second)] = r;
    for (int64_t j = 0; j < n; ++j) {
      order[static_cast<size_t>(j)] = {j == i ? -1.0 : (low.row(i) - low.row(j)).squaredNorm(), j};
    }
    std::partial_sort(order.begin(), order.begin() + k + 1, order.end());
    for (int r = 1; r <= k; ++r) {
      const int64_t high_rank = rank[static_cast<size_t>(order[static_cast<size_t>(r)].second)];
      if (high_rank > k) penalty += static_cast<double>(high_rank - k);
    }
  }
  return 1.0 - 2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0)) * penalty;
}

double nearest_centroid_accuracy(const Eigen::MatrixXf& y, const std::vector<int>& label, int clusters) {
  Eigen::MatrixXd centroid = Eigen::MatrixXd::Zero(clusters, 2);
  std::vector<int> count(static_cast<size_t>(clusters), 0);
  for (int64_t i = 0; i < y.rows(); ++i) {
    centroid.row(label[static_cast<size_t>(i)]) += y.row(i).cast<double>();
    ++count[static_cast<size_t>(label[static_cast<size_t>(i)])];
  }
  for (int k = 0; k < clusters; ++k) centroid.row(k) /= count[static_cast<size_t>(k)];
  int correct = 0;
  for (int64_t i = 0; i < y.rows(); ++i) {
    int best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (int k = 0; k < clusters; ++k) {
      const double d = (y.row(i).cast<double>() - centroid.row(k)).squaredNorm();
      if (d < best_d) {
        best_d = d;
        best = k;
      }
    }
    correct += best == label[static_cast<size_t>(i)] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(y.rows());
}

// Root-mean-square distance of the points from their mean.
double spread(const Eigen::MatrixXf& y) {
  const Eigen::RowVector2f mean = y.colwise().mean();
  return std::sqrt((y.rowwise() - mean).rowwise().squaredNorm().mean());
}

double mean_displacement(const Eigen::MatrixXf& a, const Eigen::MatrixXf& b) { return (a - b).rowwise().norm().mean(); }

TsneOptions small_options() {
  TsneOptions o;
  o.iterations = 500;
  o.warm_iterations = 100;
  o.seed = 7;
  o.threads = 2;
  return o;
}

TEST(TsneTest, SeparatedClustersKeepTheirNeighbours) {
  const Clusters c = make_clusters(5, 100, 20, 1);
  TsneEmbedder embedder(small_options());
  const TsneResult r = embedder.embed(view_of(c));
  ASSERT_EQ(r.embedding.rows(), c.n) << r.message;
  ASSERT_EQ(r.embedding.cols(), 2);
  EXPECT_TRUE(r.message.empty()) << r.message;
  EXPECT_FALSE(r.subsampled);
  EXPECT_FALSE(r.warm_started);
  EXPECT_EQ(r.iterations_run, 500);
  EXPECT_TRUE(r.embedding.allFinite());
  ASSERT_EQ(r.row_index.size(), static_cast<size_t>(c.n));
  for (int64_t i = 0; i < c.n; ++i) EXPECT_EQ(r.row_index[static_cast<size_t>(i)], i);
  const double t = trustworthiness(c.data, c.dims, r.embedding, 10);
  EXPECT_GE(t, 0.9);
  EXPECT_GE(nearest_centroid_accuracy(r.embedding, c.label, 5), 0.95);
  EXPECT_GT(r.kl_divergence, 0.0);
  EXPECT_LT(r.kl_divergence, 3.0);
}

TEST(TsneTest, ReproducibleUnderSeedAndThreadCount) {
  const Clusters c = make_clusters(3, 60, 8, 2);
  TsneOptions o = small_options();
  o.iterations = 300;
  o.threads = 1;
  const TsneResult a = TsneEmbedder(o).embed(view_of(c));
  const TsneResult b = TsneEmbedder(o).embed(view_of(c));
  o.threads = 3;
  const TsneResult d = TsneEmbedder(o).embed(view_of(c));
  ASSERT_EQ(a.embedding.rows(), c.n);
  EXPECT_TRUE(a.embedding == b.embedding);
  EXPECT_TRUE(a.embedding == d.embedding);
  EXPECT_EQ(a.kl_divergence, d.kl_divergence);
}

TEST(TsneTest, WarmStartMovesLittleAndRunsFewIterations) {
  Clusters c = make_clusters(5, 100, 20, 3);
  TsneEmbedder embedder(small_options());
  const TsneResult first = embedder.embed(view_of(c));
  ASSERT_EQ(first.embedding.rows(), c.n);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  Clusters next = c;
  for (float& v : next.data) v += noise(rng);
  const TsneResult warm = embedder.embed(view_of(next));
  ASSERT_EQ(warm.embedding.rows(), c.n);
  EXPECT_TRUE(warm.warm_started);
  EXPECT_EQ(warm.iterations_run, 100);
  TsneOptions other = small_options();
  other.seed = 99;
  const TsneResult fresh = TsneEmbedder(other).embed(view_of(next));
  ASSERT_EQ(fresh.embedding.rows(), c.n);
  EXPECT_FALSE(fresh.warm_started);
  const double scale = spread(first.embedding);
  const double warm_move = mean_displacement(first.embedding, warm.embedding) / scale;
  const double fresh_move = mean_displacement(first.embedding, fresh.embedding) / scale;
  EXPECT_LT(warm_move, 0.1);
  EXPECT_LT(warm_move * 5, fresh_move);
  EXPECT_GE(nearest_centroid_accuracy(warm.embedding, next.label, 5), 0.95);

  // A different row count starts fresh.
  Clusters fewer = make_clusters(5, 90, 20, 3);
  const TsneResult restarted = embedder.embed(view_of(fewer));
  EXPECT_FALSE(restarted.warm_started);
  EXPECT_EQ(restarted.embedding.rows(), fewer.n);
}

TEST(TsneTest, TooFewRowsGiveAMessage) {
  TsneEmbedder embedder(small_options());
  std::vector<float> values(4 * 3, 1.0f);
  for (int64_t rows : {0, 1, 4}) {
    const TsneResult r = embedder.embed(tensor::TensorView{values.data(), tensor::ElementType::kFloat32, {rows, 3}});
    EXPECT_EQ(r.embedding.rows(), 0);
    EXPECT_FALSE(r.message.empty());
  }
  const TsneResult scalar = embedder.embed(tensor::TensorView{values.data(), tensor::ElementType::kFloat32, {}});
  EXPECT_EQ(scalar.embedding.rows(), 0);
  EXPECT_FALSE(scalar.message.empty());
  const TsneResult invalid = embedder.embed(tensor::TensorView{nullptr, tensor::ElementType::kFloat32, {10, 3}});
  EXPECT_EQ(invalid.embedding.rows(), 0);
  EXPECT_FALSE(invalid.message.empty());
}

TEST(TsneTest, DegenerateInputsNeverCrash) {
  TsneOptions o = small_options();
  o.iterations = 100;
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  {  // All rows equal.
    std::vector<float> v(50 * 4, 3.0f);
    const TsneResult r = TsneEmbedder(o).embed(tensor::TensorView{v.data(), tensor::ElementType::kFloat32, {50, 4}});
    EXPECT_EQ(r.embedding.rows(), 50);
    EXPECT_TRUE(r.embedding.allFinite());
  }
  {  // NaN and Inf rows are dropped and reported.
    Clusters c = make_clusters(2, 20, 5, 4);
    c.data[3] = kNaN;
    c.data[5 * 7 + 1] = kInf;
    const TsneResult r = TsneEmbedder(o).embed(view_of(c));
    EXPECT_EQ(r.embedding.rows(), 38);
    EXPECT_NE(r.message.find("dropped 2"), std::string::npos) << r.message;
    EXPECT_EQ(std::count(r.row_index.begin(), r.row_index.end(), 0), 0);
    EXPECT_EQ(std::count(r.row_index.begin(), r.row_index.end(), 7), 0);
    EXPECT_TRUE(r.embedding.allFinite());
  }
  {  // All NaN.
    std::vector<float> v(30 * 2, kNaN);
    const TsneResult r = TsneEmbedder(o).embed(tensor::TensorView{v.data(), tensor::ElementType::kFloat32, {30, 2}});
    EXPECT_EQ(r.embedding.rows(), 0);
    EXPECT_FALSE(r.message.empty());
  }
  {  // Integer, bool, float16 and huge float64 data; one feature (1-D tensor).
    std::vector<int32_t> ints(40 * 3);
    for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int32_t>(i % 7) * 1000000;
    EXPECT_EQ(
        TsneEmbedder(o).embed(tensor::TensorView{ints.data(), tensor::ElementType::kInt32, {40, 3}}).embedding.rows(),
        40);
    std::vector<uint8_t> bools(40 * 6);
    for (size_t i = 0; i < bools.size(); ++i) bools[i] = static_cast<uint8_t>((i * 37) % 5 == 0 ? 7 : 0);
    const TsneResult b = TsneEmbedder(o).embed(tensor::TensorView{bools.data(), tensor::ElementType::kBool, {40, 6}});
    EXPECT_EQ(b.embedding.rows(), 40);
    EXPECT_TRUE(b.embedding.allFinite());
    std::vector<uint16_t> halves(40 * 2, 0x3c00);  // 1.0
    halves[5] = 0x7e00;                            // NaN
    EXPECT_EQ(TsneEmbedder(o)
                  .embed(tensor::TensorView{halves.data(), tensor::ElementType::kFloat16, {40, 2}})
                  .embedding.rows(),
              39);
    std::vector<double> huge(40 * 3);
    for (size_t i = 0; i < huge.size(); ++i) huge[i] = (i % 2 ? 1e300 : -1e300) * static_cast<double>(i % 5);
    const TsneResult h = TsneEmbedder(o).embed(tensor::TensorView{huge.data(), tensor::ElementType::kFloat64, {40, 3}});
    EXPECT_EQ(h.embedding.rows(), 40);
    EXPECT_TRUE(h.embedding.allFinite());
    std::vector<float> line(60);
    for (size_t i = 0; i < line.size(); ++i) line[i] = static_cast<float>(i % 3) * 10.0f + 0.01f * i;
    const TsneResult l = TsneEmbedder(o).embed(tensor::TensorView{line.data(), tensor::ElementType::kFloat32, {60}});
    EXPECT_EQ(l.embedding.rows(), 60);
    EXPECT_TRUE(l.embedding.allFinite());
  }
  {  // Duplicated rows and absurd options.
    Clusters c = make_clusters(2, 30, 3, 5);
    for (int64_t i = 1; i < c.n; i += 2) {
      std::copy_n(&c.data[static_cast<size_t>((i - 1) * c.dims)], c.dims, &c.data[static_cast<size_t>(i * c.dims)]);
    }
    TsneOptions bad = o;
    bad.perplexity = std::numeric_limits<double>::quiet_NaN();
    bad.theta = -1;
    bad.learning_rate = std::numeric_limits<double>::infinity();
    bad.early_exaggeration = -5;
    bad.exaggeration_iterations = 1000000;
    bad.threads = -3;
    const TsneResult r = TsneEmbedder(bad).embed(view_of(c));
    EXPECT_EQ(r.embedding.rows(), c.n);
    EXPECT_TRUE(r.embedding.allFinite());
  }
}

TEST(TsneTest, SubsamplesAboveMaxRowsDeterministically) {
  const Clusters c = make_clusters(4, 50, 60, 6);  // 60 features: reduced to 50
  TsneOptions o = small_options();
  o.iterations = 200;
  o.max_rows = 100;
  TsneEmbedder embedder(o);
  const TsneResult r = embedder.embed(view_of(c));
  ASSERT_EQ(r.embedding.rows(), 100);
  EXPECT_TRUE(r.subsampled);
  EXPECT_NE(r.message.find("subsampled"), std::string::npos);
  for (size_t i = 0; i < r.row_index.size(); ++i) EXPECT_EQ(r.row_index[i], static_cast<int64_t>(2 * i));
  const TsneResult again = embedder.embed(view_of(c));
  EXPECT_TRUE(again.warm_started);
  EXPECT_EQ(again.row_index, r.row_index);
}

}  // namespace
}  // namespace tensorscope::plotting
