// client_options.h — ClientOptions: how a tensorscope::Client behaves, with chained
// setters in the style of libtorch's options (`ClientOptions().session("s").every_n(10)`).
//
// Used in the training process. Thread safety: a value type; the Client copies it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "tensorscope/option_setter.h"

namespace tensorscope {

// Applied to a tensor before it is copied (e.g. reduce to per-channel std). Receives the
// stream name. An exception or an undefined result refuses the push (counted).
using TransformFn = std::function<at::Tensor(const std::string& stream, const at::Tensor&)>;

#define TENSORSCOPE_OPTION(Type, name, default_value) \
  TENSORSCOPE_OPTION_SETTER(ClientOptions, Type, name, default_value)

class ClientOptions {
  // Session name: must match the daemon's (--session). [A-Za-z0-9_.-], 1..64 chars.
  TENSORSCOPE_OPTION(std::string, session, "default")
  // Push the 1st, (n+1)th, (2n+1)th ... call of each stream. 1 pushes every call.
  TENSORSCOPE_OPTION(int64_t, every_n, 1)
  // At most this many pushes per second per stream (0 = no limit), after every_n.
  TENSORSCOPE_OPTION(double, max_hz, 0.0)
  // Rank of this process; unset = environment variable RANK, else 0.
  TENSORSCOPE_OPTION(std::optional<int>, rank, std::nullopt)
  // Size of this process's shared-memory segment (ring slots plus payload bytes).
  TENSORSCOPE_OPTION(uint64_t, shm_budget, uint64_t{128} << 20)
  // Number of record slots in the ring (rounded up to a power of two).
  TENSORSCOPE_OPTION(uint32_t, ring_slots, 1024)
  // Tensors with more payload bytes than this are refused (counted); 0 = the ring's
  // payload capacity.
  TENSORSCOPE_OPTION(uint64_t, max_tensor_bytes, 0)
  // Applied to every tensor before copying; empty = none.
  TENSORSCOPE_OPTION(TransformFn, transform, nullptr)
  // Directory of the session socket and segments; "" = $TENSORSCOPE_RUNTIME_DIR, else
  // /dev/shm/tensorscope-<uid>.
  TENSORSCOPE_OPTION(std::string, runtime_dir, "")
  // How often the client looks for the daemon while not connected.
  TENSORSCOPE_OPTION(int, reconnect_interval_ms, 200)
  // Initial value of set_enabled().
  TENSORSCOPE_OPTION(bool, enabled, true)
  // CUDA tensors: bytes of staging per device, allocated once at the first push of a
  // tensor on that device: GPU memory shared with the daemon by CUDA IPC, or pinned host
  // memory when IPC is not possible. A tensor larger than this is refused (counted); a
  // full pool is a counted drop, never a wait.
  TENSORSCOPE_OPTION(uint64_t, cuda_staging_bytes, uint64_t{256} << 20)
  // Hand CUDA tensors to the daemon by CUDA IPC when it can read them; false always uses
  // the pinned-host copy. Either way the training thread never synchronizes the device.
  TENSORSCOPE_OPTION(bool, cuda_ipc, true)
};

#undef TENSORSCOPE_OPTION

}  // namespace tensorscope
