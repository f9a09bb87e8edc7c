// device_payload_reader.h — a worker's reader of CUDA IPC payloads: records flagged
// kRecordDevicePayload keep their bytes in the producer's staging pool on its GPU.
//
// Used by a worker process (reader thread). Each pool of each producer is opened once
// (cudaIpcOpenMemHandle, cudaIpcOpenEventHandle on the device whose UUID the producer
// published, whatever CUDA_VISIBLE_DEVICES says), then for every record: check the
// location against the pool, poll the block's event (never blocking longer than the
// caller allows: a worker must keep reading its other producers and keep its heartbeat),
// copy the block to pinned host memory, check that the producer did not revoke the pool
// meanwhile, and hand out that copy. The caller releases the record (and with it the
// pool block) through RingReader. A pool that cannot be opened is marked refused in
// the segment, so the producer sends that device's tensors through the ring instead. A daemon built without CUDA, or a machine without a
// device, refuses every device payload with a clear reason (the client is told at
// registration and does not send them).
// Thread safety: one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/shared_segment.h"
#include "tensorscope/base/status.h"

namespace tensorscope::daemon {

// Whether this daemon can read device payloads at all; `why` says why not. Cheap after
// the first call (no CUDA context is created).
bool device_payloads_supported(std::string* why);

class DevicePayloadReader {
 public:
  DevicePayloadReader();
  ~DevicePayloadReader();
  DevicePayloadReader(const DevicePayloadReader&) = delete;
  DevicePayloadReader& operator=(const DevicePayloadReader&) = delete;

  enum class Result {
    kCopied,   // view->payload points at the host copy (valid until the next fetch)
    kPending,  // the producer's copy is not complete yet: try the record again later
    kFailed,   // *why says why the record must be dropped
  };

  // Copies the device payload of `view` (from `segment` of `producer_id`) to host
  // memory, waiting at most `wait` for the producer's copy to complete.
  Result fetch(uint64_t producer_id, const SharedSegment& segment, RecordView* view, std::chrono::milliseconds wait,
               std::string* why);

  // Closes every handle opened for the producer (it detached).
  void forget_producer(uint64_t producer_id);

  uint64_t fetched() const { return fetched_; }
  uint64_t fetched_bytes() const { return fetched_bytes_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint64_t fetched_ = 0;
  uint64_t fetched_bytes_ = 0;
};

}  // namespace tensorscope::daemon
