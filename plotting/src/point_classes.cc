// point_classes.cc — see point_classes.h.
#include "tensorscope/plotting/point_classes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <Eigen/SVD>

namespace tensorscope::plotting {
namespace {

cv::Vec3b bgr(uint32_t rgb) {
  return cv::Vec3b(static_cast<uchar>(rgb & 0xff), static_cast<uchar>((rgb >> 8) & 0xff),
                   static_cast<uchar>((rgb >> 16) & 0xff));
}

bool finite_point(const Eigen::MatrixXf& points, int64_t i) {
  return std::isfinite(points(i, 0)) && (points.cols() < 2 || std::isfinite(points(i, 1)));
}

double y_of(const Eigen::MatrixXf& points, int64_t i) { return points.cols() >= 2 ? points(i, 1) : 0.0; }

}  // namespace

const std::array<cv::Vec3b, kColoredClasses>& class_palette() {
  // Tableau's 20 qualitative colours without its greys, the darker ones lightened for a
  // dark background; neighbours in this order differ in hue.
  static const std::array<cv::Vec3b, kColoredClasses> palette = {
      bgr(0x5b8fd0), bgr(0xf28e2b), bgr(0xe15759), bgr(0x76b7b2), bgr(0x59a14f), bgr(0xedc948), bgr(0xb07aa1),
      bgr(0xff9da7), bgr(0xb88a6e), bgr(0xa0cbe8), bgr(0xffbe7d), bgr(0x8cd17d), bgr(0xb6992d), bgr(0x499894),
      bgr(0xd37295), bgr(0xfabfd2), bgr(0xd4a6c8), bgr(0x86bcb6), bgr(0xb5de2b)};
  return palette;
}

cv::Vec3b other_class_color() { return bgr(0x8c8c8c); }

double silhouette_score(const Eigen::MatrixXf& points, const std::vector<int64_t>& labels, size_t max_points) {
  const int64_t n = std::min<int64_t>(points.rows(), static_cast<int64_t>(labels.size()));
  if (points.cols() < 1 || n < 2 || max_points < 2) return std::numeric_limits<double>::quiet_NaN();
  std::vector<int64_t> rows;
  const int64_t stride =
      std::max<int64_t>(1, (n + static_cast<int64_t>(max_points) - 1) / static_cast<int64_t>(max_points));
  for (int64_t i = 0; i < n; i += stride) {
    if (finite_point(points, i)) rows.push_back(i);
  }
  // Classes as dense numbers, in label order.
  std::map<int64_t, int> dense;
  for (int64_t r : rows) dense.emplace(labels[static_cast<size_t>(r)], 0);
  if (dense.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  int next = 0;
  for (auto& [label, id] : dense) id = next++;
  std::vector<int> cls(rows.size());
  std::vector<int64_t> size(dense.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    cls[i] = dense[labels[static_cast<size_t>(rows[i])]];
    ++size[static_cast<size_t>(cls[i])];
  }
  std::vector<double> sum(dense.size());
  double total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::fill(sum.begin(), sum.end(), 0.0);
    const double xi = points(rows[i], 0), yi = y_of(points, rows[i]);
    for (size_t j = 0; j < rows.size(); ++j) {
      const double dx = points(rows[j], 0) - xi, dy = y_of(points, rows[j]) - yi;
      sum[static_cast<size_t>(cls[j])] += std::sqrt(dx * dx + dy * dy);
    }
    const size_t own = static_cast<size_t>(cls[i]);
    if (size[own] <= 1) continue;  // a class of one point scores 0
    const double a = sum[own] / static_cast<double>(size[own] - 1);
    double b = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < sum.size(); ++c) {
      if (c != own && size[c] > 0) b = std::min(b, sum[c] / static_cast<double>(size[c]));
    }
    const double m = std::max(a, b);
    if (m > 0) total += (b - a) / m;
  }
  return total / static_cast<double>(rows.size());
}

bool ClassTracker::align(Eigen::MatrixXf* points, const std::vector<int64_t>& labels) const {
  if (points->cols() < 2 || trails_.empty()) return false;
  const int64_t n = std::min<int64_t>(points->rows(), static_cast<int64_t>(labels.size()));
  std::map<int64_t, std::pair<Eigen::Vector2d, int64_t>> now;  // label -> (coordinate sum, points)
  for (int64_t i = 0; i < n; ++i) {
    if (!finite_point(*points, i)) continue;
    auto& [sum, count] = now.try_emplace(labels[static_cast<size_t>(i)], Eigen::Vector2d::Zero(), 0).first->second;
    sum += Eigen::Vector2d((*points)(i, 0), (*points)(i, 1));
    ++count;
  }
  Eigen::Matrix2d cross = Eigen::Matrix2d::Zero();  // sum over classes of current^T * previous
  int matched = 0;
  for (const auto& [label, seen] : now) {
    const auto before = trails_.find(label);
    if (before == trails_.end() || before->second.empty()) continue;
    const Eigen::Vector2d current = seen.first / static_cast<double>(seen.second);
    const Eigen::Vector2d previous(before->second.back().x, before->second.back().y);
    cross += current * previous.transpose();
    ++matched;
  }
  if (matched < 2 || !cross.allFinite()) return false;
  const Eigen::JacobiSVD<Eigen::Matrix2d> svd(cross, Eigen::ComputeFullU | Eigen::ComputeFullV);
  const Eigen::Matrix2f turn = (svd.matrixU() * svd.matrixV().transpose()).cast<float>();
  points->leftCols<2>() = (points->leftCols<2>() * turn).eval();
  return true;
}

PointClasses ClassTracker::classify(const Eigen::MatrixXf& points, const std::vector<int64_t>& labels,
                                    const std::vector<std::string>& names) {
  PointClasses out;
  const int64_t n = std::min<int64_t>(points.rows(), static_cast<int64_t>(labels.size()));
  out.of_point.assign(static_cast<size_t>(points.rows()), -1);
  if (points.cols() < 1) return out;
  // This frame's classes: points and centroid sums.
  struct Seen {
    uint64_t points = 0;
    double sx = 0, sy = 0;
  };
  std::map<int64_t, Seen> seen;
  for (int64_t i = 0; i < n; ++i) {
    if (!finite_point(points, i)) continue;
    Seen& s = seen[labels[static_cast<size_t>(i)]];
    ++s.points;
    s.sx += points(i, 0);
    s.sy += y_of(points, i);
  }
  // Colours for classes without one: the most frequent first (ties: the smaller label).
  std::vector<std::pair<int64_t, uint64_t>> waiting;
  for (const auto& [label, s] : seen) {
    if (!color_of_.count(label)) waiting.emplace_back(label, s.points);
  }
  std::vector<bool> taken(kColoredClasses, false);
  for (const auto& [label, color] : color_of_) taken[static_cast<size_t>(color)] = true;
  const auto free_colors = static_cast<size_t>(std::count(taken.begin(), taken.end(), false));
  if (waiting.size() > free_colors) {  // (else in label order, as `seen` is sorted)
    std::stable_sort(waiting.begin(), waiting.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  for (const auto& [label, count] : waiting) {
    const auto free = std::find(taken.begin(), taken.end(), false);
    if (free == taken.end()) break;
    *free = true;
    color_of_[label] = static_cast<int>(free - taken.begin());
  }
  // Legend order: by colour; the rest is "other".
  std::vector<std::pair<int, int64_t>> colored;  // (colour, label)
  PointClasses::Class other;
  other.other = true;
  other.color = other_class_color();
  size_t other_classes = 0;
  for (const auto& [label, s] : seen) {
    const auto c = color_of_.find(label);
    if (c != color_of_.end()) {
      colored.emplace_back(c->second, label);
    } else {
      other.points += s.points;
      ++other_classes;
    }
  }
  std::sort(colored.begin(), colored.end());
  std::unordered_map<int64_t, int> index_of;
  for (const auto& [color, label] : colored) {
    const Seen& s = seen[label];
    PointClasses::Class c;
    c.name = names.empty()                                          ? std::to_string(label)
        : label >= 0 && static_cast<uint64_t>(label) < names.size() ? names[static_cast<size_t>(label)]
                                                                    : std::to_string(label);
    c.color = class_palette()[static_cast<size_t>(color)];
    c.points = s.points;
    std::deque<cv::Point2d>& trail = trails_[label];
    if (break_trails_) trail.clear();
    trail.emplace_back(s.sx / static_cast<double>(s.points), s.sy / static_cast<double>(s.points));
    while (trail.size() > static_cast<size_t>(kTrailFrames)) trail.pop_front();
    c.trail.assign(trail.begin(), trail.end());
    index_of[label] = static_cast<int>(out.classes.size());
    out.classes.push_back(std::move(c));
  }
  break_trails_ = false;
  for (auto it = trails_.begin(); it != trails_.end();) {  // a class absent from this frame loses its trail
    it = seen.count(it->first) ? std::next(it) : trails_.erase(it);
  }
  if (other_classes > 0) {
    other.name = "other (" + std::to_string(other_classes) + (other_classes == 1 ? " class)" : " classes)");
    out.classes.push_back(std::move(other));
  }
  const int other_index = other_classes > 0 ? static_cast<int>(out.classes.size()) - 1 : -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!finite_point(points, i)) continue;
    const auto it = index_of.find(labels[static_cast<size_t>(i)]);
    out.of_point[static_cast<size_t>(i)] = it != index_of.end() ? it->second : other_index;
  }
  out.labels = seen.size();
  for (const auto& [label, s] : seen) out.points += s.points;
  out.separation = silhouette_score(points, labels);
  return out;
}

}  // namespace tensorscope::plotting
