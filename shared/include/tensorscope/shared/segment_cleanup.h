// segment_cleanup.h — removes the shared-memory segments that dead producers left in
// the runtime directory (a training process and its daemon killed together).
//
// Used by the daemon at start and by the client at start: whoever finds a leftover
// first removes it. A producer holds an OFD lock (file_lock.h) on its segment from the
// moment the file exists until it closes it or dies, so a segment whose lock is free
// and whose producer pid (in its name) no longer runs is garbage. A segment that is
// locked, or whose pid runs (a live producer of an older version without the lock,
// or a reused pid), is left alone: the check errs on the side of keeping.
// Thread safety: free function without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorscope {

struct SegmentCleanup {
  std::vector<std::string> removed;  // file names
  uint64_t bytes = 0;                // their sizes in all
};

// Scans `runtime_dir` (every session) for segment files ("<session>.<pid>.<gen>.seg",
// and ".<same>.creating" of a producer that died while creating one) and removes those
// of dead producers. Never throws; a directory that cannot be read removes nothing.
SegmentCleanup remove_dead_segments(const std::string& runtime_dir);

}  // namespace tensorscope
