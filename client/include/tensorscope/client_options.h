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
  // How often the client looks for the daemon while not connected, besides watching the
  // runtime directory (a daemon that appears is noticed at once).
  TENSORSCOPE_OPTION(int, reconnect_interval_ms, 200)
  // How long the constructor waits for the first registration when a daemon's socket
  // exists (or autostart is on), so the first steps' pushes are not lost; 0 = never wait
  // (connect in the background). Without a daemon socket it does not wait at all.
  TENSORSCOPE_OPTION(int, connect_timeout_ms, 500)
  // Start tensorscoped (detached: its own session, log in autostart_output/<session>/
  // tensorscoped.log) when no daemon serves the session; ranks starting together end
  // with one daemon. It exits by itself, finalizing every video, once no producer has
  // been connected for autostart_idle_exit_ms. Failures show in stats().autostart.
  TENSORSCOPE_OPTION(bool, autostart, false)
  // Config file for an autostarted daemon; "" = the daemon's defaults (configs/default.yaml).
  TENSORSCOPE_OPTION(std::string, autostart_config, "")
  // Output directory of an autostarted daemon (relative to the working directory).
  TENSORSCOPE_OPTION(std::string, autostart_output, "tensorscope_runs")
  // An autostarted daemon exits after this long without producers (milliseconds; at
  // least 1000).
  TENSORSCOPE_OPTION(int, autostart_idle_exit_ms, 30000)
  // Path of tensorscoped; "" = $TENSORSCOPE_DAEMON, beside the program or library,
  // the install prefix, then $PATH.
  TENSORSCOPE_OPTION(std::string, daemon_executable, "")
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
  // While the daemon falls behind, send one call in k of every stream (k fitted to what
  // it reads) instead of copying tensors a full ring drops (stats().pace_stride, paced).
  // false: send every admitted call and let a full ring drop (kDroppedFull).
  TENSORSCOPE_OPTION(bool, pacing, true)
  // After the first NaN or Inf a track's summary shows (TrackOptions::stats_every): the
  // tensor is sent whole at once (on the CPU; a GPU summary is read a step later), and
  // every module track sends whole tensors for this many steps after that step.
  TENSORSCOPE_OPTION(int64_t, anomaly_capture_steps, 2)
};

#undef TENSORSCOPE_OPTION

}  // namespace tensorscope
