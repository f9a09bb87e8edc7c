#include "compare/hdf5_reader_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <utility>

namespace tensorscope::compare {
namespace {

using Clock = std::chrono::steady_clock;

enum Op : uint8_t { kList = 1, kRead = 2 };
// A reply larger than this is taken as a broken child (a listing of ~10 million rows).
constexpr uint64_t kMaxReplyBytes = uint64_t{4} << 30;

class Packer {
 public:
  void u8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void u64(uint64_t v) { bytes_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(const std::string& s) {
    u64(s.size());
    bytes_ += s;
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// Bounds-checked reading; after the first short read every value is zero and ok() false.
class Unpacker {
 public:
  explicit Unpacker(const std::string& bytes) : bytes_(bytes) {}
  uint8_t u8() {
    if (!take(1)) return 0;
    return static_cast<uint8_t>(bytes_[pos_ - 1]);
  }
  uint64_t u64() {
    uint64_t v = 0;
    if (take(sizeof v)) std::memcpy(&v, bytes_.data() + pos_ - sizeof v, sizeof v);
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str() {
    const uint64_t n = u64();
    if (!take(n)) return std::string();
    return bytes_.substr(pos_ - n, n);
  }
  bool ok() const { return ok_; }

 private:
  bool take(uint64_t n) {
    if (!ok_ || n > bytes_.size() - pos_) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  const std::string& bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void pack_tensor(Packer& p, const Hdf5Tensor& t) {
  p.str(t.group);
  p.str(t.stream);
  p.u64(t.row);
  p.i64(t.step);
  p.i64(t.rank);
  p.u8(static_cast<uint8_t>(t.dtype));
  p.u64(t.shape.size());
  for (int64_t d : t.shape) p.i64(d);
}

Hdf5Tensor unpack_tensor(Unpacker& u, const std::string& file) {
  Hdf5Tensor t;
  t.file = file;
  t.group = u.str();
  t.stream = u.str();
  t.row = u.u64();
  t.step = u.i64();
  t.rank = static_cast<int>(u.i64());
  t.dtype = static_cast<wire::DType>(u.u8());
  const uint64_t ndims = u.u64();
  for (uint64_t i = 0; i < ndims && u.ok(); ++i) t.shape.push_back(u.i64());
  return t;
}

// Bytes of `count` slices of t along its first dimension; 0 when it overflows.
uint64_t slice_bytes(const Hdf5Tensor& t, uint64_t count) {
  uint64_t n = wire::dtype_size(t.dtype);
  const auto times = [&n](uint64_t k) {
    if (k != 0 && n > std::numeric_limits<uint64_t>::max() / k) return false;
    n *= k;
    return true;
  };
  if (!times(count)) return 0;
  for (size_t d = 1; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0 || !times(static_cast<uint64_t>(t.shape[d]))) return 0;
  }
  return n;
}

enum class Io { kOk, kTimeout, kClosed, kError };

// Waits for `events` on fd until `deadline` (Clock::time_point::max(): forever).
Io wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    int wait_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return Io::kTimeout;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r > 0) return Io::kOk;
    if (r < 0 && errno != EINTR) return Io::kError;
  }
}

Io send_all(int fd, const char* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const Io ready = wait_for(fd, POLLOUT, deadline);
    if (ready != Io::kOk) return ready;
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == EPIPE || errno == ECONNRESET ? Io::kClosed : Io::kError;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Io::kOk;
}

Io receive_all(int fd, char* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const Io ready = wait_for(fd, POLLIN, deadline);
    if (ready != Io::kOk) return ready;
    const ssize_t r = ::recv(fd, data, n, MSG_DONTWAIT);
    if (r == 0) return Io::kClosed;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == ECONNRESET ? Io::kClosed : Io::kError;
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Io::kOk;
}

// One message: its length (8 bytes), then its bytes.
Io send_message(int fd, const std::string& message, Clock::time_point deadline) {
  const uint64_t n = message.size();
  const Io head = send_all(fd, reinterpret_cast<const char*>(&n), sizeof n, deadline);
  return head != Io::kOk ? head : send_all(fd, message.data(), message.size(), deadline);
}

Io receive_message(int fd, std::string* message, Clock::time_point deadline) {
  uint64_t n = 0;
  const Io head = receive_all(fd, reinterpret_cast<char*>(&n), sizeof n, deadline);
  if (head != Io::kOk) return head;
  if (n > kMaxReplyBytes) return Io::kError;
  message->resize(n);
  return receive_all(fd, message->data(), n, deadline);
}

std::string reply_error(const std::string& message) {
  Packer p;
  p.u8(0);
  p.str(message);
  return std::move(p.bytes());
}

std::string serve_one(const std::string& request, Hdf5RowReader& reader) {
  Unpacker in(request);
  const uint8_t op = in.u8();
  const std::string file = in.str();
  if (op == kList && in.ok()) {
    reader.close();
    auto tensors = list_recording(file);
    if (!tensors) return reply_error(tensors.message());
    Packer out;
    out.u8(1);
    out.u64(tensors->size());
    for (const Hdf5Tensor& t : *tensors) pack_tensor(out, t);
    return std::move(out.bytes());
  }
  if (op == kRead && in.ok()) {
    const Hdf5Tensor tensor = unpack_tensor(in, file);
    const uint64_t first = in.u64();
    const uint64_t count = in.u64();
    const uint64_t bytes = slice_bytes(tensor, count);
    if (!in.ok() || bytes == 0 || bytes > kMaxReplyBytes) return reply_error(file + ": bad read request");
    Packer out;
    out.u8(1);
    out.u64(bytes);
    const size_t at = out.bytes().size();
    out.bytes().resize(at + bytes);
    Status read = reader.read(tensor, first, count, reinterpret_cast<unsigned char*>(out.bytes().data() + at));
    if (!read) return reply_error(read.message());
    return std::move(out.bytes());
  }
  return reply_error("bad request to the HDF5 reader");
}

[[noreturn]] void serve(int fd) {
  Hdf5RowReader reader;
  std::string request;
  while (receive_message(fd, &request, Clock::time_point::max()) == Io::kOk) {
    std::string reply;
    try {
      reply = serve_one(request, reader);
    } catch (const std::bad_alloc&) {
      reply = reply_error("out of memory in the HDF5 reader");
    }
    if (send_message(fd, reply, Clock::time_point::max()) != Io::kOk) break;
  }
  ::_exit(0);
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + ", " + ::strsignal(WTERMSIG(status));
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

}  // namespace

Hdf5ReaderProcess::Hdf5ReaderProcess(std::chrono::milliseconds timeout) : timeout_(timeout) {}

Hdf5ReaderProcess::~Hdf5ReaderProcess() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop();
}

Hdf5ReaderProcess& Hdf5ReaderProcess::shared() {
  static Hdf5ReaderProcess* const process = new Hdf5ReaderProcess();
  return *process;
}

void Hdf5ReaderProcess::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

pid_t Hdf5ReaderProcess::child_pid() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pid_;
}

Status Hdf5ReaderProcess::start() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::from_errno("cannot start the HDF5 reader: socketpair", errno);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::from_errno("cannot start the HDF5 reader: fork", err);
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    // Only the socket (as descriptor 3) and the standard streams stay open.
    if (fds[1] != 3 && ::dup2(fds[1], 3) != 3) ::_exit(1);
    ::close_range(4, ~0U, 0);
    serve(3);
  }
  ::close(fds[1]);
  pid_ = pid;
  fd_ = fds[0];
  return Status::ok();
}

void Hdf5ReaderProcess::stop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {}
  }
  pid_ = 0;
}

StatusOr<std::string> Hdf5ReaderProcess::call(const std::string& request, const std::string& file) {
  // A child that ended while idle (e.g. with the thread that started it) is replaced.
  if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = 0;
    stop();
  }
  if (pid_ == 0) {
    Status started = start();
    if (!started) return started;
  }
  const Clock::time_point deadline = Clock::now() + timeout_;
  std::string reply;
  Io io = send_message(fd_, request, deadline);
  if (io == Io::kOk) io = receive_message(fd_, &reply, deadline);
  if (io == Io::kOk) return reply;
  if (io == Io::kTimeout) {
    stop();
    return Status::error("libhdf5 did not finish reading " + file + " in " + seconds_text(timeout_) +
                         " (the file is probably corrupt); its reader process was stopped");
  }
  std::string how = "stopped";
  if (io == Io::kClosed && pid_ > 0) {
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {}
    if (r == pid_) {
      how = describe_exit(status);
      pid_ = 0;
    }
  }
  stop();
  return Status::error("the HDF5 reader process " + how + " while reading " + file + " (the file is probably corrupt)");
}

StatusOr<std::vector<Hdf5Tensor>> Hdf5ReaderProcess::list(const std::string& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  Packer request;
  request.u8(kList);
  request.str(file);
  auto reply = call(request.bytes(), file);
  if (!reply) return reply.status();
  Unpacker in(*reply);
  if (in.u8() != 1) {
    std::string message = in.str();
    return Status::error(in.ok() ? message : file + ": bad reply from the HDF5 reader");
  }
  const uint64_t n = in.u64();
  std::vector<Hdf5Tensor> tensors;
  for (uint64_t i = 0; i < n && in.ok(); ++i) tensors.push_back(unpack_tensor(in, file));
  if (!in.ok()) return Status::error(file + ": bad reply from the HDF5 reader");
  return tensors;
}

Status Hdf5ReaderProcess::read(const Hdf5Tensor& tensor, uint64_t first, uint64_t count, unsigned char* out,
                               size_t out_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Packer request;
  request.u8(kRead);
  request.str(tensor.file);
  pack_tensor(request, tensor);
  request.u64(first);
  request.u64(count);
  auto reply = call(request.bytes(), tensor.file);
  if (!reply) return reply.status();
  Unpacker in(*reply);
  if (in.u8() != 1) {
    std::string message = in.str();
    return Status::error(in.ok() ? message : tensor.file + ": bad reply from the HDF5 reader");
  }
  const std::string bytes = in.str();
  if (!in.ok() || bytes.size() != out_bytes) {
    return Status::error(tensor.file + ": the HDF5 reader returned " + std::to_string(bytes.size()) + " bytes, " +
                         std::to_string(out_bytes) + " were asked for");
  }
  std::memcpy(out, bytes.data(), bytes.size());
  return Status::ok();
}

}  // namespace tensorscope::compare
