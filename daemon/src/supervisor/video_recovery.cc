// video_recovery.cc — see video_recovery.h.
#include "supervisor/video_recovery.h"

#include <dirent.h>
#include <unistd.h>

#include "tensorscope/recording/file_naming.h"
#include "tensorscope/plotting/fmp4_scan.h"
#include "video_journal.h"

namespace tensorscope::daemon {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

}  // namespace

RecoveredVideos recover_temp_videos(const std::string& session_dir, const std::string& prefix) {
  RecoveredVideos out;
  const std::vector<std::string> names = names_in(session_dir);
  for (const std::string& name : names) {
    if (name.compare(0, prefix.size(), prefix) != 0 || !ends_with(name, recording::kVideoExtension)) continue;
    StatusOr<IndexEntry> entry = recover_cut_video(session_dir, name);
    if (entry.is_ok()) {
      out.entries.push_back(entry.value());
    } else {
      out.failures.push_back(entry.message());
    }
  }
  for (const std::string& name : names) {  // journals whose video was never made or is gone
    if (name.compare(0, prefix.size(), prefix) != 0 || !ends_with(name, kJournalSuffix)) continue;
    const std::string path = session_dir + "/" + name;
    if (::access(path.c_str(), F_OK) == 0 && ::unlink(path.c_str()) == 0) ++out.journals_removed;
  }
  return out;
}

std::vector<IndexEntry> unlisted_videos(const std::string& session_dir, const std::set<std::string>& listed) {
  std::vector<IndexEntry> out;
  for (const std::string& name : names_in(session_dir)) {
    if (name.empty() || name[0] == '.' || !ends_with(name, recording::kVideoExtension) || listed.count(name) > 0)
      continue;
    const std::string journal = kept_journal_path(session_dir, name);
    const plotting::Fmp4Extent extent = plotting::scan_fmp4(session_dir + "/" + name);
    if (!extent.valid || extent.frames <= 0) continue;
    StatusOr<IndexEntry> entry = read_video_journal(journal, extent.frames);
    if (!entry.is_ok() || entry.value().frames <= 0) continue;
    IndexEntry e = entry.value();
    e.path = name;
    out.push_back(e);
  }
  return out;
}

}  // namespace tensorscope::daemon
