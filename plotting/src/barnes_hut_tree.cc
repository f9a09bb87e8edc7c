// barnes_hut_tree.cc — quadtree build and Barnes-Hut repulsion traversal.
#include "barnes_hut_tree.h"

#include <algorithm>
#include <cmath>

namespace tensorscope::plotting::internal {

void BarnesHutTree::build(const double* y, int64_t n) {
  y_ = y;
  nodes_.clear();
  order_.resize(static_cast<size_t>(n));
  px_.resize(static_cast<size_t>(n));
  py_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (n == 0) return;
  double min_x = y[0], max_x = y[0], min_y = y[1], max_y = y[1];
  for (int64_t i = 1; i < n; ++i) {
    min_x = std::min(min_x, y[2 * i]);
    max_x = std::max(max_x, y[2 * i]);
    min_y = std::min(min_y, y[2 * i + 1]);
    max_y = std::max(max_y, y[2 * i + 1]);
  }
  const double half = std::max(max_x - min_x, max_y - min_y) * 0.5 * (1 + 1e-9) + 1e-300;
  nodes_.reserve(static_cast<size_t>(n / 2 + 16));
  Node root;
  root.begin = 0;
  root.end = static_cast<int32_t>(n);
  nodes_.push_back(root);
  build_node(0, (min_x + max_x) * 0.5, (min_y + max_y) * 0.5, half, 0);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t i = order_[static_cast<size_t>(t)];
    px_[static_cast<size_t>(t)] = y[2 * i];
    py_[static_cast<size_t>(t)] = y[2 * i + 1];
  }
}

void BarnesHutTree::build_node(int32_t node, double cx, double cy, double half, int depth) {
  const int32_t begin = nodes_[static_cast<size_t>(node)].begin;
  const int32_t end = nodes_[static_cast<size_t>(node)].end;
  double sx = 0, sy = 0;
  for (int32_t t = begin; t < end; ++t) {
    const int32_t i = order_[static_cast<size_t>(t)];
    sx += y_[2 * i];
    sy += y_[2 * i + 1];
  }
  {
    Node& nd = nodes_[static_cast<size_t>(node)];
    nd.count = end - begin;
    nd.com_x = nd.count > 0 ? sx / nd.count : cx;
    nd.com_y = nd.count > 0 ? sy / nd.count : cy;
    nd.side_sq = 4 * half * half;
  }
  if (end - begin <= kLeafSize || depth >= kMaxDepth) return;
  // Partition into quadrants: (x < cx, y < cy), (x >= cx, y < cy), (x < cx, y >= cy), rest.
  int32_t* first = order_.data() + begin;
  int32_t* last = order_.data() + end;
  const double* y = y_;
  int32_t* mid_y = std::partition(first, last, [&](int32_t i) { return y[2 * i + 1] < cy; });
  int32_t* mid_x0 = std::partition(first, mid_y, [&](int32_t i) { return y[2 * i] < cx; });
  int32_t* mid_x1 = std::partition(mid_y, last, [&](int32_t i) { return y[2 * i] < cx; });
  const int32_t bounds[5] = {begin, static_cast<int32_t>(mid_x0 - order_.data()),
                             static_cast<int32_t>(mid_y - order_.data()), static_cast<int32_t>(mid_x1 - order_.data()),
                             end};
  const int32_t child0 = static_cast<int32_t>(nodes_.size());
  nodes_[static_cast<size_t>(node)].first_child = child0;
  for (int q = 0; q < 4; ++q) {
    Node c;
    c.begin = bounds[q];
    c.end = bounds[q + 1];
    nodes_.push_back(c);
  }
  const double h = half * 0.5;
  const double ox[4] = {-h, h, -h, h};
  const double oy[4] = {-h, -h, h, h};
  for (int q = 0; q < 4; ++q) {
    if (bounds[q + 1] > bounds[q]) build_node(child0 + q, cx + ox[q], cy + oy[q], h, depth + 1);
  }
}

void BarnesHutTree::repulsion(int64_t i, double x, double y, double theta_sq, double* sum_q, double* fx,
                              double* fy) const {
  if (nodes_.empty()) return;
  int32_t stack[4 * kMaxDepth + 8];
  int top = 0;
  stack[top++] = 0;
  double sq = 0, ax = 0, ay = 0;
  while (top > 0) {
    const Node& nd = nodes_[static_cast<size_t>(stack[--top])];
    if (nd.count == 0) continue;
    const double dx = x - nd.com_x;
    const double dy = y - nd.com_y;
    const double d2 = dx * dx + dy * dy;
    if (nd.side_sq < theta_sq * d2) {  // far enough: the cell acts as one point
      const double q = 1.0 / (1.0 + d2);
      const double m = nd.count * q;
      sq += m;
      ax += m * q * dx;
      ay += m * q * dy;
    } else if (nd.first_child < 0) {
      for (int32_t t = nd.begin; t < nd.end; ++t) {
        if (order_[static_cast<size_t>(t)] == i) continue;
        const double ex = x - px_[static_cast<size_t>(t)];
        const double ey = y - py_[static_cast<size_t>(t)];
        const double q = 1.0 / (1.0 + ex * ex + ey * ey);
        sq += q;
        ax += q * q * ex;
        ay += q * q * ey;
      }
    } else {
      for (int c = 3; c >= 0; --c) stack[top++] = nd.first_child + c;
    }
  }
  *sum_q += sq;
  *fx += ax;
  *fy += ay;
}

}  // namespace tensorscope::plotting::internal
