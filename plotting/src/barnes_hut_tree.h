// barnes_hut_tree.h — internal: a quadtree over 2-D points for t-SNE's repulsive forces.
//
// Used by TsneEmbedder (tsne.cc) in the daemon's worker processes, rebuilt every
// gradient step. Built serially; leaves hold up to kLeafSize points (or any number of
// coincident points, at the depth limit), stored contiguously in tree order so a
// traversal reads memory in order. repulsion() sums, for one point, q = 1/(1+d²) and
// q²·(y_i - y_j) over all other points, replacing a cell by its centre of mass when
// its side is below theta × its distance (van der Maaten 2014).
// Thread safety: build() is not thread-safe; repulsion() is const and may run
// concurrently from many threads once built.
#pragma once

#include <cstdint>
#include <vector>

namespace tensorscope::plotting::internal {

class BarnesHutTree {
 public:
  // y: n points as x0, y0, x1, y1, ... (all finite).
  void build(const double* y, int64_t n);

  // For the point i at (x, y): adds Σ_j q_ij to *sum_q and Σ_j q_ij²·(p_i - p_j) to
  // (*fx, *fy), j over all points but i.
  void repulsion(int64_t i, double x, double y, double theta_sq, double* sum_q, double* fx, double* fy) const;

  // Point indices in tree order (spatially coherent: a good order to visit points in).
  const std::vector<int32_t>& order() const { return order_; }

 private:
  struct Node {
    double com_x = 0, com_y = 0;  // centre of mass
    double side_sq = 0;           // (cell side)²
    int32_t count = 0;
    int32_t first_child = -1;    // 4 consecutive nodes; -1 = leaf
    int32_t begin = 0, end = 0;  // range in order_/px_/py_
  };
  static constexpr int kLeafSize = 8;
  static constexpr int kMaxDepth = 40;

  void build_node(int32_t node, double cx, double cy, double half, int depth);

  std::vector<Node> nodes_;
  std::vector<int32_t> order_;
  std::vector<double> px_, py_;  // coordinates in tree order
  const double* y_ = nullptr;
};

}  // namespace tensorscope::plotting::internal
