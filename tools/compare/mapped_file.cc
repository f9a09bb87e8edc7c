#include "compare/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>

namespace tensorscope::compare {
namespace {

// A pointer, trivially initialised: reading it in the signal handler runs no TLS wrapper.
thread_local sigjmp_buf* t_bus_error_target = nullptr;
struct sigaction g_previous_action;

void on_bus_error(int, siginfo_t*, void*) {
  if (sigjmp_buf* target = t_bus_error_target) siglongjmp(*target, 1);
  // Not under a guard on this thread: the action that was there before takes the fault
  // when the instruction runs again.
  sigaction(SIGBUS, &g_previous_action, nullptr);
}

}  // namespace

namespace detail {

sigjmp_buf*& bus_error_target() { return t_bus_error_target; }

void install_bus_error_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous_action);
  });
}

}  // namespace detail

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  MappedFile file;
  file.path_ = path;
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd_ < 0) return Status::from_errno(path + ": cannot open it", errno);
  struct stat st {};
  if (::fstat(file.fd_, &st) != 0) return Status::from_errno(path + ": cannot stat it", errno);
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ == 0) return file;
  void* data = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, file.fd_, 0);
  if (data == MAP_FAILED) return Status::from_errno(path + ": cannot map it", errno);
  ::madvise(data, file.size_, MADV_SEQUENTIAL);
  file.data_ = static_cast<const unsigned char*>(data);
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    MappedFile old(std::move(*this));  // unmapped and closed when it goes
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

Status shrank_while_compared(const std::string& name) {
  return Status::error(name + ": the file became shorter while it was compared (changed by another process?)");
}

bool MappedFile::shrunk() const {
  struct stat st {};
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) < size_;
}

}  // namespace tensorscope::compare
