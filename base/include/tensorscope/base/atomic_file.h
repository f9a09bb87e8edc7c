// atomic_file.h — replacing a file so that a reader, or the file system after a crash,
// sees the old contents or the new ones, never a mix.
//
// Used for index.json, run_info.json and the .npy dumps. The data is written to a new
// temporary file in the same directory (name: <temp_prefix><pid>-<n>-<file name>, cut to
// the file system's name limit, created with O_EXCL), fsynced, closed, renamed over the
// target, and the directory is fsynced so the rename lasts too. On failure the temporary
// file is removed, the target is untouched and errno holds the failing call's error.
// Thread safety: concurrent calls are safe (the temporary names differ).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "tensorscope/base/status.h"

namespace tensorscope {

struct AtomicWriteOptions {
  mode_t mode = 0644;  // before the umask, as open(2) takes it
  // Leftovers of a crash carry this prefix (readers of the directory skip it).
  std::string temp_prefix = ".tmp-";
  // When set, the temporary file is exactly this path (in the target's directory),
  // truncated if it exists: for a file with a single writer (index.json), whose
  // leftover after a crash the next write then replaces instead of adding another.
  std::string fixed_temp_path;
  // A directory fsync that fails after the rename is logged as a warning, not an error:
  // the new contents are in place.
  bool sync_directory = true;
};

// Replaces `path` by `data` (two pieces, written one after the other: a header and a
// payload need not be joined). Errors name the temporary file or the target.
Status write_file_atomically(const std::string& path, std::string_view head, std::string_view body = {},
                             const AtomicWriteOptions& options = {});

}  // namespace tensorscope
