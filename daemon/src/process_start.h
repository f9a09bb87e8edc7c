// process_start.h — how tensorscoped starts: detached from the process that started it
// (the client's autostart), and the path it re-executes for its workers.
//
// Used by daemon_main.cc only. Thread safety: call before any thread starts.
#pragma once

#include <string>

namespace tensorscope::daemon {

// --detach: forks; the child becomes the daemon (a session of its own) and tells the
// parent through `*ready_fd` once it listens. The parent never returns: it exits with 0
// then, or with the child's status when the child exits first.
void detach(int* ready_fd);

// This executable's path (/proc/self/exe), else argv0.
std::string self_executable(const char* argv0);

}  // namespace tensorscope::daemon
