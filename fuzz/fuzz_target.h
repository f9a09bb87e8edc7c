// fuzz_target.h — the entry point every fuzz target defines (libFuzzer's), and the
// helpers they share.
//
// Built two ways (fuzz/CMakeLists.txt): with clang and -fsanitize=fuzzer for real fuzzing
// (scripts/fuzz.sh), and with the project's compiler against replay_main.cc, which runs a
// target over its corpus and a fixed number of seeded mutations: the short run the test
// suite does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tensorscope::fuzz {

inline std::string as_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A private directory (mode 0700) for the target's files; lives as long as the process.
const std::string& private_dir();

// A private file (mode 0600) holding `bytes`, rewritten by each call; for readers that
// take a path. The path lives as long as the process.
std::string file_with(const std::string& bytes, const char* suffix);
// private_dir()/`relative` holding `bytes` (its directories must exist); its path.
std::string file_at(const std::string& relative, const std::string& bytes);

}  // namespace tensorscope::fuzz
