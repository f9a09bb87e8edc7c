// test_util.h — helpers shared by the plotting unit tests: a unique temp directory,
// and a straightforward reference for what the fast code must compute.
// Thread safety: each test makes its own TempDir.
#pragma once

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tensorscope/plotting/histogram.h"
#include "tensorscope/tensor/tensor_view.h"

namespace tensorscope::plotting::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tensorscope-plotting-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Element-by-element histogram, written the obvious way (linear or symlog axis).
inline Histogram reference_histogram(const tensor::TensorView& view, const HistogramRange& range) {
  Histogram h;
  h.range = range;
  h.counts.assign(static_cast<size_t>(range.bins), 0);
  for (int64_t i = 0; i < view.numel(); ++i) {
    const double x = tensor::element_as_double(view.data, view.type, i);
    if (std::isnan(x)) {
      ++h.nan;
    } else if (x == INFINITY) {
      ++h.pos_inf;
    } else if (x == -INFINITY) {
      ++h.neg_inf;
    } else if (x < range.lo) {
      ++h.underflow;
    } else if (x > range.hi) {
      ++h.overflow;
    } else {
      // The binner's arithmetic: (t(x) - t(lo)) * (bins / (t(hi) - t(lo))), t the axis.
      const bool sym = range.axis == HistogramAxis::kSymlog;
      auto t = [&](double v) { return sym ? symlog(v, range.linthresh) : v; };
      const double scale = range.bins / (t(range.hi) - t(range.lo));
      int64_t bin = static_cast<int64_t>(std::floor((t(x) - t(range.lo)) * scale));
      if (bin >= range.bins) bin = range.bins - 1;
      ++h.counts[static_cast<size_t>(bin)];
    }
  }
  return h;
}

}  // namespace tensorscope::plotting::testing
