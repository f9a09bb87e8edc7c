// reference_diff.cc — see reference_diff.h.
#include "tensorscope/recording/reference_diff.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tensorscope::recording {
namespace {

double dtype_rtol(wire::DType dtype) {
  switch (dtype) {
    case wire::DType::kFloat64: return 1e-9;
    case wire::DType::kFloat32: return 1e-5;
    case wire::DType::kFloat16: return 1e-2;
    case wire::DType::kBFloat16: return 5e-2;
    case wire::DType::kInvalid: return 1e-5;
    case wire::DType::kInt8:
    case wire::DType::kInt16:
    case wire::DType::kInt32:
    case wire::DType::kInt64:
    case wire::DType::kUInt8:
    case wire::DType::kBool: return 0;
  }
  return 1e-5;
}

double rms(const TensorSummary& s) { return s.numel > 0 ? s.l2 / std::sqrt(static_cast<double>(s.numel)) : 0; }

}  // namespace

DiffTolerance default_tolerance(wire::DType run, wire::DType reference) {
  return DiffTolerance{std::max(dtype_rtol(run), dtype_rtol(reference)), 0};
}

SummaryDiff diff_summaries(const TensorSummary& run, const TensorSummary& reference, const DiffTolerance& tolerance) {
  SummaryDiff out;
  if (run.numel != reference.numel) {
    out.comparable = false;
    out.worst = std::numeric_limits<double>::infinity();
    out.metric = "numel";
    out.value = static_cast<double>(run.numel);
    out.reference = static_cast<double>(reference.numel);
    return out;
  }
  const double inf = std::numeric_limits<double>::infinity();
  auto consider = [&](const char* metric, double b, double a, double scale, bool relative) {
    const double difference = std::fabs(b - a);
    const double allowed = tolerance.atol + tolerance.rtol * scale;
    const bool unknown = std::isnan(difference);  // a NaN value: within nothing
    double ratio = 0;
    if (unknown) {
      ratio = inf;
    } else if (difference > 0) {
      ratio = allowed > 0 ? difference / allowed : inf;
    }
    if (relative && ratio > 0) out.relative = std::max(out.relative, !unknown && scale > 0 ? difference / scale : inf);
    if (ratio > out.worst || out.metric.empty()) {
      out.worst = ratio;
      out.metric = metric;
      out.value = b;
      out.reference = a;
    }
  };
  const double norm_scale = std::max(run.l2, reference.l2);
  const double rms_scale = std::max(rms(run), rms(reference));
  consider("l2", run.l2, reference.l2, norm_scale, true);
  consider("max_abs", run.max_abs, reference.max_abs, std::max(run.max_abs, reference.max_abs), true);
  consider("mean", run.mean, reference.mean, rms_scale, true);
  consider("std", run.std, reference.std, rms_scale, true);
  // Counts: exactly (a NaN where the reference had none is the divergence itself).
  auto count = [&](const char* metric, uint64_t b, uint64_t a) {
    if (b == a) return;
    out.relative = inf;
    if (out.worst < inf) {
      out.worst = inf;
      out.metric = metric;
      out.value = static_cast<double>(b);
      out.reference = static_cast<double>(a);
    }
  };
  count("nan_count", run.nan_count, reference.nan_count);
  count("inf_count", run.inf_count, reference.inf_count);
  consider("zero_fraction", run.zero_fraction(), reference.zero_fraction(), 1.0, false);
  return out;
}

}  // namespace tensorscope::recording
