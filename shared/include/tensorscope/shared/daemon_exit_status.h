// daemon_exit_status.h — what tensorscoped's exit status means.
//
// Written by the daemon (daemon_main.cc, supervisor.cc) and read by the client's
// autostart (daemon_autostart.cc), which launches `tensorscoped --detach` and learns
// from its status whether a daemon now serves the session. Thread safety: constants.
#pragma once

namespace tensorscope {

inline constexpr int kDaemonExitOk = 0;              // stopped cleanly; with --detach: listening
inline constexpr int kDaemonExitStartFailed = 1;     // could not start
inline constexpr int kDaemonExitBadUsage = 2;        // bad arguments or config: retrying cannot help
inline constexpr int kDaemonExitAlreadyRunning = 3;  // another daemon serves the session

}  // namespace tensorscope
