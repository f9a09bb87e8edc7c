// track_summaries.h — a module track's per-step summaries (TrackOptions::stats_every):
// each tracked tensor summarised where it lives, kept until its step's record is sent.
//
// On the CPU the client core reads the tensor once (client/core/tensor_summary.h), in
// the op callback. On a GPU the reductions are queued on the tensor's current stream,
// copied to pinned host memory without waiting, and a c10::Event recorded after the copy:
// nothing here synchronises with the device. take_ready() hands over the summaries whose
// values are known (a GPU one whose event has not completed waits for a later call).
// Parameters get their update ratio |w_t - w_prev| / |w_prev| against a copy kept from
// their previous summarised step.
// Used by ModuleTrack. Thread safety: every method under the caller's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>

#include "tensor_summary.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope {

// The values client/core/tensor_summary.h's summary_from_device_values takes, of a
// non-empty `tensor` (and its update ratio against `before` when that is defined, its
// numerics against `cast` unless kNone), as a float64 tensor on the tensor's device,
// queued on its current stream without waiting, and their `layout`: 9 kernels on a GPU
// for a float32 tensor (the float64 copy that the reductions read included), 10 for
// float64 (divided by its max |x| first), 4 more with the update ratio, 7 more with a
// cast format.
at::Tensor device_summary_values(const at::Tensor& tensor, const at::Tensor& before, CastFormat cast,
                                 DeviceSummaryLayout* layout);

class TrackSummaries {
 public:
  static constexpr size_t kMaxPending = 65536;

  // Summaries with numerics against `cast` (kNone: without).
  explicit TrackSummaries(CastFormat cast = CastFormat::kNone) : cast_(cast) {}

  // Summarises `tensor` (stream `name`) for `step`; with `ratio`, against the copy kept
  // from the previous call for `name`. `non_finite`: whether a CPU tensor's summary shows
  // a NaN or Inf (a GPU one is known at take_ready). False (and `why`) when it cannot (an
  // unsupported tensor, too many pending).
  bool add(int64_t step, const std::string& name, wire::TensorKind kind, const at::Tensor& tensor, bool ratio,
           bool* non_finite, std::string* why);

  // {step: summaries in the order added} of those whose values are known; with `wait`,
  // GPU ones are waited for.
  std::map<int64_t, std::vector<TensorSummary>> take_ready(bool wait);

  // The earliest step of `ready` with a NaN or Inf, if any.
  static std::optional<int64_t> first_non_finite(const std::map<int64_t, std::vector<TensorSummary>>& ready);

 private:
  struct Pending {
    int64_t step = 0;
    TensorSummary summary;       // name and kind; the values too when on the CPU
    at::Tensor host;             // a GPU summary's pinned values (see track_summaries.cc), else undefined
    uint64_t numel = 0;          // a GPU summary's tensor's
    DeviceSummaryLayout layout;  // a GPU summary's values (summary_from_device_values)
    std::shared_ptr<c10::Event> event;
  };

  const CastFormat cast_;
  std::vector<Pending> pending_;
  // A parameter's value at its last summarized step: a CUDA tensor's on its device, a CPU
  // tensor's in the core's copy (summarize_cpu stores the new one while it computes the ratio).
  struct Previous {
    at::Tensor device;
    PreviousValues host;
  };
  std::unordered_map<std::string, Previous> previous_;  // by parameter stream
};

}  // namespace tensorscope
