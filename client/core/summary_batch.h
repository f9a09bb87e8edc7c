// summary_batch.h — the summaries of a step's tensors gathered into fused passes: a track
// adds each tensor it would have summarized at once and gets a ticket; flush() queues one
// pass (fused_summary_pass.h: four operations on the stream, whatever the count) per
// device and stream of what was gathered; take() gives a ticket's values, in
// tensor_summary.h's device layout, once its pass has completed — never waiting. Tensors
// in host memory (device -1) are summarized at flush, on the host, by the kernel's own
// arithmetic and partition (fused_summary_host.h).
//
// The caller keeps a tensor's memory valid, and unwritten, until flush(): the pass reads
// it then (a device pass on its stream, after what was queued there before the flush). A
// tensor written in place since it was added is cancel()ed instead.
//
// A framework whose streams are not cudaStream_t handles to us (libtorch's c10 streams)
// adds its tensors with their DeviceOrdering (tensor_ref.h) and a key that names the
// stream: their pass runs on the batch's own stream for the device, after the producer's
// work (an event the producer's stream records), and the producer's stream then waits
// for the pass (so memory freed after the flush is not reused before it is read).
//
// Used by both clients' tracks (python/native/summary_batch_type.h, client/src/
// track_summaries.h). Thread safety: one owner (the caller serializes; flush() on the
// thread whose streams it queues on).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fused_summary_plan.h"
#include "tensor_ref.h"

namespace tensorscope::fused {

class Pass;

class SummaryBatch {
 public:
  static constexpr int kHost = -1;              // the device of host memory
  static constexpr size_t kMaxGathered = 1000;  // a caller flushes at this many
  static constexpr size_t kMaxPasses = 64;      // device passes whose values are not all taken

  SummaryBatch();
  ~SummaryBatch();  // waits for the passes in flight
  SummaryBatch(const SummaryBatch&) = delete;
  SummaryBatch& operator=(const SummaryBatch&) = delete;

  // Gathers `input` (memory on `device`, kHost or a CUDA device, ready on `stream`, a
  // cudaStream_t as an integer); returns its ticket. With `ordering`, `stream` is only a
  // key that names the producer's stream, ordered through `ordering` (valid until flush).
  uint64_t add(const Input& input, int device, uintptr_t stream, DeviceOrdering* ordering = nullptr);
  // Leaves a gathered ticket out of the next flush (its take() is then kUnknown).
  void cancel(uint64_t ticket);
  size_t gathered() const { return gathered_.size(); }

  // Queues everything gathered: one pass per device and stream. Empty, or why a pass
  // could not be queued (its tickets fail with that reason).
  std::string flush();

  enum class State { kWaiting, kReady, kFailed, kUnknown };
  // kReady: `values` are the ticket's (and the ticket is forgotten); kFailed: `why` says
  // why (forgotten too); kWaiting: on the way; kUnknown: no such ticket.
  State take(uint64_t ticket, std::vector<double>* values, std::string* why);

  uint64_t passes() const { return passes_; }  // queued so far (host and device)

 private:
  struct Gathered {
    uint64_t ticket;
    Input input;
    int device;
    uintptr_t stream;
    DeviceOrdering* ordering;
  };
  struct Outcome {  // a ticket's, after its flush
    State state = State::kWaiting;
    std::vector<double> values;  // kReady
    std::string why;             // kFailed
    int pass = -1;               // kWaiting: its device pass (passes_in_flight_), and position
    size_t position = 0;
  };
  struct InFlight {
    int device = 0;
    std::unique_ptr<Pass> pass;
    size_t untaken = 0;  // tickets whose values are not taken yet
  };

  void fail(const std::vector<const Gathered*>& group, const std::string& why);
  std::string queue_on_device(const std::vector<const Gathered*>& group);
  // The batch's own stream and events for `device` (ordered passes); empty or why.
  struct SideStream {
    int device = 0;
    void* stream = nullptr;         // cudaStream_t
    void* producer_done = nullptr;  // cudaEvent_t: recorded on the producer's stream
    void* pass_done = nullptr;      // cudaEvent_t: recorded after the pass
  };
  std::string side_stream(int device, SideStream** out);

  uint64_t next_ticket_ = 1;
  std::vector<Gathered> gathered_;
  std::map<uint64_t, Outcome> outcomes_;
  std::vector<InFlight> in_flight_;  // reused once every value of a pass is taken
  std::vector<SideStream> side_streams_;
  uint64_t passes_ = 0;
};

}  // namespace tensorscope::fused
