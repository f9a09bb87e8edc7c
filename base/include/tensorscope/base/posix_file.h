// posix_file.h — the POSIX file helpers every part needs: errno as text, an owned
// descriptor, whole writes and reads that survive EINTR and short transfers, fsync of
// a directory, whether a path still names an open file, and renames that never replace
// an existing file (to a free "<stem>-N<ext>" name if need be).
//
// Used by the daemon (index, sinks, journals, videos: the plotting VideoWriter's
// finalize and the recovery of cut videos rename with them), the recording sinks and
// the tools. Errors are Status messages that name the file ("<path>: cannot write: No
// space left on device"); on every failure errno is left at the failing call's error
// (ENOSPC, EIO, ...) so a caller can tell a full disk from other failures; a read that
// ends early sets errno to 0.
// Thread safety: free functions without shared state; a UniqueFd has one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "tensorscope/base/status.h"

namespace tensorscope {

// strerror(err), thread-safe.
std::string errno_text(int err);

// Owns one file descriptor and closes it.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  bool valid() const { return fd_ >= 0; }
  int get() const { return fd_; }
  // Gives the descriptor up without closing it.
  int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and holds `fd`.
  void reset(int fd = -1);
  // Closes now; its error (e.g. a delayed write error on NFS) as "<what>: close failed".
  Status close(const std::string& what);

 private:
  int fd_ = -1;
};

// Writes all `bytes` at the file position. Errors: "<path>: cannot write: <errno>".
Status write_all(int fd, const void* data, size_t bytes, const std::string& path);
inline Status write_all(int fd, std::string_view data, const std::string& path) {
  return write_all(fd, data.data(), data.size(), path);
}
// Writes all `bytes` at `offset`. Errors as write_all.
Status pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path);

// Reads up to `bytes` at `offset`, stopping early only at the end of the file; the
// count read. Errors: "<path>: cannot read: <errno>".
StatusOr<size_t> pread_full(int fd, void* dst, size_t bytes, uint64_t offset, const std::string& path);
// Reads exactly `bytes` at `offset`. Errors: those of pread_full, and "<path>: cannot
// read: the file ends at byte N, before byte M" (errno 0).
Status pread_exact(int fd, void* dst, size_t bytes, uint64_t offset, const std::string& path);

// fsync of `path` (a file, or a directory to make the names in it durable). Errors:
// "<path>: cannot open for fsync: ..." / "<path>: fsync failed: ...".
Status fsync_path(const std::string& path, bool directory);

// Whether `path` (a final symbolic link not followed) names the file open as `fd`: the
// same device and inode. False when either cannot be examined (e.g. `path` was removed).
bool is_same_file(int fd, const std::string& path);

// Renames `from` to `to` only if `to` does not exist (renameat2 RENAME_NOREPLACE, or
// link()+unlink() where the filesystem lacks it). Errors: "'<to>' exists" (then
// *exists is set, errno EEXIST), "rename '<from>' -> '<to>': <errno>", "link '<from>'
// -> '<to>': <errno>" (*exists set when that errno is EEXIST). *exists (optional) is
// cleared otherwise.
Status rename_no_replace(const std::string& from, const std::string& to, bool* exists = nullptr);

// Renames `from` to `to`, or, when that name exists, to "<stem>-1<ext>", "<stem>-2<ext>",
// ... (never replacing a file; at most 100000 names are tried; the extension is the last
// '.' of the file name, not a leading one as in ".hidden"): the name used. Errors:
// rename_no_replace's for the last name tried.
StatusOr<std::string> rename_to_free_name(const std::string& from, const std::string& to);

}  // namespace tensorscope
