#include "tensorscope/shared/file_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace tensorscope {

static_assert(EAGAIN == 11 && EACCES == 13, "lock_held_elsewhere() spells these numbers out");

int try_lock_file(int fd) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;  // the whole file, however long it grows
  return ::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

LockState lock_state(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return LockState::kUnknown;
  struct flock fl {};
  fl.l_type = F_WRLCK;  // would an exclusive lock conflict with anyone's?
  fl.l_whence = SEEK_SET;
  const int rc = ::fcntl(fd, F_OFD_GETLK, &fl);
  ::close(fd);
  if (rc != 0) return LockState::kUnknown;
  return fl.l_type == F_UNLCK ? LockState::kFree : LockState::kHeld;
}

}  // namespace tensorscope
