// point_classes_test.cc — the classes of projected points: the silhouette is high for
// separate clusters and near 0 for shuffled labels; a class keeps its colour from frame
// to frame; past 19 classes the most frequent get colours and the rest is "other"; each
// class's centroid trail follows it; and a drawn frame shows each class in its colour,
// where its points are; a frame turned and mirrored is turned back onto the previous one. Set TENSORSCOPE_SCATTER_PNG_DIR to also write the frames as PNGs.
#include "tensorscope/plotting/point_classes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "tensorscope/plotting/scatter_plot.h"

namespace tensorscope::plotting {
namespace {

// `classes` Gaussian clusters of `per` points each, centres on a circle of `radius`;
// labels[i] is point i's cluster.
Eigen::MatrixXf blobs(int classes, int per, float radius, std::vector<int64_t>* labels, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  Eigen::MatrixXf p(classes * per, 2);
  labels->clear();
  for (int c = 0; c < classes; ++c) {
    const float angle = 6.2831853f * static_cast<float>(c) / static_cast<float>(classes);
    for (int k = 0; k < per; ++k) {
      const int i = c * per + k;
      p(i, 0) = radius * std::cos(angle) + normal(rng);
      p(i, 1) = radius * std::sin(angle) + normal(rng);
      labels->push_back(c);
    }
  }
  return p;
}

TEST(PointClassesTest, SilhouetteIsHighForSeparateClustersAndNearZeroForShuffledLabels) {
  std::vector<int64_t> labels;
  const Eigen::MatrixXf p = blobs(5, 200, 12.0f, &labels);
  const double separate = silhouette_score(p, labels);
  EXPECT_GT(separate, 0.7);
  EXPECT_LE(separate, 1.0);

  std::vector<int64_t> shuffled = labels;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(9));
  EXPECT_LT(std::abs(silhouette_score(p, shuffled)), 0.1);

  // Overlapping clusters score in between.
  const Eigen::MatrixXf close = blobs(5, 200, 1.5f, &labels);
  const double overlap = silhouette_score(close, labels);
  EXPECT_GT(overlap, -0.1);
  EXPECT_LT(overlap, separate - 0.3);

  EXPECT_TRUE(std::isnan(silhouette_score(p, std::vector<int64_t>(p.rows(), 4))));  // one class
}

TEST(PointClassesTest, AClassKeepsItsColorFromFrameToFrame) {
  ClassTracker tracker;
  std::vector<int64_t> labels;
  const Eigen::MatrixXf p = blobs(5, 20, 10.0f, &labels);
  const PointClasses first = tracker.classify(p, labels, {"a", "b", "c", "d", "e"});
  ASSERT_EQ(first.classes.size(), 5u);
  EXPECT_EQ(first.classes[0].name, "a");
  EXPECT_EQ(first.classes[0].color, class_palette()[0]);
  EXPECT_EQ(first.classes[4].color, class_palette()[4]);
  for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(first.of_point[i], labels[i]);

  // Class 0 absent, class 5 new: the others keep theirs (0 keeps its colour for when it
  // comes back), 5 takes the first free colour.
  for (int64_t& l : labels) l = l == 0 ? 5 : l;
  const PointClasses second = tracker.classify(p, labels, {});
  ASSERT_EQ(second.classes.size(), 5u);
  EXPECT_EQ(second.classes[0].name, "1");  // legend in colour order
  EXPECT_EQ(second.classes[0].color, class_palette()[1]);
  EXPECT_EQ(second.classes[4].name, "5");
  EXPECT_EQ(second.classes[4].color, class_palette()[5]);
  for (int64_t& l : labels) l = l == 5 ? 0 : l;
  const PointClasses third = tracker.classify(p, labels, {});
  EXPECT_EQ(third.classes[0].name, "0");
  EXPECT_EQ(third.classes[0].color, class_palette()[0]);
}

TEST(PointClassesTest, PastNineteenClassesTheMostFrequentGetColorsAndTheRestIsOther) {
  ClassTracker tracker;
  const int kinds = 25;
  Eigen::MatrixXf p(0, 2);
  std::vector<int64_t> labels;
  std::vector<std::vector<float>> rows;
  for (int c = 0; c < kinds; ++c) {
    const int count = c < 6 ? 2 : 10;  // classes 0..5 are the rare ones
    for (int k = 0; k < count; ++k) {
      rows.push_back({static_cast<float>(c), static_cast<float>(k)});
      labels.push_back(c);
    }
  }
  p.resize(static_cast<int>(rows.size()), 2);
  for (size_t i = 0; i < rows.size(); ++i) p.row(static_cast<int>(i)) << rows[i][0], rows[i][1];
  const PointClasses classes = tracker.classify(p, labels, {});
  ASSERT_EQ(classes.classes.size(), static_cast<size_t>(kColoredClasses + 1));
  const PointClasses::Class& other = classes.classes.back();
  EXPECT_TRUE(other.other);
  EXPECT_EQ(other.name, "other (6 classes)");
  EXPECT_EQ(other.points, 12u);
  EXPECT_EQ(other.color, other_class_color());
  EXPECT_EQ(classes.of_point[0], kColoredClasses);  // a point of class 0 is "other"
  for (int i = 0; i < kColoredClasses; ++i) EXPECT_FALSE(classes.classes[static_cast<size_t>(i)].other);
  EXPECT_EQ(classes.classes[0].name, "6");  // the most frequent, smallest label first
}

TEST(PointClassesTest, TrailsFollowTheCentroidsOverTheLastFrames) {
  ClassTracker tracker;
  std::vector<int64_t> labels;
  Eigen::MatrixXf p = blobs(2, 50, 5.0f, &labels);
  PointClasses classes;
  for (int frame = 0; frame < 12; ++frame) {
    p.col(0).array() += 1.0f;  // every point moves right by 1 per frame
    classes = tracker.classify(p, labels, {});
  }
  ASSERT_EQ(classes.classes.size(), 2u);
  const auto& trail = classes.classes[0].trail;
  ASSERT_EQ(trail.size(), static_cast<size_t>(kTrailFrames));
  double mean_x = 0;
  for (int i = 0; i < 50; ++i) mean_x += p(i, 0);
  EXPECT_NEAR(trail.back().x, mean_x / 50, 1e-4);
  for (size_t k = 1; k < trail.size(); ++k) EXPECT_NEAR(trail[k].x - trail[k - 1].x, 1.0, 1e-4);
}

TEST(PointClassesTest, BrokenTrailsStartAfreshAndGrowAgain) {
  ClassTracker tracker;
  std::vector<int64_t> labels;
  Eigen::MatrixXf p = blobs(2, 50, 5.0f, &labels);
  for (int frame = 0; frame < 5; ++frame) {
    p.col(0).array() += 1.0f;
    tracker.classify(p, labels, {});
  }
  tracker.break_trails();  // the next frame is a fresh run of other rows
  p.col(0).array() += 40.0f;
  PointClasses classes = tracker.classify(p, labels, {});
  ASSERT_EQ(classes.classes.size(), 2u);
  EXPECT_EQ(classes.classes[0].trail.size(), 1u) << "no line from the last run's layout";
  p.col(0).array() += 1.0f;
  classes = tracker.classify(p, labels, {});
  ASSERT_EQ(classes.classes[0].trail.size(), 2u);
  EXPECT_NEAR(classes.classes[0].trail[1].x - classes.classes[0].trail[0].x, 1.0, 1e-4);
}

TEST(PointClassesTest, AlignTurnsAFrameOntoThePreviousFramesCentroids) {
  ClassTracker tracker;
  std::vector<int64_t> labels;
  const Eigen::MatrixXf before = blobs(4, 30, 6.0f, &labels);
  Eigen::MatrixXf first = before;
  EXPECT_FALSE(tracker.align(&first, labels));  // nothing to turn onto yet
  const PointClasses reference = tracker.classify(first, labels, {});
  // The next frame: other points of the same classes, turned by 100 degrees and mirrored,
  // as a PCA of another batch may come out.
  std::vector<int64_t> next_labels;
  const Eigen::MatrixXf other = blobs(4, 30, 6.0f, &next_labels, /*seed=*/8);
  const float a = 100.0f * 3.14159265f / 180.0f;
  Eigen::Matrix2f turn;
  turn << std::cos(a), std::sin(a), std::sin(a), -std::cos(a);  // a reflection
  Eigen::MatrixXf next = other * turn;
  ASSERT_TRUE(tracker.align(&next, next_labels));
  const PointClasses aligned = tracker.classify(next, next_labels, {});
  ASSERT_EQ(aligned.classes.size(), 4u);
  for (size_t c = 0; c < 4; ++c) {
    const cv::Point2d now = aligned.classes[c].trail.back(), then = reference.classes[c].trail.back();
    EXPECT_LT(std::hypot(now.x - then.x, now.y - then.y), 0.6) << "class " << c;  // the samples' noise
  }
  // Turning keeps distances: no scaling.
  EXPECT_NEAR((next.row(0) - next.row(40)).norm(), (other.row(0) - other.row(40)).norm(), 1e-4);
}

int pixels_near(const cv::Mat& image, const cv::Rect& where, const cv::Vec3b& color, int tolerance) {
  int n = 0;
  for (int y = where.y; y < where.y + where.height; ++y) {
    for (int x = where.x; x < where.x + where.width; ++x) {
      const cv::Vec3b c = image.at<cv::Vec3b>(y, x);
      if (std::abs(c[0] - color[0]) + std::abs(c[1] - color[1]) + std::abs(c[2] - color[2]) <= tolerance) ++n;
    }
  }
  return n;
}

TEST(PointClassesTest, AFrameShowsEachClassInItsColorWhereItsPointsAre) {
  // Four clusters in the four corners of the data: each quadrant of the plot holds its
  // class's colour and not the others'.
  std::vector<int64_t> labels;
  Eigen::MatrixXf p(400, 2);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 0.4f);
  for (int i = 0; i < 400; ++i) {
    const int c = i / 100;
    p(i, 0) = (c % 2 == 0 ? -5.f : 5.f) + normal(rng);
    p(i, 1) = (c < 2 ? -5.f : 5.f) + normal(rng);
    labels.push_back(c);
  }
  ClassTracker tracker;
  const PointClasses classes = tracker.classify(p, labels, {"zero", "one", "two", "three"});
  FrameInfo info;
  info.stream = "encoder.out";
  info.kind = "output";
  info.step = 300;
  ScatterLabels text;
  text.x_title = "PC1";
  text.y_title = "PC2";
  text.note = "400 rows x 64 features";
  text.classes = &classes;
  const cv::Mat image = draw_scatter_frame(info, nullptr, p, text, FrameStyle{});
  if (const char* dir = std::getenv("TENSORSCOPE_SCATTER_PNG_DIR"))
    cv::imwrite(std::string(dir) + "/classes.png", image);
  // Quadrants of the plot, below the header and the legend (whose swatches are the colours).
  const int top = image.rows * 3 / 10, mid_y = (top + image.rows) / 2, mid_x = image.cols / 2 + 10;
  const cv::Rect quadrant[4] = {{0, mid_y, mid_x, image.rows - mid_y - 40},                   // class 0: bottom left
                                {mid_x, mid_y, image.cols - mid_x, image.rows - mid_y - 40},  // 1: bottom right
                                {0, top, mid_x, mid_y - top},                                 // 2: top left
                                {mid_x, top, image.cols - mid_x, mid_y - top}};               // 3: top right
  for (int c = 0; c < 4; ++c) {
    const cv::Vec3b color = classes.classes[static_cast<size_t>(c)].color;
    for (int q = 0; q < 4; ++q) {
      const int n = pixels_near(image, quadrant[q], color, 30);
      if (q == c) {
        EXPECT_GT(n, 40) << "class " << c << " in its quadrant";
      } else {
        EXPECT_LT(n, 10) << "class " << c << " in quadrant " << q;
      }
    }
  }
}

}  // namespace
}  // namespace tensorscope::plotting
