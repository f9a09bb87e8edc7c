// fuzz_message_channel.cc — bytes a peer writes on the control socket (message_channel.h):
// framing, lengths, the descriptor bit, and the JSON of each frame.
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "tensorscope/shared/message_channel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) return 0;
  size_t sent = 0;
  tensorscope::MessageChannel reader(fds[0]);
  while (sent < size) {  // in pieces: frames split across reads
    const ssize_t n = ::send(fds[1], data + sent, std::min<size_t>(size - sent, 4096), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
    (void)reader.read_available();
    nlohmann::json message;
    int fd = -1;
    while (reader.pop(&message, &fd)) {
      if (fd >= 0) ::close(fd);
    }
  }
  ::close(fds[1]);
  (void)reader.read_available();  // EOF
  return 0;
}
