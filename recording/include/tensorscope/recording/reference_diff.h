// reference_diff.h — how far a tensor's summary at a step is from the reference run's
// summary of the same tensor, step and rank, and whether that leaves tolerance: the
// measure behind the first divergence from a reference run.
//
// Compared: the L2 norm, max |x|, mean and std (over the finite elements), each as
// |b - a| <= atol + rtol * scale, the scale the larger of the two runs' L2 (for l2),
// max |x| (for max_abs) or RMS = l2 / sqrt(numel) (for the mean and the std, which may
// be near 0 where the tensor is not); the NaN and Inf counts exactly; the fraction of
// zeros within rtol (a fraction). Element counts that differ make the pair incomparable
// (another shape: a diverged configuration, reported as such). The tolerance comes from
// both runs' element types (default_tolerance: the looser of the two), or from the
// user's setting for the stream.
//
// Used by the daemon's divergence watch and the overview's "difference from reference".
// Thread safety: pure functions.
#pragma once

#include <string>

#include "tensorscope/shared/summary_format.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::recording {

struct DiffTolerance {
  double rtol = 0;
  double atol = 0;
  bool operator==(const DiffTolerance&) const = default;
};

// For runs whose tensor has element type `run` here and `reference` there: integers and
// bool exactly; float64 1e-9; float32 1e-5 (the noise of another reduction order); float16
// 1e-2; bfloat16 5e-2 (a few of its rounding steps); a pair takes the looser; kInvalid
// (not known) as float32. atol is 0 throughout (the scales above keep a value near 0
// from counting as a large relative change).
DiffTolerance default_tolerance(wire::DType run, wire::DType reference);

struct SummaryDiff {
  bool comparable = true;  // false: the element counts differ
  // The largest |b - a| / (atol + rtol * scale) of the compared metrics: above 1 leaves
  // tolerance (+Inf for a NaN/Inf count that differs, or a difference where the
  // tolerance is 0).
  double worst = 0;
  std::string metric;    // the worst one's name: l2, max_abs, mean, std, nan_count, inf_count, zero_fraction
  double value = 0;      // its value in the run
  double reference = 0;  // and in the reference
  // The largest |b - a| / scale of l2, max_abs, mean and std (0 when equal; +Inf where a
  // NaN/Inf count differs): the overview's "difference from reference".
  double relative = 0;
  bool leaves() const { return !comparable || worst > 1; }
};

SummaryDiff diff_summaries(const TensorSummary& run, const TensorSummary& reference, const DiffTolerance& tolerance);

}  // namespace tensorscope::recording
