// process_stat.h — what the kernel says of a process: its scheduler state and the CPU
// time it has used, from /proc/<pid>/stat.
//
// Used by the supervisor to tell a worker it has not heard from apart: stopped (a
// debugger, SIGSTOP), starved (runnable, waiting for a core or for the disk, or still
// using CPU time: a busy machine), or hung (asleep and using no CPU). Linux only; on a
// process that is gone (or a system without /proc) the read gives nothing.
// Thread safety: free functions without shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace tensorscope {

struct ProcessStat {
  char state = '?';        // R running or runnable, S sleeping, D disk wait, T/t stopped, Z zombie, ...
  uint64_t cpu_ticks = 0;  // user + system time of all its threads, in clock ticks

  bool stopped() const { return state == 'T' || state == 't'; }
  // Running, waiting for a core, or in uninterruptible (disk) wait: not idle by choice.
  bool runnable() const { return state == 'R' || state == 'D'; }
};

// Parses the text of /proc/<pid>/stat (its command name may hold spaces and parentheses);
// nothing when it is not such a text.
std::optional<ProcessStat> parse_process_stat(std::string_view text);

// /proc/<pid>/stat of `pid`, parsed; nothing when it cannot be read.
std::optional<ProcessStat> read_process_stat(pid_t pid);

}  // namespace tensorscope
