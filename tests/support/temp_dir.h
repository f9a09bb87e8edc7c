// temp_dir.h — a unique private temporary directory for one test, removed afterwards.
//
// Used by unit and integration tests so that `ctest -j` runs never share a runtime
// directory, socket or segment name. Thread safety: one owner.
#pragma once

#include <stdlib.h>

#include <filesystem>
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
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tensorscope::testing
