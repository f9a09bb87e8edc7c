#include "worker/device_payload_reader.h"

#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "tensorscope/shared/device_pool_table.h"
#include "tensorscope/base/logging.h"

#ifdef TENSORSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "tensorscope/shared/cuda_probe.h"
#include "tensorscope/shared/cuda_util.h"
#endif

namespace tensorscope::daemon {

#ifndef TENSORSCOPE_WITH_CUDA

bool device_payloads_supported(std::string* why) {
  if (why != nullptr) *why = "this daemon was built without CUDA support";
  return false;
}

struct DevicePayloadReader::State {};

DevicePayloadReader::DevicePayloadReader() = default;
DevicePayloadReader::~DevicePayloadReader() = default;

DevicePayloadReader::Result DevicePayloadReader::fetch(uint64_t, const SharedSegment&, RecordView*,
                                                       std::chrono::milliseconds, std::string* why) {
  *why = "device payload: this daemon was built without CUDA support";
  return Result::kFailed;
}

void DevicePayloadReader::forget_producer(uint64_t) {}

#else  // TENSORSCOPE_WITH_CUDA

namespace {}  // namespace

bool device_payloads_supported(std::string* why) {
  const CudaProbe& probe = cuda_probe();
  if (!probe.usable && why != nullptr) *why = probe.reason;
  return probe.usable;
}

struct DevicePayloadReader::State {
  struct Pool {
    Status opened = Status::ok();  // why it could not be opened, once
    DevicePoolIdentity identity;
    int device = -1;
    uint8_t* base = nullptr;
    std::vector<cudaEvent_t> events;
  };
  std::map<std::pair<uint64_t, uint32_t>, Pool> pools;                 // (producer, pool index)
  std::map<std::array<uint8_t, wire::kDeviceUuidBytes>, int> devices;  // by UUID
  bool devices_listed = false;
  uint8_t* host = nullptr;  // pinned staging for the copies out
  uint64_t host_bytes = 0;
  std::map<int, cudaStream_t> streams;  // one copy stream per device

  // Every CUDA call runs on the worker's reader thread, which is ours: set_device()
  // switches devices without restoring (restoring device 0 would make a context there).
  ~State() {
    for (auto& [key, pool] : pools) close(pool);
    for (auto& [device, stream] : streams) {
      set_device(device);
      cudaStreamDestroy(stream);
    }
    if (host != nullptr) cudaFreeHost(host);
  }

  void close(Pool& pool) {
    if (pool.device < 0) return;
    set_device(pool.device);
    for (cudaEvent_t e : pool.events) cudaEventDestroy(e);
    if (pool.base != nullptr) cudaIpcCloseMemHandle(pool.base);
    pool.events.clear();
    pool.base = nullptr;
  }

  void list_devices() {
    devices_listed = true;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
      std::array<uint8_t, wire::kDeviceUuidBytes> uuid{};
      std::memcpy(uuid.data(), &prop.uuid, uuid.size());
      devices.emplace(uuid, d);
    }
  }

  Status open(Pool& pool, const wire::DevicePoolEntry& entry) {
    auto identity = read_pool_identity(entry);
    if (!identity) return identity.status();
    pool.identity = std::move(*identity);
    if (!devices_listed) list_devices();
    const auto found = devices.find(pool.identity.device_uuid);
    if (found == devices.end()) {
      return Status::error("the producer's cuda" + std::to_string(pool.identity.device_ordinal) +
                           " is not visible to this daemon (check CUDA_VISIBLE_DEVICES)");
    }
    pool.device = found->second;
    if (!set_device(pool.device)) return Status::error("cannot select the producer's device");
    cudaIpcMemHandle_t mem{};
    std::memcpy(&mem, pool.identity.mem_handle.data(), sizeof(mem));
    void* base = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&base, mem, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      return Status::error(cuda_error_text("cudaIpcOpenMemHandle", err));
    }
    pool.base = static_cast<uint8_t*>(base);
    for (const IpcHandleBytes& bytes : pool.identity.event_handles) {
      cudaIpcEventHandle_t handle{};
      std::memcpy(&handle, bytes.data(), sizeof(handle));
      cudaEvent_t event = nullptr;
      err = cudaIpcOpenEventHandle(&event, handle);
      if (err != cudaSuccess) {
        return Status::error(cuda_error_text("cudaIpcOpenEventHandle", err));
      }
      pool.events.push_back(event);
    }
    if (streams.find(pool.device) == streams.end()) {
      cudaStream_t stream = nullptr;
      err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      if (err != cudaSuccess) return Status::error(cuda_error_text("cudaStreamCreate", err));
      streams[pool.device] = stream;
    }
    return Status::ok();
  }

  Status reserve_host(uint64_t bytes) {
    if (bytes <= host_bytes) return Status::ok();
    uint64_t size = std::max<uint64_t>(host_bytes * 2, uint64_t{1} << 20);
    while (size < bytes) size *= 2;
    if (host != nullptr) cudaFreeHost(host);
    host = nullptr;
    host_bytes = 0;
    void* p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, size);
    if (err != cudaSuccess) {
      return Status::error(cuda_error_text("cudaMallocHost", err));
    }
    host = static_cast<uint8_t*>(p);
    host_bytes = size;
    return Status::ok();
  }
};

DevicePayloadReader::DevicePayloadReader() : state_(std::make_unique<State>()) {}
DevicePayloadReader::~DevicePayloadReader() = default;

DevicePayloadReader::Result DevicePayloadReader::fetch(uint64_t producer_id, const SharedSegment& segment,
                                                       RecordView* view, std::chrono::milliseconds wait,
                                                       std::string* why) {
  if (!device_payloads_supported(why)) {
    *why = "device payload: " + *why;
    return Result::kFailed;
  }
  const wire::RecordHeader& h = view->header;
  wire::DevicePoolEntry& entry = *segment.pool(h.pool_index);
  auto [it, inserted] = state_->pools.try_emplace({producer_id, h.pool_index});
  State::Pool& pool = it->second;
  if (inserted) {
    pool.opened = state_->open(pool, entry);
    if (!pool.opened) {
      const Status st = pool.opened;
      if (entry.state.load(std::memory_order_acquire) == wire::kPoolPublished) {
        // Tell the producer to send this device's tensors through the ring instead.
        entry.consumer_refused.store(1, std::memory_order_release);
        TS_LOG_WARN(
            "producer {}: device pool {} cannot be read ({}); the producer falls back "
            "to pinned host memory",
            producer_id, h.pool_index, st.message());
      } else {  // not (or no longer) published: nothing to remember
        state_->close(pool);
        state_->pools.erase(it);
      }
      *why = st.message();
      return Result::kFailed;
    }
  }
  if (!pool.opened) {
    *why = pool.opened.message();
    return Result::kFailed;
  }
  *why = validate_device_location(h, pool.identity);
  if (!why->empty()) return Result::kFailed;

  set_device(pool.device);
  cudaEvent_t event = pool.events[h.pool_event];
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    const cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess) break;
    if (err != cudaErrorNotReady) {
      *why = cuda_error_text("waiting for the block's event", err);
      return Result::kFailed;
    }
    if (std::chrono::steady_clock::now() >= deadline) return Result::kPending;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  if (Status st = state_->reserve_host(h.payload_bytes); !st) {
    *why = st.message();
    return Result::kFailed;
  }
  const uint64_t offset = h.pool_position % pool.identity.capacity;
  cudaStream_t stream = state_->streams[pool.device];
  cudaError_t err = cudaMemcpyAsync(state_->host, pool.base + offset, h.payload_bytes, cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    *why = cuda_error_text("copying the block to the host", err);
    return Result::kFailed;
  }
  // The producer revokes its pools before it reuses their blocks for a new
  // registration: if that happened during the copy, the bytes may be someone else's.
  if (entry.state.load(std::memory_order_acquire) != wire::kPoolPublished) {
    *why = "the producer revoked its device pool (it registered again)";
    return Result::kFailed;
  }
  view->payload = state_->host;
  ++fetched_;
  fetched_bytes_ += h.payload_bytes;
  return Result::kCopied;
}

void DevicePayloadReader::forget_producer(uint64_t producer_id) {
  for (auto it = state_->pools.begin(); it != state_->pools.end();) {
    if (it->first.first == producer_id) {
      state_->close(it->second);
      it = state_->pools.erase(it);
    } else {
      ++it;
    }
  }
}

#endif  // TENSORSCOPE_WITH_CUDA

}  // namespace tensorscope::daemon
