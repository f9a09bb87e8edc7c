// sigbus_guard.h — reading a mapped file that someone truncates must not kill the reader.
//
// A producer's segment is a file it owns: if it (or anyone with its uid) truncates the
// file while a daemon process has it mapped, touching the missing pages raises SIGBUS.
// Mappings registered here are guarded: install_sigbus_guard() sets a SIGBUS handler
// that, for a fault inside a registered mapping, puts a page of zeros where the missing
// page was and marks the mapping faulted; the reader sees zeros instead of dying, and
// drops the segment when it next checks guarded_mapping_faulted(). A SIGBUS anywhere
// else keeps its default action (the process dies as it would have).
//
// Used by the daemon's supervisor and workers (SharedSegment registers its mappings;
// only daemon processes install the handler: a training process keeps its own signal
// handlers). Thread safety: every function may be called from any thread; the handler
// is async-signal-safe (atomics and syscalls only).
#pragma once

#include <cstddef>

namespace tensorscope {

inline constexpr int kMaxGuardedMappings = 4096;

// Installs the SIGBUS handler (once per process; later calls do nothing).
void install_sigbus_guard();

// Registers [base, base + bytes); returns a handle (>= 0), or -1 when the table is
// full (the mapping is then not guarded).
int register_guarded_mapping(const void* base, size_t bytes);
void unregister_guarded_mapping(int handle);

// True once a SIGBUS hit the mapping (its file was truncated under us).
bool guarded_mapping_faulted(int handle);

}  // namespace tensorscope
