// point_classes.h — the classes of a projection's points (pca, tsne frames of a tensor
// pushed with row labels): a colour per class that stays the class's from frame to
// frame, the legend, each class's centroid and its trail over the last frames, and how
// well the classes separate (the silhouette of the labels on the 2-D points).
//
// Used by the daemon's worker processes (one ClassTracker per stream, on the thread that
// has the stream's projection); scatter_plot.h draws what classify() returns.
// Colours: a qualitative palette of kColoredClasses colours readable on the frames' dark
// background; a class keeps its colour for the stream's life. New classes take the free
// colours in label order; when they are more than the colours left, the most frequent of
// them take them (ties: the smaller label) and the rest join "other" (grey). The silhouette (Rousseeuw 1987) is computed on at most kSilhouettePoints points
// (an even stride through the rows), in the projection's coordinates: near 1 when the
// classes form tight, distant clusters, near 0 when they overlap, below 0 when points
// sit closer to another class than to their own.
// Thread safety: ClassTracker is stateful, one thread at a time; the free functions are
// pure.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <opencv2/core.hpp>

namespace tensorscope::plotting {

inline constexpr int kColoredClasses = 19;  // then "other"
inline constexpr int kTrailFrames = 8;      // centroids kept per class, this frame's included
inline constexpr size_t kSilhouettePoints = 1000;

struct PointClasses {
  struct Class {
    std::string name;                // legend text: the label's name or number; "other (k classes)"
    cv::Vec3b color;                 // BGR
    uint64_t points = 0;             // in this frame
    std::vector<cv::Point2d> trail;  // centroids in data coordinates, oldest first, this frame's last
    bool other = false;              // the classes without a colour of their own
  };
  std::vector<Class> classes;  // legend order: by colour, "other" last
  std::vector<int> of_point;   // per row of the points: index into classes (-1: not a finite point)
  size_t labels = 0;           // different labels among the finite points ("other" counts each of its own)
  uint64_t points = 0;         // finite points with a label
  double separation = 0;       // silhouette of the labels, [-1, 1]; NaN when fewer than 2 classes
};

// The class colours, BGR, in the order classes take them; then the colour of "other".
const std::array<cv::Vec3b, kColoredClasses>& class_palette();
cv::Vec3b other_class_color();

// The mean silhouette of `labels` (one per row of `points`, whose first two columns are
// the coordinates) over at most `max_points` rows taken at an even stride; rows with a
// non-finite coordinate are left out. NaN when fewer than two classes remain.
double silhouette_score(const Eigen::MatrixXf& points, const std::vector<int64_t>& labels,
                        size_t max_points = kSilhouettePoints);

class ClassTracker {
 public:
  // Turns (rotates, or mirrors) `points` so that this frame's class centroids lie as near
  // as they can to the previous frame's (orthogonal Procrustes over the classes in both,
  // at least two): a projection's orientation is arbitrary (PCA axes of another batch,
  // a t-SNE run of other rows), so without it a video would spin and flip from frame to
  // frame; with it, motion means the classes moved relative to each other. No scaling,
  // no shift. Call before classify(); returns whether the points were turned.
  bool align(Eigen::MatrixXf* points, const std::vector<int64_t>& labels) const;
  // The classes of this frame's points: `labels` has one label per row of `points`
  // (rows beyond it, or a shorter `labels`, are not classified); `names`, when not empty,
  // names label i (else the number is shown).
  PointClasses classify(const Eigen::MatrixXf& points, const std::vector<int64_t>& labels,
                        const std::vector<std::string>& names);
  // The next classify() starts every trail afresh: the frame is a projection of other
  // samples (a fresh t-SNE run of another batch), whose layout cannot be compared with the
  // last one's, so a trail across them would draw a jump, not a motion. align() still
  // turns that frame onto the last centroids (a steady orientation).
  void break_trails() { break_trails_ = true; }

 private:
  std::map<int64_t, int> color_of_;  // label -> index into class_palette()
  std::map<int64_t, std::deque<cv::Point2d>> trails_;
  bool break_trails_ = false;
};

}  // namespace tensorscope::plotting
