// cuda_staging.h — how a CUDA tensor reaches the daemon without a host synchronization
// on the training thread.
//
// Used by ClientCore (built only with TENSORSCOPE_WITH_CUDA). Per device, allocated once
// at the first push of a tensor on it, never grown:
//   - CUDA IPC (the daemon's workers can read it, the cuda_ipc option): a staging
//     pool of cuda_staging_bytes (one cudaMalloc, exported once) and kMaxPoolEvents
//     interprocess events, published in each new segment's pool table. A push orders a
//     side stream after the tensor's current stream (an event), copies the tensor there
//     device-to-device into a pool block, records the block's interprocess event and
//     publishes a kRecordDevicePayload record at once; the daemon waits on the event,
//     copies the block out and releases it (wire_format.h, "Device payloads").
//   - pinned host (IPC impossible: a daemon without CUDA, IPC setup refused, option
//     off): the side stream copies into pinned host staging; a completion thread waits
//     for the copy, moves the bytes into the ring reservation made at push time, and
//     commits the record.
// Either way the tensor's stream then waits (on the GPU, not the host) for the copy, so
// later kernels that overwrite or free the tensor cannot race it. A full pool, or an
// event still held by the daemon, is a counted drop, never a wait. A new registration
// (the daemon restarted) starts a new pool generation: blocks the old daemon held are
// free again.
// Thread safety: push() from any thread (one lock per device); stats() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "connection.h"
#include "tensor_ref.h"
#include "tensorscope/push_result.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

class CudaStaging {
 public:
  CudaStaging(uint64_t staging_bytes, bool allow_ipc);
  ~CudaStaging();  // waits for the copies in flight, then frees every pool
  CudaStaging(const CudaStaging&) = delete;
  CudaStaging& operator=(const CudaStaging&) = delete;

  struct Outcome {
    PushResult result = PushResult::kPushed;
    std::string why;        // for kRefused
    bool fallback = false;  // neither path is available: copy synchronously instead
  };

  // Stages CUDA `tensor` (`bytes` of payload, every other header field in `fields`, its
  // encoded row labels section when `row_labels` is given) for the connection `active`,
  // held by the caller through a guard of `connection`.
  Outcome push(Connection& connection, Connection::Active& active, const wire::RecordHeader& fields,
               const TensorRef& tensor, uint64_t bytes, const std::string* row_labels);

  // A synchronous copy of CUDA `tensor` (ordered by its cuda_stream) to host memory,
  // when staging is not possible. Empty on success, else why.
  static std::string copy_to_host_now(const TensorRef& tensor, void* dst, uint64_t bytes) noexcept;

  // Waits (at most `timeout`) until the daemon has released every block of the pools
  // published in the current registration: the pools may then be freed.
  void wait_released(Connection& connection, std::chrono::milliseconds timeout);

  // cuda_transport, cuda_note, cuda_ipc_pushed, cuda_host_pushed, cuda_failed.
  void fill_stats(ClientStats* stats) const;

 private:
  struct Device;
  struct Pending;

  Device* device(int index);
  Outcome push_ipc(Device& dev, Connection::Active& active, const wire::RecordHeader& fields, const TensorRef& tensor,
                   uint64_t bytes, const std::string* row_labels);
  Outcome push_host(Device& dev, Connection& connection, Connection::Active& active, const wire::RecordHeader& fields,
                    const TensorRef& tensor, uint64_t bytes, const std::string* row_labels);
  void complete_loop();
  void note(const std::string& transport, const std::string& why);

  const uint64_t staging_bytes_;
  const bool allow_ipc_;
  std::mutex devices_mutex_;
  std::map<int, std::unique_ptr<Device>> devices_;
  uint32_t next_table_index_ = 0;

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<std::unique_ptr<Pending>> queue_;
  bool stop_ = false;
  std::thread* completer_ = nullptr;  // started with the first pinned-host push; a
                                      // pointer: a forked child must leak, not join, it
  const long pid_;

  mutable std::mutex note_mutex_;
  std::string transport_, note_;
  std::atomic<uint64_t> ipc_pushed_{0}, host_pushed_{0}, failed_{0};
};

}  // namespace tensorscope
