// posix_path.h — path helpers on plain POSIX calls (mkdir -p, absolute and canonical
// paths) for the code that runs inside training processes: base, shared and the client.
//
// Why not std::filesystem there: PyTorch's pip wheels export libstdc++'s std::filesystem
// functions from libtorch.so (built against another libstdc++), and a program linked with
// libtorch binds its own calls to those copies; std::filesystem::remove_all crashed in
// one (a call through a null pointer, libtorch 2.11). These helpers cannot bind there.
// The daemon and the tools, which never load libtorch, may use std::filesystem.
// Thread safety: free functions without shared state (absolute_path reads the working
// directory at the call).
#pragma once

#include <string>

#include "tensorscope/base/status.h"

namespace tensorscope {

// Creates `path` and its missing parents (mode 0777 before the umask), like mkdir -p.
// Ok when it already is a directory.
Status make_directories(const std::string& path);

// `path` with "." and empty components removed and "name/.." pairs folded, lexically
// (no symbolic link is read): "/a/./b//../c/" -> "/a/c", "x/../.." -> "..", "" -> ".".
std::string normalized_path(const std::string& path);

// `path` made absolute against the working directory, then normalized_path.
std::string absolute_path(const std::string& path);

// realpath(path) when it resolves, else absolute_path(path).
std::string resolved_path(const std::string& path);

// The directory part of `path` ("/a/b" -> "/a", "b" -> ".", "/b" -> "/").
std::string parent_path(const std::string& path);

// `path` as one word of a POSIX shell command line: as it is when it is made only of
// letters, digits and "_./-+,:@%=" (and is not empty), else in single quotes ("it's" ->
// 'it'\''s').
std::string shell_word(const std::string& path);

}  // namespace tensorscope
