// dir_listing.h — the sorted entry names of a directory, for tests that check which
// files a writer left behind.
//
// Used by unit tests. Thread safety: a pure function.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tensorscope::testing {

// Names in `dir` without "." and "..", sorted; empty when it cannot be read.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tensorscope::testing
