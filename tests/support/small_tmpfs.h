// small_tmpfs.h — a tmpfs of a chosen size mounted on a fresh temporary directory, for
// tests of a runtime directory too small for a segment (Docker's 64 MiB /dev/shm).
//
// Used by unit and integration tests. Mounting needs CAP_SYS_ADMIN (root in CI); where it
// is refused, mounted() is false and why() says so, and the test skips. Unmounted (lazily)
// and removed by the destructor. Thread safety: one owner.
#pragma once

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "temp_dir.h"

namespace tensorscope::testing {

class SmallTmpfs {
 public:
  explicit SmallTmpfs(const std::string& size) : dir_("ts-tmpfs") {
    path_ = dir_.path() + "/mnt";
    ::mkdir(path_.c_str(), 0700);
    const std::string data = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = std::string("cannot mount a tmpfs here (") + std::strerror(errno) + "); needs CAP_SYS_ADMIN";
    }
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
  bool mounted_ = false;
  std::string why_;
};

}  // namespace tensorscope::testing
