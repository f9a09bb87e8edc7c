#include "runtime_dir_watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace tensorscope {

RuntimeDirWatch::RuntimeDirWatch(const std::string& dir, const std::string& file_name)
    : dir_(dir), file_name_(file_name) {
  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  rewatch();
}

RuntimeDirWatch::~RuntimeDirWatch() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
}

void RuntimeDirWatch::rewatch() {
  if (inotify_fd_ < 0 || watch_ >= 0) return;
  // The directory may not exist yet (nothing created it): retried at every wait.
  watch_ = ::inotify_add_watch(inotify_fd_, dir_.c_str(),
                               IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
}

bool RuntimeDirWatch::wait(int wake_fd, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    rewatch();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[2] = {{wake_fd, POLLIN, 0}, {watch_ >= 0 ? inotify_fd_ : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left)) <= 0) continue;  // timeout (or EINTR): checked above
    if ((fds[0].revents & POLLIN) != 0) return false;           // woken: shutting down
    if ((fds[1].revents & POLLIN) != 0 && drain_events()) return true;
    // Other files came and went (segments, lock files): keep waiting until the deadline.
  }
}

bool RuntimeDirWatch::drain_events() {
  bool appeared = false;
  alignas(inotify_event) char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(inotify_fd_, buffer, sizeof(buffer));
    if (n <= 0) break;
    for (ssize_t offset = 0; offset + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      if ((event->mask & IN_Q_OVERFLOW) != 0) {
        appeared = true;  // events were lost: look at the directory now
      } else if ((event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
        if (watch_ >= 0 && (event->mask & IN_IGNORED) == 0) ::inotify_rm_watch(inotify_fd_, watch_);
        watch_ = -1;  // the directory went away or moved: watch the path again once it is back
      } else if (event->len > file_name_.size() && event->name[file_name_.size()] == '\0' &&
                 std::memcmp(event->name, file_name_.data(), file_name_.size()) == 0) {
        appeared = true;
      }
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  return appeared;
}

}  // namespace tensorscope
