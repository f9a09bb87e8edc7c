// push_result.h — what happened to one Client::push, and the client's counters.
//
// Used in the training process. Thread safety: value types.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tensorscope/base/named_enum.h"

namespace tensorscope {

// What happened to one push: X(value, name). The names: to_string, and the Python
// package's PushResult (through the extension's PUSH_RESULTS).
#define TENSORSCOPE_PUSH_RESULTS(X)                                                                  \
  X(kPushed, "pushed")              /* copied into shared memory; the daemon will receive it */      \
  X(kGated, "gated")                /* skipped by every_n / max_hz, or tracking is disabled */       \
  X(kDroppedFull, "dropped_full")   /* the ring had no room (daemon slow); nothing was waited for */ \
  X(kNotConnected, "not_connected") /* no daemon for this session right now */                       \
  X(kRefused, "refused")            /* bad input: complex or unknown dtype, too large, bad name, transform failed */

TENSORSCOPE_NAMED_ENUM(PushResult, uint8_t, kPushResultNames, TENSORSCOPE_PUSH_RESULTS);
static_assert(named_and_distinct(kPushResultNames));

// Its name in kPushResultNames; "unknown" for a value no result has.
const char* to_string(PushResult result);

// Records of every kind are counted: tensors, and the module tree records of
// track_model (one per logged step; TrackOptions::tree_log).
struct ClientStats {
  uint64_t pushed = 0;
  uint64_t gated = 0;
  uint64_t dropped_full = 0;
  uint64_t not_connected = 0;
  uint64_t refused = 0;
  uint64_t bytes = 0;  // payload bytes pushed
  // Pacing: while the daemon falls behind, the client sends one call in pace_stride of
  // each stream (1: every call its gates admit), spread evenly over the steps, instead of
  // copying tensors a full ring would drop. paced counts the calls held back for it
  // (they are in gated too); pace_note says it in words ("" when not pacing).
  uint64_t paced = 0;
  double pace_stride = 1;  // in sixteenths: 2.5 sends 2 calls in 5
  std::string pace_note;
  // Pushed records the daemon received but could not draw: its per-worker stream limit
  // (limits.max_streams_per_worker) was reached. Its log says so once.
  uint64_t dropped_by_daemon = 0;
  // Summary records (the tracks' per-step summaries) are not dropped for a full ring:
  // they wait in the client, summaries_held of them now, and are sent in order when the
  // daemon has room. Past 32 MiB held, older ones are thinned (each tensor's first
  // non-finite value and largest max |x| kept): summaries_lost counts those.
  uint64_t summaries_held = 0;
  uint64_t summaries_lost = 0;
  // The whole tensors sent after the first NaN (anomaly_capture_steps: the evidence) are
  // held too when the ring is full (CPU tensors, at most 256 MiB; past it the oldest go:
  // evidence_lost, also counted in dropped_full).
  uint64_t evidence_held = 0;
  uint64_t evidence_lost = 0;
  bool connected = false;    // a daemon holds our segment right now
  uint64_t connections = 0;  // successful registrations so far (reconnects included)
  // Why not connected right now, in words ("" while connected): no daemon, a refused
  // registration, no room for a segment, ...
  std::string connection_note;
  // Bytes of the shared-memory segment in use (or last used); shm_note says why it is
  // smaller than ClientOptions::shm_budget (the runtime directory was short of space)
  // or why none could be made.
  uint64_t shm_bytes = 0;
  std::string shm_note;
  // ClientOptions::autostart: what happened ("started tensorscoped (log ...)", "autostart
  // failed: ...", ...); "" when autostart is off or was not needed.
  std::string autostart;
  // How CUDA tensors travel: "" (none pushed yet), "cuda-ipc" (a device-to-device copy
  // into the staging pool, read by the daemon through CUDA IPC), "pinned-host" (an
  // asynchronous copy to pinned host memory, then the shared-memory ring) or
  // "sync-copy" (a blocking copy: this build has no CUDA runtime). cuda_note says why
  // CUDA IPC is not used.
  std::string cuda_transport;
  std::string cuda_note;
  uint64_t cuda_ipc_pushed = 0;   // records whose payload stayed on the GPU
  uint64_t cuda_host_pushed = 0;  // records copied through pinned host memory
  uint64_t cuda_failed = 0;       // pinned-host copies that failed after push returned
                                  // kPushed (counted in `pushed` too); their records
                                  // were cancelled
  // What tracking costs this process (the client measures it: client/core/cost_meter.h):
  // the share of the wall time its threads spent in tensorscope's hooks, summaries and
  // copies over the last window of 5 s (-1 before the first), and, once a window went
  // over 5%, what was said of it (also logged, once).
  double own_time = -1;
  std::string own_time_note;
};

}  // namespace tensorscope
