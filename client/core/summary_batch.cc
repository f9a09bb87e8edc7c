// summary_batch.cc — see summary_batch.h.
#include "summary_batch.h"

#include <algorithm>
#include <utility>

#include "fused_summary_host.h"
#ifdef TENSORSCOPE_WITH_CUDA
#include "fused_summary_pass.h"
#endif

namespace tensorscope::fused {

#ifndef TENSORSCOPE_WITH_CUDA
// (a build without CUDA has no device pass: only its destructor is needed here)
class Pass {};
#endif

SummaryBatch::SummaryBatch() = default;
SummaryBatch::~SummaryBatch() = default;

uint64_t SummaryBatch::add(const Input& input, int device, uintptr_t stream) {
  const uint64_t ticket = next_ticket_++;
  gathered_.push_back(Gathered{ticket, input, device, stream});
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
      if (done[i] || gathered[i].device != gathered[first].device || gathered[i].stream != gathered[first].stream) {
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
      why = queue_on_device(gathered[first].device, gathered[first].stream, group);
    }
    if (!why.empty()) {
      fail(group, why);
      if (failed.empty()) failed = why;
    }
  }
  return failed;
}

#ifdef TENSORSCOPE_WITH_CUDA
std::string SummaryBatch::queue_on_device(int device, uintptr_t stream, const std::vector<const Gathered*>& group) {
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
std::string SummaryBatch::queue_on_device(int, uintptr_t, const std::vector<const Gathered*>&) {
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
