// message_channel.h — framed JSON messages over a Unix stream socket, with optional
// file-descriptor passing, and the socket helpers around it.
//
// Used for the control protocol: client <-> supervisor (registration, status) and
// supervisor <-> worker (attach, detach, heartbeat, finished files). A frame is a
// 4-byte little-endian length word followed by that many bytes of JSON (at most
// kMaxFrameBytes); bit 31 of the length word marks a frame that carries one file
// descriptor (SCM_RIGHTS, sent with the frame's first byte). Everything received is untrusted: a bad frame is an error Status,
// never an exception or a crash.
// Thread safety: one MessageChannel per connection, used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/base/status.h"

namespace tensorscope {

inline constexpr uint32_t kMaxFrameBytes = 8u << 20;
inline constexpr uint32_t kFrameCarriesFd = 1u << 31;

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

StatusOr<PeerCredentials> peer_credentials(int fd);

// Binds and listens on `path` with mode 0600. A stale socket file (nobody accepts on
// it) is replaced; a live one is an error ("already running"). The socket is bound and
// listening under a hidden name in the same directory and then renamed to `path`, so
// `path` never names a socket that refuses connections (clients watching the directory
// connect the moment it appears). Callers that may race for `path` hold a lock first
// (the daemon's session lock).
StatusOr<int> listen_unix(const std::string& path);
// Connects to `path` (a non-blocking socket); fails at once, without retrying, when
// nobody listens or the listener's backlog is full. *error_number gets connect's errno
// (ECONNREFUSED or ENOENT: nobody listens; EAGAIN: a listener that does not keep up).
StatusOr<int> connect_unix(const std::string& path, int* error_number = nullptr);

class MessageChannel {
 public:
  MessageChannel() = default;
  explicit MessageChannel(int fd) : fd_(fd) {}
  ~MessageChannel();
  MessageChannel(MessageChannel&& other) noexcept;
  MessageChannel& operator=(MessageChannel&& other) noexcept;
  MessageChannel(const MessageChannel&) = delete;
  MessageChannel& operator=(const MessageChannel&) = delete;

  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  void close();

  // Sends one message (and `pass_fd` as SCM_RIGHTS when >= 0), waiting at most
  // `timeout_ms` for socket buffer space.
  Status send(const nlohmann::json& message, int pass_fd = -1, int timeout_ms = 2000);

  // Never blocks: queues one message (no descriptor) and writes what the socket takes
  // now; flush() writes more when the socket is writable again. For peers that may not
  // read (status requests from any local process): the caller drops a channel whose
  // unsent() stays above zero too long. An error when the queue would pass
  // kMaxFrameBytes * 2 or the socket failed.
  Status post(const nlohmann::json& message);
  Status flush();
  size_t unsent() const { return out_.size() - out_sent_; }

  // Reads whatever is available without blocking; complete messages are queued.
  // Returns an error on EOF (message "closed") or a malformed frame.
  Status read_available();

  // Pops one queued message. A file descriptor that came with it is stored in
  // *received_fd (else -1); the caller owns it.
  bool pop(nlohmann::json* message, int* received_fd = nullptr);

  // Waits up to `timeout_ms` for one message.
  StatusOr<nlohmann::json> receive(int timeout_ms, int* received_fd = nullptr);

 private:
  struct Received {
    nlohmann::json message;
    int fd = -1;
  };
  Status parse_frames();

  static StatusOr<std::string> encode(const nlohmann::json& message, bool carries_fd);

  int fd_ = -1;
  std::string out_;      // post()ed bytes
  size_t out_sent_ = 0;  // of out_, written already
  std::string buffer_;
  std::vector<int> pending_fds_;
  std::deque<Received> queue_;
};

}  // namespace tensorscope
