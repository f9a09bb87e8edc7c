// summary_batch.cc — see summary_batch.h.
#include "summary_batch.h"

#include <algorithm>
#include <utility>

#include "fused_summary_host.h"
#ifdef TENSORSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "fused_summary_pass.h"
#include "tensorscope/shared/cuda_util.h"
#endif

namespace tensorscope::fused {

#ifndef TENSORSCOPE_WITH_CUDA
// (a build without CUDA has no device pass: only its destructor is needed here)
class Pass {};
#endif

SummaryBatch::SummaryBatch() = default;

SummaryBatch::~SummaryBatch() {
  in_flight_.clear();  // (each pass waits for itself)
#ifdef TENSORSCOPE_WITH_CUDA
  for (SideStream& s : side_streams_) {
    DeviceScope scope(s.device);
    cudaStreamSynchronize(static_cast<cudaStream_t>(s.stream));
    cudaEventDestroy(static_cast<cudaEvent_t>(s.producer_done));
    cudaEventDestroy(static_cast<cudaEvent_t>(s.pass_done));
    cudaStreamDestroy(static_cast<cudaStream_t>(s.stream));
  }
#endif
}

uint64_t SummaryBatch::add(const Input& input, int device, uintptr_t stream, DeviceOrdering* ordering) {
  const uint64_t ticket = next_ticket_++;
  gathered_.push_back(Gathered{ticket, input, device, stream, ordering});
  return ticket;
}

void SummaryBatch::cancel(uint64_t ticket) {
  gathered_.erase(
      std::remove_if(gathered_.begin(), gathered_.end(), [ticket](const Gathered& g) { return g.ticket == ticket; }),
      gathered_.end());
}

void SummaryBatch::fail(const std::vector<const Gathered*>& group, const std::string& why) {
  for (const Gathered* g : group) {
    Outcome& o = outcomes_[g->ticket];
    o.state = State::kFailed;
    o.why = why;
  }
}

std::string SummaryBatch::flush() {
  std::vector<Gathered> gathered;
  gathered.swap(gathered_);
  std::string failed;
  std::vector<bool> done(gathered.size(), false);
  for (size_t first = 0; first < gathered.size(); ++first) {
    if (done[first]) continue;
    // The group of `first`'s device and stream, in the order they were added.
    std::vector<const Gathered*> group;
    std::vector<Input> inputs;
    for (size_t i = first; i < gathered.size(); ++i) {
      if (done[i] || gathered[i].device != gathered[first].device || gathered[i].stream != gathered[first].stream ||
          (gathered[i].ordering == nullptr) != (gathered[first].ordering == nullptr)) {
        continue;
      }
      done[i] = true;
      group.push_back(&gathered[i]);
      inputs.push_back(gathered[i].input);
    }
    std::string why;
    if (gathered[first].device == kHost) {
      Plan plan;
      if (plan_pass(inputs, &plan, &why)) {
        std::vector<double> values(plan.values);
        run_on_host(plan, values.data());
        ++passes_;
        for (size_t k = 0; k < group.size(); ++k) {
          const KernelTensor& t = plan.tensors[k];
          Outcome& o = outcomes_[group[k]->ticket];
          o.state = State::kReady;
          o.values.assign(values.begin() + t.value_offset, values.begin() + t.value_offset + value_count(t.ask));
        }
      }
    } else {
      why = queue_on_device(group);
    }
    if (!why.empty()) {
      fail(group, why);
      if (failed.empty()) failed = why;
    }
  }
  return failed;
}

#ifdef TENSORSCOPE_WITH_CUDA
std::string SummaryBatch::side_stream(int device, SideStream** out) {
  for (SideStream& s : side_streams_) {
    if (s.device == device) {
      *out = &s;
      return {};
    }
  }
  DeviceScope scope(device);
  SideStream s;
  s.device = device;
  cudaStream_t stream = nullptr;
  cudaEvent_t producer_done = nullptr, pass_done = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&producer_done, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&pass_done, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    if (pass_done != nullptr) cudaEventDestroy(pass_done);
    if (producer_done != nullptr) cudaEventDestroy(producer_done);
    if (stream != nullptr) cudaStreamDestroy(stream);
    return cuda_error_text("the fused summary pass's stream", err);
  }
  s.stream = stream;
  s.producer_done = producer_done;
  s.pass_done = pass_done;
  side_streams_.push_back(s);
  *out = &side_streams_.back();
  return {};
}

std::string SummaryBatch::queue_on_device(const std::vector<const Gathered*>& group) {
  const int device = group.front()->device;
  uintptr_t stream = group.front()->stream;
  DeviceOrdering* ordering = group.front()->ordering;
  SideStream* side = nullptr;
  if (ordering != nullptr) {  // on our stream, after the producer's work
    if (std::string why = side_stream(device, &side); !why.empty()) return why;
    if (std::string why = ordering->record_on_producer(side->producer_done); !why.empty()) return why;
    DeviceScope scope(device);
    const cudaError_t err =
        cudaStreamWaitEvent(static_cast<cudaStream_t>(side->stream), static_cast<cudaEvent_t>(side->producer_done), 0);
    if (err != cudaSuccess) return cuda_error_text("cudaStreamWaitEvent before the fused summary pass", err);
    stream = reinterpret_cast<uintptr_t>(side->stream);
  }
  std::vector<Input> inputs;
  inputs.reserve(group.size());
  for (const Gathered* g : group) inputs.push_back(g->input);
  int slot = -1;
  for (size_t i = 0; i < in_flight_.size() && slot < 0; ++i) {
    if (in_flight_[i].device == device && in_flight_[i].untaken == 0) slot = static_cast<int>(i);
  }
  if (slot < 0) {
    if (in_flight_.size() >= kMaxPasses) return "too many fused summary passes whose values are not taken";
    in_flight_.push_back(InFlight{device, std::make_unique<Pass>(device), 0});
    slot = static_cast<int>(in_flight_.size()) - 1;
  }
  InFlight& f = in_flight_[static_cast<size_t>(slot)];
  f.pass->release();  // (every value of its last pass was taken)
  if (std::string why = f.pass->queue(inputs, stream); !why.empty()) return why;
  ++passes_;
  if (side != nullptr) {  // the producer's later work (reusing freed memory) waits for the pass
    DeviceScope scope(device);
    const auto pass_stream = static_cast<cudaStream_t>(side->stream);
    const cudaError_t err = cudaEventRecord(static_cast<cudaEvent_t>(side->pass_done), pass_stream);
    if (err != cudaSuccess || !ordering->producer_waits_for(side->pass_done).empty()) {
      cudaStreamSynchronize(pass_stream);  // (cannot order the producer after it: the pass is done before we go on)
    }
  }
  f.untaken = group.size();
  for (size_t k = 0; k < group.size(); ++k) {
    Outcome& o = outcomes_[group[k]->ticket];
    o.state = State::kWaiting;
    o.pass = slot;
    o.position = k;
  }
  return {};
}
#else
std::string SummaryBatch::queue_on_device(const std::vector<const Gathered*>&) {
  return "this build of tensorscope has no CUDA runtime: no fused summary pass on a device";
}
#endif

SummaryBatch::State SummaryBatch::take(uint64_t ticket, std::vector<double>* values, std::string* why) {
  auto it = outcomes_.find(ticket);
  if (it == outcomes_.end()) return State::kUnknown;
  Outcome& o = it->second;
#ifdef TENSORSCOPE_WITH_CUDA
  if (o.state == State::kWaiting) {
    InFlight& f = in_flight_[static_cast<size_t>(o.pass)];
    if (!f.pass->ready()) {
      if (f.pass->busy() || f.pass->error().empty()) return State::kWaiting;
      o.state = State::kFailed;  // the pass failed on the device
      o.why = f.pass->error();
    } else {
      const KernelTensor& t = f.pass->plan().tensors[o.position];
      const double* v = f.pass->values() + t.value_offset;
      o.values.assign(v, v + value_count(t.ask));
      o.state = State::kReady;
    }
    if (f.untaken > 0) --f.untaken;
  }
#endif
  const State state = o.state;
  if (state == State::kWaiting) return state;
  if (state == State::kReady) {
    *values = std::move(o.values);
  } else {
    *why = std::move(o.why);
  }
  outcomes_.erase(it);
  return state;
}

}  // namespace tensorscope::fused
