#include "tensorscope/base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <exception>

#include "tensorscope/base/logging.h"
#include "tensorscope/base/posix_file.h"

namespace tensorscope {
namespace {

constexpr size_t kNameMax = 255;
std::atomic<uint64_t> g_temp_counter{0};

// An error Status with errno kept at `err`.
Status failure(std::string message, int err) {
  Status s = Status::error(std::move(message));
  errno = err;
  return s;
}

// Creates the temporary file: *temp names it once created.
Status create_temp(const std::string& dir, const std::string& base, const AtomicWriteOptions& options, UniqueFd* fd,
                   std::string* temp) {
  if (!options.fixed_temp_path.empty()) {
    fd->reset(
        ::open(options.fixed_temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, options.mode));
    if (!fd->valid()) return failure(options.fixed_temp_path + ": cannot create: " + errno_text(errno), errno);
    *temp = options.fixed_temp_path;
    return Status::ok();
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string prefix =
        options.temp_prefix + std::to_string(::getpid()) + "-" + std::to_string(g_temp_counter.fetch_add(1)) + "-";
    const size_t room = kNameMax > prefix.size() ? kNameMax - prefix.size() : 0;
    const std::string candidate = dir + prefix + base.substr(0, room);
    fd->reset(::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, options.mode));
    if (fd->valid()) {
      *temp = candidate;
      return Status::ok();
    }
    if (errno != EEXIST) return failure(candidate + ": cannot create: " + errno_text(errno), errno);
  }
  return failure(dir + base + ": cannot create a temporary file (all names taken)", EEXIST);
}

Status write_and_rename(const std::string& path, std::string_view head, std::string_view body,
                        const AtomicWriteOptions& options, std::string* temp) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") return failure(path + ": not a file path", EINVAL);
  UniqueFd fd;
  Status s = create_temp(dir, base, options, &fd, temp);
  if (!s) return s;
  s = write_all(fd.get(), head.data(), head.size(), *temp);
  if (s) s = write_all(fd.get(), body.data(), body.size(), *temp);
  if (s && ::fsync(fd.get()) != 0) s = failure(*temp + ": fsync failed: " + errno_text(errno), errno);
  if (!s) return s;
  s = fd.close(*temp);
  if (!s) return s;
  if (::rename(temp->c_str(), path.c_str()) != 0) {
    return failure("cannot rename " + *temp + " to " + path + ": " + errno_text(errno), errno);
  }
  temp->clear();  // renamed: nothing to remove any more
  if (options.sync_directory) {
    Status synced = fsync_path(dir.empty() ? "." : dir, /*directory=*/true);
    if (!synced) TS_LOG_WARN("{} is in place but may not last a crash: {}", path, synced.message());
  }
  return Status::ok();
}

}  // namespace

Status write_file_atomically(const std::string& path, std::string_view head, std::string_view body,
                             const AtomicWriteOptions& options) {
  std::string temp;
  Status s;
  int err = 0;
  try {
    s = write_and_rename(path, head, body, options, &temp);
    err = errno;
  } catch (const std::exception& e) {
    s = Status::error(path + ": cannot write: " + e.what());
    err = ENOMEM;
  }
  if (!s && !temp.empty()) ::unlink(temp.c_str());
  if (!s) errno = err;
  return s;
}

}  // namespace tensorscope
