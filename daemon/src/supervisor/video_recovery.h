// video_recovery.h — finding the videos a killed worker or daemon left behind.
//
// recover_temp_videos: the temporary videos of a worker that died (or, at start, of any
// earlier worker: the session lock is ours) become finished, listed videos with their
// real frame count (video_journal.h, recover_cut_video). unlisted_videos: finished
// videos that index.json does not list (the supervisor was killed before it wrote them
// down) are described again from their journals in steps/.
//
// Used by the supervisor. Thread safety: free functions over a directory.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "supervisor/index_writer.h"

namespace tensorscope::daemon {

struct RecoveredVideos {
  std::vector<IndexEntry> entries;    // to list in index.json
  std::vector<std::string> failures;  // "<file>: why" for the files that were deleted
  int journals_removed = 0;           // journals whose video was gone
};

// Every temporary video in `session_dir` whose name starts with `prefix`
// (".tmp-<worker pid>-", or ".tmp-" for all), and orphan journals with that prefix.
RecoveredVideos recover_temp_videos(const std::string& session_dir, const std::string& prefix);

// Finished videos in `session_dir` not in `listed` (paths) that have a journal.
std::vector<IndexEntry> unlisted_videos(const std::string& session_dir, const std::set<std::string>& listed);

}  // namespace tensorscope::daemon
