#include "tensorscope/shared/message_channel.h"

#include "tensorscope/base/clock.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace tensorscope {
namespace {

StatusOr<sockaddr_un> make_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::error("socket path too long (" + std::to_string(path.size()) + " bytes, limit " +
                         std::to_string(sizeof(addr.sun_path) - 1) + "): " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace

StatusOr<PeerCredentials> peer_credentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::from_errno("SO_PEERCRED", errno);
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

StatusOr<int> connect_unix(const std::string& path, int* error_number) {
  if (error_number != nullptr) *error_number = 0;
  auto addr = make_address(path);
  if (!addr) return addr.status();
  // Non-blocking: a listener that does not accept (stopped, backlog full) makes connect
  // fail with EAGAIN at once instead of blocking the caller.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::from_errno("socket", errno);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_un)) != 0) {
    if (error_number != nullptr) *error_number = errno;
    Status st = Status::from_errno("connect " + path, errno);
    ::close(fd);
    return st;
  }
  return fd;
}

StatusOr<int> listen_unix(const std::string& path) {
  auto addr = make_address(path);
  if (!addr) return addr.status();
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::error(path + " exists and is not a socket; refusing to replace it");
    }
    auto probe = connect_unix(path);
    if (probe) {
      ::close(*probe);
      return Status::error("a daemon is already listening on " + path);
    }
  }
  // Bound and listening under a hidden name first, then renamed into place (replacing a
  // stale socket of a daemon that died): the name appears only once connect() works.
  const size_t slash = path.find_last_of('/');
  std::string bind_path = path.substr(0, slash == std::string::npos ? 0 : slash + 1) + "." +
      path.substr(slash == std::string::npos ? 0 : slash + 1) + "." + std::to_string(::getpid());
  if (bind_path.size() >= sizeof(sockaddr_un::sun_path)) bind_path = path;  // no room: bind in place
  if (bind_path == path) ::unlink(path.c_str());
  auto bind_addr = make_address(bind_path);
  if (!bind_addr) return bind_addr.status();
  ::unlink(bind_path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::from_errno("socket", errno);
  const mode_t old_mask = ::umask(0177);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&*bind_addr), sizeof(sockaddr_un));
  ::umask(old_mask);
  if (rc != 0 || ::chmod(bind_path.c_str(), 0600) != 0 || ::listen(fd, 128) != 0 ||
      (bind_path != path && ::rename(bind_path.c_str(), path.c_str()) != 0)) {
    Status s = Status::from_errno("bind/listen " + path, errno);
    ::close(fd);
    if (bind_path != path) ::unlink(bind_path.c_str());
    return s;
  }
  return fd;
}

MessageChannel::~MessageChannel() { close(); }

MessageChannel::MessageChannel(MessageChannel&& other) noexcept { *this = std::move(other); }

MessageChannel& MessageChannel::operator=(MessageChannel&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
    buffer_ = std::move(other.buffer_);
    out_ = std::move(other.out_);
    out_sent_ = other.out_sent_;
    other.out_.clear();
    other.out_sent_ = 0;
    pending_fds_ = std::move(other.pending_fds_);
    queue_ = std::move(other.queue_);
    other.pending_fds_.clear();
    other.queue_.clear();
  }
  return *this;
}

void MessageChannel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  for (int fd : pending_fds_) ::close(fd);
  pending_fds_.clear();
  for (auto& r : queue_) {
    if (r.fd >= 0) ::close(r.fd);
  }
  queue_.clear();
  buffer_.clear();
  out_.clear();
  out_sent_ = 0;
}

StatusOr<std::string> MessageChannel::encode(const nlohmann::json& message, bool carries_fd) {
  std::string body;
  try {
    body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot encode message: ") + e.what());
  }
  if (body.size() > kMaxFrameBytes) return Status::error("message too large");
  std::string frame(4, '\0');
  // Bit 31 of the length word says "a descriptor travels with this frame", so that the
  // receiver pairs descriptors with their own frames however reads split or join them.
  const auto n = static_cast<uint32_t>(body.size()) | (carries_fd ? kFrameCarriesFd : 0u);
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return frame + body;
}

Status MessageChannel::post(const nlohmann::json& message) {
  if (fd_ < 0) return Status::error("channel is closed");
  StatusOr<std::string> frame = encode(message, false);
  if (!frame) return frame.status();
  if (unsent() + frame->size() > 2 * static_cast<size_t>(kMaxFrameBytes)) {
    return Status::error("peer not reading (too much unsent)");
  }
  if (out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
  }
  out_ += *frame;
  return flush();
}

Status MessageChannel::flush() {
  if (fd_ < 0) return Status::error("channel is closed");
  while (out_sent_ < out_.size()) {
    const ssize_t w = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      out_sent_ += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::ok();
    return Status::from_errno("send", errno);
  }
  return Status::ok();
}

Status MessageChannel::send(const nlohmann::json& message, int pass_fd, int timeout_ms) {
  if (fd_ < 0) return Status::error("channel is closed");
  StatusOr<std::string> encoded = encode(message, pass_fd >= 0);
  if (!encoded) return encoded.status();
  std::string& frame = *encoded;

  const int64_t deadline = steady_time_ms() + timeout_ms;
  size_t sent = 0;
  bool fd_sent = pass_fd < 0;
  while (sent < frame.size()) {
    iovec iov{frame.data() + sent, frame.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (!fd_sent) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
    }
    const ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      fd_sent = true;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int64_t left = deadline - steady_time_ms();
      if (left <= 0) return Status::error("send timed out (peer not reading)");
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left));
      continue;
    }
    return Status::from_errno("send", errno);
  }
  return Status::ok();
}

Status MessageChannel::read_available() {
  if (fd_ < 0) return Status::error("closed");
  char chunk[65536];
  for (;;) {
    iovec iov{chunk, sizeof(chunk)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t r = ::recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Status::from_errno("recv", errno);
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          pending_fds_.push_back(fd);
        }
      }
    }
    if (r == 0) {
      Status parsed = parse_frames();
      return parsed.is_ok() ? Status::error("closed") : parsed;
    }
    buffer_.append(chunk, static_cast<size_t>(r));
    if (buffer_.size() > kMaxFrameBytes + 4) break;  // parse before reading more
  }
  return parse_frames();
}

Status MessageChannel::parse_frames() {
  size_t offset = 0;
  Status result = Status::ok();
  while (buffer_.size() - offset >= 4) {
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) {
      n |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[offset + i])) << (8 * i);
    }
    const bool carries_fd = (n & kFrameCarriesFd) != 0;
    n &= ~kFrameCarriesFd;
    if (n > kMaxFrameBytes) {
      result = Status::error("frame of " + std::to_string(n) + " bytes exceeds the limit");
      buffer_.clear();
      return result;
    }
    if (buffer_.size() - offset - 4 < n) break;
    Received received;
    try {
      received.message = nlohmann::json::parse(buffer_.begin() + static_cast<long>(offset) + 4,
                                               buffer_.begin() + static_cast<long>(offset + 4 + n));
    } catch (const std::exception& e) {
      buffer_.clear();
      return Status::error(std::string("malformed message: ") + e.what());
    }
    if (carries_fd) {
      // The descriptor was sent with the frame's first byte, so it has arrived.
      if (pending_fds_.empty()) {
        buffer_.clear();
        return Status::error("frame announces a descriptor that did not arrive");
      }
      received.fd = pending_fds_.front();
      pending_fds_.erase(pending_fds_.begin());
    }
    queue_.push_back(std::move(received));
    offset += 4 + n;
  }
  buffer_.erase(0, offset);
  return result;
}

bool MessageChannel::pop(nlohmann::json* message, int* received_fd) {
  if (queue_.empty()) return false;
  Received r = std::move(queue_.front());
  queue_.pop_front();
  *message = std::move(r.message);
  if (received_fd != nullptr) {
    *received_fd = r.fd;
  } else if (r.fd >= 0) {
    ::close(r.fd);
  }
  return true;
}

StatusOr<nlohmann::json> MessageChannel::receive(int timeout_ms, int* received_fd) {
  const int64_t deadline = steady_time_ms() + timeout_ms;
  nlohmann::json message;
  for (;;) {
    if (pop(&message, received_fd)) return message;
    const int64_t left = deadline - steady_time_ms();
    if (left <= 0) return Status::error("timed out waiting for a message");
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno != EINTR) return Status::from_errno("poll", errno);
    if (rc > 0) {
      Status st = read_available();
      if (!st && !pop(&message, received_fd)) return st;
      if (!st) return message;
    }
  }
}

}  // namespace tensorscope
