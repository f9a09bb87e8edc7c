#include "cuda_staging.h"

#include <cuda_runtime_api.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "record_fields.h"
#include "staging_pool.h"
#include "tensorscope/shared/cuda_probe.h"
#include "tensorscope/shared/cuda_util.h"
#include "tensorscope/shared/device_pool_table.h"
#include "tensorscope/base/logging.h"

namespace tensorscope {
namespace {

constexpr uint32_t kIpcEvents = wire::kMaxPoolEvents;
constexpr uint32_t kHostEvents = 256;  // pinned-host copies in flight per device
constexpr size_t kFailureBytes = 256;  // why a copy failed, in a fixed buffer

void destroy_events(std::vector<cudaEvent_t>& events) {
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  events.clear();
}

std::string create_events(std::vector<cudaEvent_t>* events, uint32_t count, unsigned flags) {
  for (uint32_t i = 0; i < count; ++i) {
    cudaEvent_t e = nullptr;
    const cudaError_t err = cudaEventCreateWithFlags(&e, flags);
    if (err != cudaSuccess) {
      destroy_events(*events);
      return cuda_error_text("cudaEventCreateWithFlags", err);
    }
    events->push_back(e);
  }
  return {};
}

}  // namespace

struct CudaStaging::Device {
  std::mutex mutex;  // serializes pushes on this device: pool order == ring order
  int index = -1;
  std::string error;  // the side stream could not be made: copy synchronously
  cudaStream_t side = nullptr;
  cudaEvent_t join = nullptr;   // side stream -> tensor's stream
  cudaEvent_t order = nullptr;  // tensor's stream -> side stream

  // CUDA IPC pool (set up on first use; ipc_error when that failed).
  bool ipc_tried = false;
  std::string ipc_error;
  uint8_t* pool_base = nullptr;
  std::optional<StagingPool> pool;
  std::vector<cudaEvent_t> ipc_events;
  DevicePoolIdentity identity;
  uint32_t table_index = 0;
  uint64_t published_serial = 0;  // the registration whose segment lists this pool

  // Pinned host staging (set up on first use).
  bool host_tried = false;
  std::string host_error;
  uint8_t* host_base = nullptr;
  std::optional<StagingPool> host_pool;
  std::vector<cudaEvent_t> host_events;
  uint64_t host_released_to = 0;  // under `mutex`; advanced by the completion thread
  uint64_t host_released_ordinal = 0;

  // Orders the side stream after the tensor's current stream, copies `bytes` of the
  // (contiguous) tensor to `dst`, records `done` on the side stream and makes the
  // tensor's stream wait for the copy. Empty on success.
  std::string enqueue_copy(const TensorRef& tensor, void* dst, uint64_t bytes, cudaMemcpyKind kind, cudaEvent_t done);
  // enqueue_copy that never throws: why it failed lands in `failed` ("" = success).
  void guarded_copy(const TensorRef& tensor, void* dst, uint64_t bytes, cudaMemcpyKind kind, cudaEvent_t done,
                    char (&failed)[kFailureBytes]) noexcept;
  std::string setup_ipc(uint64_t bytes);  // try_setup_ipc, undone on failure
  std::string try_setup_ipc(uint64_t bytes);
  std::string setup_host(uint64_t bytes);
  void release();
};

struct CudaStaging::Pending {
  Device* device = nullptr;
  StagingPool::Block block;  // block.bytes: the payload's bytes
  RingWriter* writer = nullptr;
  RingWriter::Reservation reservation;       // header == nullptr: only release the block
  std::unique_ptr<Connection::Guard> guard;  // keeps the segment mapped until commit
};

std::string CudaStaging::Device::enqueue_copy(const TensorRef& tensor, void* dst, uint64_t bytes, cudaMemcpyKind kind,
                                              cudaEvent_t done) {
  DeviceScope scope(index);
  const auto producer = reinterpret_cast<cudaStream_t>(tensor.cuda_stream);
  cudaError_t err = cudaSuccess;
  if (tensor.ordering != nullptr) {
    std::string why = tensor.ordering->record_on_producer(order);
    if (!why.empty()) return why;
  } else {
    err = cudaEventRecord(order, producer);
    if (err != cudaSuccess) return cuda_error_text("cudaEventRecord on the tensor's stream", err);
  }
  err = cudaStreamWaitEvent(side, order, 0);
  if (err != cudaSuccess) return cuda_error_text("cudaStreamWaitEvent", err);
  err = cudaMemcpyAsync(dst, tensor.data, bytes, kind, side);
  if (err != cudaSuccess) return cuda_error_text("cudaMemcpyAsync", err);
  err = cudaEventRecord(done, side);
  if (err != cudaSuccess) return cuda_error_text("cudaEventRecord", err);
  err = cudaEventRecord(join, side);
  if (err != cudaSuccess) return cuda_error_text("cudaEventRecord", err);
  if (tensor.ordering != nullptr) return tensor.ordering->producer_waits_for(join);
  err = cudaStreamWaitEvent(producer, join, 0);
  if (err != cudaSuccess) return cuda_error_text("cudaStreamWaitEvent on the tensor's stream", err);
  return {};
}

void CudaStaging::Device::guarded_copy(const TensorRef& tensor, void* dst, uint64_t bytes, cudaMemcpyKind kind,
                                       cudaEvent_t done, char (&failed)[kFailureBytes]) noexcept {
  try {
    const std::string error = enqueue_copy(tensor, dst, bytes, kind, done);
    std::snprintf(failed, kFailureBytes, "%s", error.c_str());
  } catch (const std::exception& e) {
    std::snprintf(failed, kFailureBytes, "%s", e.what());
    if (failed[0] == '\0') failed[0] = '?';
  } catch (...) {
    std::snprintf(failed, kFailureBytes, "unknown exception");
  }
}

std::string CudaStaging::Device::setup_ipc(uint64_t bytes) {
  ipc_tried = true;
  std::string why = try_setup_ipc(bytes);
  if (!why.empty()) {  // give back what was made: the pinned path is used instead
    DeviceScope scope(index);
    destroy_events(ipc_events);
    if (pool_base != nullptr) cudaFree(pool_base);
    pool_base = nullptr;
    identity.event_handles.clear();
    pool.reset();
  }
  return why;
}

std::string CudaStaging::Device::try_setup_ipc(uint64_t bytes) {
  DeviceScope scope(index);
  const uint64_t capacity = bytes / wire::kDevicePoolAlignment * wire::kDevicePoolAlignment;
  if (capacity == 0) return "cuda_staging_bytes is smaller than one block";
  void* base = nullptr;
  cudaError_t err = cudaMalloc(&base, capacity);
  if (err != cudaSuccess) return cuda_error_text("cudaMalloc of the staging pool", err);
  pool_base = static_cast<uint8_t*>(base);
  cudaIpcMemHandle_t mem{};
  err = cudaIpcGetMemHandle(&mem, base);
  if (err != cudaSuccess) return cuda_error_text("cudaIpcGetMemHandle", err);
  std::memcpy(identity.mem_handle.data(), &mem, sizeof(mem));
  const std::string why = create_events(&ipc_events, kIpcEvents, cudaEventInterprocess | cudaEventDisableTiming);
  if (!why.empty()) return why;
  for (cudaEvent_t e : ipc_events) {
    cudaIpcEventHandle_t handle{};
    err = cudaIpcGetEventHandle(&handle, e);
    if (err != cudaSuccess) return cuda_error_text("cudaIpcGetEventHandle", err);
    IpcHandleBytes out{};
    std::memcpy(out.data(), &handle, sizeof(handle));
    identity.event_handles.push_back(out);
  }
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) return cuda_error_text("cudaGetDeviceProperties", err);
  std::memcpy(identity.device_uuid.data(), &prop.uuid, identity.device_uuid.size());
  identity.device_ordinal = index;
  identity.capacity = capacity;
  pool.emplace(capacity, kIpcEvents);
  return {};
}

std::string CudaStaging::Device::setup_host(uint64_t bytes) {
  host_tried = true;
  DeviceScope scope(index);
  const uint64_t capacity = bytes / StagingPool::kAlignment * StagingPool::kAlignment;
  if (capacity == 0) return "no room for pinned staging";
  void* base = nullptr;
  const cudaError_t err = cudaHostAlloc(&base, capacity, cudaHostAllocDefault);
  if (err != cudaSuccess) return cuda_error_text("cudaHostAlloc of the pinned staging", err);
  host_base = static_cast<uint8_t*>(base);
  // Blocking-sync events: the completion thread sleeps in cudaEventSynchronize.
  std::string why = create_events(&host_events, kHostEvents, cudaEventBlockingSync | cudaEventDisableTiming);
  if (!why.empty()) return why;
  host_pool.emplace(capacity, kHostEvents);
  return {};
}

void CudaStaging::Device::release() {
  DeviceScope scope(index);
  if (side != nullptr) cudaStreamSynchronize(side);
  destroy_events(ipc_events);
  destroy_events(host_events);
  if (pool_base != nullptr) cudaFree(pool_base);
  if (host_base != nullptr) cudaFreeHost(host_base);
  if (join != nullptr) cudaEventDestroy(join);
  if (order != nullptr) cudaEventDestroy(order);
  if (side != nullptr) cudaStreamDestroy(side);
}

CudaStaging::CudaStaging(uint64_t staging_bytes, bool allow_ipc)
    : staging_bytes_(staging_bytes), allow_ipc_(allow_ipc), pid_(static_cast<long>(::getpid())) {}

CudaStaging::~CudaStaging() {
  if (static_cast<long>(::getpid()) != pid_) {
    // Forked child: CUDA, the thread and the connection are the parent's; leak them.
    for (auto& p : queue_) (void)p->guard.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (completer_ != nullptr) {
    completer_->join();
    delete completer_;
  }
  for (auto& [index, dev] : devices_) dev->release();
}

CudaStaging::Device* CudaStaging::device(int index) {
  std::lock_guard<std::mutex> lock(devices_mutex_);
  auto& slot = devices_[index];
  if (slot) return slot.get();
  slot = std::make_unique<Device>();
  Device& dev = *slot;
  dev.index = index;
  dev.table_index = next_table_index_++;
  DeviceScope scope(index);
  cudaError_t err = cudaStreamCreateWithFlags(&dev.side, cudaStreamNonBlocking);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&dev.join, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&dev.order, cudaEventDisableTiming);
  if (err != cudaSuccess) dev.error = cuda_error_text("creating the copy stream", err);
  return &dev;
}

void CudaStaging::wait_released(Connection& connection, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool held = false;
    {
      Connection::Guard guard = connection.acquire();
      if (!guard) return;  // no daemon: nobody reads the pools
      std::lock_guard<std::mutex> lock(devices_mutex_);
      for (auto& [index, dev] : devices_) {
        std::lock_guard<std::mutex> dev_lock(dev->mutex);
        if (!dev->pool || dev->published_serial != guard->serial) continue;
        const PoolReleases r =
            read_pool_releases(*guard->segment->pool(dev->table_index), dev->pool->generation_start_position(),
                               dev->pool->generation_start_ordinal());
        held |= r.released_to < dev->pool->head();
      }
    }
    if (!held || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CudaStaging::note(const std::string& transport, const std::string& why) {
  std::lock_guard<std::mutex> lock(note_mutex_);
  if (transport_ != transport || note_ != why) {
    if (!why.empty() && note_ != why) {
      TS_LOG_INFO("tensorscope client: CUDA tensors travel by {}: {}", transport, why);
    }
    transport_ = transport;
    note_ = why;
  }
}

CudaStaging::Outcome CudaStaging::push(Connection& connection, Connection::Active& active,
                                       const wire::RecordHeader& fields, const TensorRef& tensor, uint64_t bytes,
                                       const std::string* row_labels) {
  if (!cuda_probe().usable) {
    note("sync-copy", cuda_probe().reason);
    return Outcome{PushResult::kPushed, {}, true};
  }
  Device& dev = *device(tensor.device_index);
  std::lock_guard<std::mutex> lock(dev.mutex);
  if (!dev.error.empty()) {
    note("sync-copy", dev.error);
    return Outcome{PushResult::kPushed, {}, true};
  }
  std::string why_not_ipc;
  if (!allow_ipc_) {
    why_not_ipc = "the cuda_ipc option is off";
  } else if (!active.is_attached()) {
    why_not_ipc = "no daemon has attached yet";
  } else if (!active.cuda_ipc) {
    why_not_ipc = "the daemon cannot read CUDA IPC payloads" +
        (active.cuda_note.empty() ? std::string() : ": " + active.cuda_note);
  } else if (dev.table_index >= wire::kMaxDevicePools) {
    why_not_ipc = "more than " + std::to_string(wire::kMaxDevicePools) + " devices";
  } else if (dev.published_serial == active.serial &&
             active.segment->pool(dev.table_index)->consumer_refused.load(std::memory_order_acquire) != 0) {
    why_not_ipc = "the daemon could not open this device's CUDA pool (its log says why)";
  } else {
    if (!dev.ipc_tried) dev.ipc_error = dev.setup_ipc(staging_bytes_);
    why_not_ipc = dev.ipc_error;
  }
  if (why_not_ipc.empty()) {
    note("cuda-ipc", "");
    return push_ipc(dev, active, fields, tensor, bytes, row_labels);
  }
  if (!dev.host_tried) {
    dev.host_error = dev.setup_host(std::min(staging_bytes_, active.writer->max_payload_bytes()));
  }
  if (!dev.host_error.empty()) {
    note("sync-copy", why_not_ipc + "; " + dev.host_error);
    return Outcome{PushResult::kPushed, {}, true};
  }
  note("pinned-host", why_not_ipc);
  return push_host(dev, connection, active, fields, tensor, bytes, row_labels);
}

CudaStaging::Outcome CudaStaging::push_ipc(Device& dev, Connection::Active& active, const wire::RecordHeader& fields,
                                           const TensorRef& tensor, uint64_t bytes, const std::string* row_labels) {
  StagingPool& pool = *dev.pool;
  if (wire::align_up(bytes, wire::kDevicePoolAlignment) > pool.capacity()) {
    return Outcome{PushResult::kRefused,
                   "tensor of " + std::to_string(bytes) + " bytes exceeds the CUDA staging pool of " +
                       std::to_string(pool.capacity()) + " bytes (option cuda_staging_bytes)"};
  }
  wire::DevicePoolEntry* entry = active.segment->pool(dev.table_index);
  if (dev.published_serial != active.serial) {
    // A new registration: the daemon that held our blocks is gone.
    if (dev.published_serial != 0) pool.reset();
    dev.identity.generation = pool.generation();
    dev.identity.generation_start_position = pool.generation_start_position();
    dev.identity.generation_start_ordinal = pool.generation_start_ordinal();
    Status published = publish_pool(entry, dev.identity);
    if (!published) return Outcome{PushResult::kRefused, "publishing the CUDA pool: " + published.message()};
    dev.published_serial = active.serial;
  }
  RingWriter::Reservation r;
  if (active.writer->reserve(record_ring_bytes(0, row_labels), &r, RingWriter::Claim::kLeaveHeadroom) !=
      RingWriter::ReserveResult::kOk) {
    return Outcome{PushResult::kDroppedFull, {}};
  }
  const PoolReleases released =
      read_pool_releases(*entry, pool.generation_start_position(), pool.generation_start_ordinal());
  const auto block = pool.reserve(bytes, released.released_to, released.released_ordinal);
  if (!block) {
    active.writer->cancel(r);
    return Outcome{PushResult::kDroppedFull, {}};
  }
  wire::RecordHeader& h = *r.header;
  copy_record_fields(fields, &h);
  put_payload_sizes(r, bytes, 0, row_labels);
  h.flags = wire::kRecordDevicePayload;
  h.pool_position = block->position;
  h.pool_ordinal = block->ordinal;
  h.pool_index = dev.table_index;
  h.pool_generation = block->generation;
  h.pool_event = block->event;
  char failed[kFailureBytes] = {};
  dev.guarded_copy(tensor, dev.pool_base + block->offset, bytes, cudaMemcpyDeviceToDevice, dev.ipc_events[block->event],
                   failed);
  if (failed[0] != '\0') {
    active.writer->cancel(r);  // keeps kRecordDevicePayload: the daemon frees the block
    return Outcome{PushResult::kRefused, std::string("CUDA copy failed: ") + failed};
  }
  active.writer->commit(r);
  ipc_pushed_.fetch_add(1, std::memory_order_relaxed);
  return Outcome{};
}

CudaStaging::Outcome CudaStaging::push_host(Device& dev, Connection& connection, Connection::Active& active,
                                            const wire::RecordHeader& fields, const TensorRef& tensor, uint64_t bytes,
                                            const std::string* row_labels) {
  StagingPool& pool = *dev.host_pool;
  if (wire::align_up(bytes, StagingPool::kAlignment) > pool.capacity()) {
    return Outcome{PushResult::kRefused,
                   "tensor of " + std::to_string(bytes) + " bytes exceeds the pinned staging of " +
                       std::to_string(pool.capacity()) + " bytes"};
  }
  auto pending = std::make_unique<Pending>();
  pending->guard.reset(new Connection::Guard(connection.acquire()));
  if (!*pending->guard || pending->guard->operator->() != &active) {
    return Outcome{PushResult::kNotConnected, {}};
  }
  RingWriter::Reservation r;
  const auto reserved =
      active.writer->reserve(record_ring_bytes(bytes, row_labels), &r, RingWriter::Claim::kLeaveHeadroom);
  if (reserved == RingWriter::ReserveResult::kTooLarge) {
    return Outcome{PushResult::kRefused, "tensor does not fit in the shared-memory ring"};
  }
  if (reserved != RingWriter::ReserveResult::kOk) return Outcome{PushResult::kDroppedFull, {}};
  std::optional<StagingPool::Block> block;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);  // the completion thread releases
    block = pool.reserve(bytes, dev.host_released_to, dev.host_released_ordinal);
  }
  if (!block) {
    active.writer->cancel(r);
    return Outcome{PushResult::kDroppedFull, {}};
  }
  copy_record_fields(fields, r.header);
  put_payload_sizes(r, bytes, bytes, row_labels);
  char failed[kFailureBytes] = {};
  dev.guarded_copy(tensor, dev.host_base + block->offset, bytes, cudaMemcpyDeviceToHost, dev.host_events[block->event],
                   failed);
  pending->device = &dev;
  pending->block = *block;
  pending->writer = active.writer.get();
  if (failed[0] != '\0') {
    active.writer->cancel(r);
    pending->guard.reset();  // only the block's release is left to do, in order
  } else {
    pending->reservation = r;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back(std::move(pending));
    if (completer_ == nullptr) completer_ = new std::thread([this] { complete_loop(); });
  }
  queue_cv_.notify_one();
  if (failed[0] != '\0') return Outcome{PushResult::kRefused, std::string("CUDA copy failed: ") + failed};
  host_pushed_.fetch_add(1, std::memory_order_relaxed);
  return Outcome{};
}

void CudaStaging::complete_loop() {
  for (;;) {
    std::unique_ptr<Pending> p;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    Device& dev = *p->device;
    if (p->reservation.header != nullptr) {
      set_device(dev.index);  // our thread: no restore (see cuda_util.h)
      const cudaError_t err = cudaEventSynchronize(dev.host_events[p->block.event]);
      if (err == cudaSuccess) {
        std::memcpy(p->reservation.payload, dev.host_base + p->block.offset, p->block.bytes);
        p->writer->commit(p->reservation);
      } else {
        p->writer->cancel(p->reservation);
        if (failed_.fetch_add(1, std::memory_order_relaxed) < 10) {
          TS_LOG_WARN("tensorscope client: a CUDA copy to pinned memory failed: {}",
                      cuda_error_text("cudaEventSynchronize", err));
        }
      }
    }
    p->guard.reset();
    std::lock_guard<std::mutex> lock(queue_mutex_);
    dev.host_released_to = p->block.end;
    dev.host_released_ordinal = p->block.ordinal + 1;
  }
}

std::string CudaStaging::copy_to_host_now(const TensorRef& tensor, void* dst, uint64_t bytes) noexcept {
  DeviceScope scope(tensor.device_index);
  cudaError_t err = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(tensor.cuda_stream));
  if (err != cudaSuccess) return cuda_error_text("cudaStreamSynchronize", err);
  err = cudaMemcpy(dst, tensor.data, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return cuda_error_text("cudaMemcpy", err);
  return {};
}

void CudaStaging::fill_stats(ClientStats* stats) const {
  {
    std::lock_guard<std::mutex> lock(note_mutex_);
    stats->cuda_transport = transport_;
    stats->cuda_note = note_;
  }
  stats->cuda_ipc_pushed = ipc_pushed_.load(std::memory_order_relaxed);
  stats->cuda_host_pushed = host_pushed_.load(std::memory_order_relaxed);
  stats->cuda_failed = failed_.load(std::memory_order_relaxed);
}

}  // namespace tensorscope
