// append_file.h — AppendFile: a text file that a sink appends whole blocks to (the
// statistics table, the module tree log), each in a single write() with O_APPEND, so a
// killed worker loses at most the block it was writing.
//
// Used by a worker process's sink thread. Thread safety: one thread per AppendFile; two
// AppendFiles on one file keep whole blocks.
#pragma once

#include <string>
#include <string_view>

#include "tensorscope/base/status.h"

namespace tensorscope::recording {

class AppendFile {
 public:
  // Opens `path` for appending, creating it and its parent directories as needed. A new
  // or empty file gets `first_line` (+ '\n'). An existing file must start with exactly
  // that line, else an error (`what` names the kind of file, e.g. "stats table"; it is
  // another file and is left alone). If it does not end with a line break (a writer was
  // killed mid-line) one is added first, so new blocks start on a line of their own.
  static StatusOr<AppendFile> open(const std::string& path, const std::string& first_line, const std::string& what);

  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Writes `block` with a single write() (retried only for the rest of a short write).
  // Errors: I/O errors (disk full, ...), naming the file.
  Status append(std::string_view block);

  const std::string& path() const { return path_; }

 private:
  AppendFile() = default;

  std::string path_;
  int fd_ = -1;
};

}  // namespace tensorscope::recording
