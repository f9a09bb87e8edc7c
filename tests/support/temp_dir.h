// temp_dir.h — a unique private temporary directory for one test, removed afterwards.
//
// Used by unit and integration tests so that `ctest -j` runs never share a runtime
// directory, socket or segment name. Removed with nftw, not std::filesystem: tests that
// link libtorch would bind std::filesystem to the copies libtorch 2.x wheels export
// (tensorscope/base/posix_path.h). Thread safety: one owner.
#pragma once

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>

namespace tensorscope::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "ts") {
    std::string pattern = "/tmp/" + tag + "-XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    auto remove = [](const char* path, const struct stat*, int, struct FTW*) {
      (void)::remove(path);  // what cannot be removed stays; the rest goes
      return 0;
    };
    if (!path_.empty()) ::nftw(path_.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tensorscope::testing
