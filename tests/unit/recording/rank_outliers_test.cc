// rank_outliers (recording/rank_outliers.h): among 512 ranks that agree, the one whose
// gradient norm is 3x the others' is found, and only it; ranks that agree to the last bit
// flag nothing; a NaN cell is an outlier of infinite score; a column of too few ranks
// flags only its non-finite cells; a linear metric's outlier is found on its own scale.
#include "tensorscope/recording/rank_outliers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tensorscope::recording {
namespace {

TEST(RankOutliers, TheOneRankThatDivergedAmongFiveHundredTwelve) {
  const size_t ranks = 512, columns = 40;
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(1.0f, 0.02f);  // 2 % spread between ranks
  std::vector<float> values(ranks * columns);
  std::vector<uint8_t> bad(ranks * columns, 0);
  for (size_t r = 0; r < ranks; ++r) {
    for (size_t c = 0; c < columns; ++c) values[r * columns + c] = (1.0f + static_cast<float>(c)) * noise(rng);
  }
  values[301 * columns + 17] *= 3.0f;  // rank 301's gradient at tensor 17
  const auto found = rank_outliers(values, bad, ranks, columns, /*log_scale=*/true);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 301u);
  EXPECT_EQ(found[0].column, 17u);
  EXPECT_GT(found[0].score, 10.0);
}

TEST(RankOutliers, RanksThatAgreeFlagNothingButANonFiniteCell) {
  const size_t ranks = 8, columns = 3;
  std::vector<float> values(ranks * columns, 2.0f);
  std::vector<uint8_t> bad(ranks * columns, 0);
  values[5 * columns + 1] = std::nextafter(2.0f, 3.0f);  // a rounding difference
  EXPECT_TRUE(rank_outliers(values, bad, ranks, columns, true).empty());
  bad[2 * columns + 2] = 1;
  values[2 * columns + 2] = std::numeric_limits<float>::quiet_NaN();
  const auto found = rank_outliers(values, bad, ranks, columns, true);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 2u);
  EXPECT_EQ(found[0].column, 2u);
  EXPECT_TRUE(std::isinf(found[0].score));
}

TEST(RankOutliers, TooFewRanksFlagOnlyNonFiniteCells) {
  const size_t ranks = 3, columns = 1;
  const std::vector<float> values = {1.0f, 1.0f, 100.0f};
  std::vector<uint8_t> bad = {0, 0, 0};
  EXPECT_TRUE(rank_outliers(values, bad, ranks, columns, true).empty());
  bad[0] = 1;
  const auto found = rank_outliers(values, bad, ranks, columns, true);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 0u);
}

TEST(RankOutliers, ALinearMetricOnItsOwnScaleAndCellsWithoutValue) {
  // Fractions of zeros: a dead rank at 0.9 among ranks near 0.5; a rank without the
  // tensor (NaN, not non-finite) is no outlier.
  const size_t ranks = 10, columns = 1;
  std::vector<float> values = {0.50f, 0.51f, 0.49f, 0.50f, 0.52f, 0.48f, 0.50f, 0.90f, 0.50f, 0.51f};
  values[3] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<uint8_t> bad(ranks, 0);
  const auto found = rank_outliers(values, bad, ranks, columns, /*log_scale=*/false);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 7u);
  // On a log scale, a zero (no magnitude) is left out, not flagged.
  std::vector<float> norms(ranks, 1.0f);
  norms[4] = 0.0f;
  EXPECT_TRUE(rank_outliers(norms, bad, ranks, columns, true).empty());
}

}  // namespace
}  // namespace tensorscope::recording
