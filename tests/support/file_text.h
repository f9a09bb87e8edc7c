// file_text.h — a test's small files as text: written whole, read whole (nothing when the
// file cannot be read).
//
// Used by the unit tests that set up or check a file's bytes (renames, videos, tables).
// Thread safety: free functions without shared state.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

namespace tensorscope::testing {

// Writes `content` to `path` (replacing it); returns `path`.
inline std::string write_text_file(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// The whole content of `path`; "" when it cannot be read.
inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace tensorscope::testing
