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
//
// Where this build has the fused pass's kernel, a CUDA tensor's summary is instead
// gathered (client/core/summary_batch.h) and queued with the others at the track's flush
// points (flush(): a backward's end, a step change, the track's end, every 1,000
// tensors): one pass per device and stream, on the batch's own stream ordered after the
// tensors' (a c10 stream is no cudaStream_t to us). A tensor written in place before its
// flush (its version counter moved) is left out, and its stream summarized at once from
// then on. TENSORSCOPE_SUMMARY_PASS=host gathers CPU tensors too (run on the host by the
// kernel's arithmetic: the same logic without a GPU); =off gathers nothing.
// Used by ModuleTrack. Thread safety: every method under the caller's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>

#include "summary_batch.h"
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

  // Summaries with numerics against `cast` (kNone: without); what is gathered, from
  // TENSORSCOPE_SUMMARY_PASS.
  explicit TrackSummaries(CastFormat cast = CastFormat::kNone);
  ~TrackSummaries();

  // Summarises `tensor` (stream `name`) for `step`; with `ratio`, against the copy kept
  // from the previous call for `name`. `non_finite`: whether a CPU tensor's summary shows
  // a NaN or Inf (a GPU one is known at take_ready). `gathered`: whether it was gathered
  // (its values come after a flush). False (and `why`) when it cannot (an unsupported
  // tensor, too many pending).
  bool add(int64_t step, const std::string& name, wire::TensorKind kind, const at::Tensor& tensor, bool ratio,
           bool* non_finite, std::string* why, bool* gathered = nullptr);

  // Tensors gathered and not flushed yet (a flush is due at fused::SummaryBatch::kMaxGathered).
  size_t gathered() const { return unflushed_.size(); }
  // Queues the gathered summaries. Returns the streams whose tensor was written in place
  // since it was gathered: left out, and summarized at once from now on (the caller
  // refuses them: TrackRefusal::kWrittenBeforeSummary).
  std::vector<std::string> flush();
  // [(stream, why)] of gathered summaries whose pass failed since the last call (from
  // then on every summary is taken at once): the caller refuses them.
  std::vector<std::pair<std::string, std::string>> take_failed();

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
    uint64_t numel = 0;          // a GPU or gathered summary's tensor's
    DeviceSummaryLayout layout;  // a GPU or gathered summary's values (summary_from_device_values)
    std::shared_ptr<c10::Event> event;
    uint64_t ticket = 0;  // a gathered summary's (batch_)
  };
  // A gathered tensor until its flush: held (with its previous value and the staging that
  // orders the pass after its stream), and its version when gathered.
  struct Unflushed {
    uint64_t ticket = 0;
    at::Tensor tensor;
    int64_t version = 0;
    std::shared_ptr<void> staged;  // the StagedTensors of the tensor and its previous value
    std::string name;
  };

  bool gathers(const at::Tensor& tensor, const std::string& name) const;
  struct Previous;
  bool gather(Pending* p, const at::Tensor& tensor, Previous* previous, std::string* why);
  // A parameter's previous value on its device, where it is of the tensor's shape, dtype
  // and device (undefined otherwise: no ratio this time).
  static at::Tensor previous_of(const at::Tensor& tensor, const Previous* previous);

  const CastFormat cast_;
  bool gather_cuda_ = false, gather_cpu_ = false;
  bool gather_failed_ = false;  // a pass failed: every summary taken at once from then on
  std::vector<Pending> pending_;
  fused::SummaryBatch batch_;
  std::vector<Unflushed> unflushed_;
  std::vector<uint64_t> cancelled_;  // tickets left out at their flush
  std::vector<std::pair<std::string, std::string>> failed_;
  std::unordered_set<std::string> at_once_;  // streams written in place before a flush
  // A parameter's value at its last summarized step: a CUDA tensor's on its device, a CPU
  // tensor's in the core's copy (summarize_cpu stores the new one while it computes the ratio).
  struct Previous {
    at::Tensor device;
    PreviousValues host;
  };
  std::unordered_map<std::string, Previous> previous_;  // by parameter stream
};

}  // namespace tensorscope
