// client_option_list.h — every option of a client, once: its type, name, default and
// bounds. Each line is X(Type, name, default, rule).
//
// Everything else derives from this list: ClientOptions' setters and getters
// (client_options.h), the fields of the client core's CoreOptions and the check of their
// bounds (client/core/core_option_table.h, whose words the C++ client logs and the Python
// package raises), the options the Python extension reads and its CLIENT_OPTIONS
// defaults (a test compares python/tensorscope/_client.py's signature with them). A new
// option: a line here, its keyword in _client.py, its row in docs/user/ (docs/changing.md).
// Rules: text(kSession | kPath), between(lo, hi) for integers (kNoLimit: no upper bound),
// at_least(lo) for numbers, flag() for booleans, rank_between(lo, hi) for the optional rank.
// Thread safety: constants and macros only.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "tensorscope/shared/output_dir.h"

namespace tensorscope::option_rules {

enum class TextKind { kSession, kPath };
struct Text {
  TextKind kind;
};
struct Integer {
  int64_t lo;
  int64_t hi;
};
struct Number {
  double lo;  // at least
};
struct Flag {};
struct Rank {
  int64_t lo;
  int64_t hi;
};

inline constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
inline constexpr TextKind kSession = TextKind::kSession;  // a session name (session_name.h)
inline constexpr TextKind kPath = TextKind::kPath;        // any text without NUL

constexpr Text text(TextKind kind) { return {kind}; }
constexpr Integer between(int64_t lo, int64_t hi) { return {lo, hi}; }
constexpr Number at_least(double lo) { return {lo}; }
constexpr Flag flag() { return {}; }
constexpr Rank rank_between(int64_t lo, int64_t hi) { return {lo, hi}; }

}  // namespace tensorscope::option_rules

// clang-format off
#define TENSORSCOPE_CLIENT_OPTIONS(X)                                                                              \
  /* Session name: must match the daemon's (--session). [A-Za-z0-9_.-], 1..64 chars. */                           \
  X(std::string, session, "default", text(kSession))                                                               \
  /* Push the 1st, (n+1)th, (2n+1)th ... call of each stream. 1 pushes every call. */                              \
  X(int64_t, every_n, 1, between(1, kNoLimit))                                                                      \
  /* At most this many pushes per second per stream (0 = no limit), after every_n. */                              \
  X(double, max_hz, 0.0, at_least(0))                                                                               \
  /* Rank of this process; unset = environment variable RANK, else 0. */                                           \
  X(std::optional<int>, rank, std::nullopt, rank_between(0, int64_t{1} << 30))                                      \
  /* Size of this process's shared-memory segment (ring slots plus payload bytes). */                              \
  X(uint64_t, shm_budget, uint64_t{128} << 20, between(int64_t{1} << 16, int64_t{1} << 40))                         \
  /* Number of record slots in the ring (rounded up to a power of two). */                                         \
  X(uint32_t, ring_slots, 1024, between(1, int64_t{1} << 20))                                                       \
  /* Tensors with more payload bytes than this are refused (counted); 0 = the ring's payload capacity. */          \
  X(uint64_t, max_tensor_bytes, 0, between(0, int64_t{1} << 62))                                                    \
  /* Directory of the session socket and segments; "" = $TENSORSCOPE_RUNTIME_DIR, else                             \
     /dev/shm/tensorscope-<uid>. */                                                                                \
  X(std::string, runtime_dir, "", text(kPath))                                                                      \
  /* How often the client looks for the daemon while not connected, besides watching the runtime                   \
     directory (a daemon that appears is noticed at once). */                                                      \
  X(int, reconnect_interval_ms, 200, between(10, 3600000))                                                          \
  /* How long the constructor waits for the first registration when a daemon's socket exists (or                   \
     autostart is on), so the first steps' pushes are not lost; 0 = never wait (connect in the                     \
     background). Past it, it still waits for its own segment, where pushes wait for the daemon                    \
     (local work: milliseconds, at most 5 s on a very busy machine). Without a daemon socket it                    \
     does not wait at all. */                                                                                      \
  X(int, connect_timeout_ms, 500, between(0, 600000))                                                               \
  /* Start tensorscoped (detached: its own session, log in autostart_output/<session>/tensorscoped.log)            \
     when no daemon serves the session; ranks starting together end with one daemon. It exits by                  \
     itself, finalizing every video, once no producer has been connected for                                       \
     autostart_idle_exit_ms. Failures show in stats().autostart. */                                                \
  X(bool, autostart, false, flag())                                                                                 \
  /* Config file for an autostarted daemon; "" = the daemon's defaults (configs/default.yaml). */                  \
  X(std::string, autostart_config, "", text(kPath))                                                                 \
  /* Output directory of an autostarted daemon (relative to the working directory). */                             \
  X(std::string, autostart_output, kDefaultOutputDir, text(kPath))                                                 \
  /* An autostarted daemon exits after this long without producers (milliseconds). */                              \
  X(int, autostart_idle_exit_ms, 30000, between(1000, int64_t{1} << 31))                                            \
  /* Path of tensorscoped; "" = $TENSORSCOPE_DAEMON, beside the program or library, the install                    \
     prefix, then $PATH. */                                                                                        \
  X(std::string, daemon_executable, "", text(kPath))                                                                \
  /* Initial value of set_enabled(). */                                                                            \
  X(bool, enabled, true, flag())                                                                                    \
  /* CUDA tensors: bytes of staging per device, allocated once at the first push of a tensor on that               \
     device: GPU memory shared with the daemon by CUDA IPC, or pinned host memory when IPC is not                  \
     possible. A tensor larger than this is refused (counted); a full pool is a counted drop, never                \
     a wait. */                                                                                                    \
  X(uint64_t, cuda_staging_bytes, uint64_t{256} << 20, between(int64_t{1} << 16, int64_t{64} << 30))                \
  /* Hand CUDA tensors to the daemon by CUDA IPC when it can read them; false always uses the                      \
     pinned-host copy. Either way the training thread never synchronizes the device. */                            \
  X(bool, cuda_ipc, true, flag())                                                                                   \
  /* While the daemon falls behind, send one call in k of every stream (k fitted to what it reads)                 \
     instead of copying tensors a full ring drops (stats().pace_stride, paced). false: send every                  \
     admitted call and let a full ring drop (kDroppedFull). */                                                     \
  X(bool, pacing, true, flag())                                                                                     \
  /* After the first NaN or Inf a track's summary shows (TrackOptions::stats_every): the tensor is                 \
     sent whole at once (on the CPU; a GPU summary is read a step later), and every module track                   \
     sends whole tensors for this many steps after that step. */                                                   \
  X(int64_t, anomaly_capture_steps, 2, between(0, int64_t{1} << 20))                                                \
  /* A run to compare this one with as it trains (docs/user/reference_runs.md): a session folder,                   \
     finished or still running (a path with a '/', relative to the working directory), or a                        \
     session name beside the daemon's; "" = the daemon's reference.session. The daemon reports                     \
     the first tensor outside tolerance as the anomaly "divergence". */                                            \
  X(std::string, reference, "", text(kPath))
// clang-format on
