// runtime_dir_watch.h — wakes the client's connection thread the moment a daemon's
// socket appears in the runtime directory (inotify), instead of polling for it.
//
// Used by Connection's background thread only. A daemon publishes its socket by renaming
// a listening socket into place (listen_unix), so an IN_MOVED_TO or IN_CREATE of
// "<session>.sock" means "a daemon answers now". Without inotify (or when the directory
// cannot be watched) wait() simply sleeps until its timeout, which the caller keeps
// short enough for a fallback poll. Thread safety: one thread.
#pragma once

#include <string>

namespace tensorscope {

class RuntimeDirWatch {
 public:
  // Watches `dir` for `file_name` (created or renamed into place).
  RuntimeDirWatch(const std::string& dir, const std::string& file_name);
  ~RuntimeDirWatch();
  RuntimeDirWatch(const RuntimeDirWatch&) = delete;
  RuntimeDirWatch& operator=(const RuntimeDirWatch&) = delete;

  // Whether inotify watches the directory (else wait() is a plain timed wait).
  bool active() const { return watch_ >= 0; }

  // Waits up to `timeout_ms` for the file to appear (true: a reason to look now; also
  // when the event queue overflowed) or `wake_fd` to become readable (false). Events for
  // other files do not end the wait, so a backoff is never cut short by them.
  bool wait(int wake_fd, int timeout_ms);

 private:
  void rewatch();
  bool drain_events();  // reads every queued event; true when one concerns the file

  std::string dir_;
  std::string file_name_;
  int inotify_fd_ = -1;
  int watch_ = -1;
};

}  // namespace tensorscope
