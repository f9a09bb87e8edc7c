// video_journal.cc — see video_journal.h.
#include "video_journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensorscope/recording/file_naming.h"
#include "tensorscope/plotting/fmp4_scan.h"
#include "tensorscope/base/posix_file.h"

namespace tensorscope::daemon {
namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Moves the journal at `from` to kept_journal_path(session_dir, video_name).
Status move_to_steps(const std::string& from, const std::string& session_dir, const std::string& video_name) {
  const std::string dir = session_dir + "/" + kStepsDirName;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::from_errno("cannot create " + dir, errno);
  if (::rename(from.c_str(), kept_journal_path(session_dir, video_name).c_str()) != 0) {
    return Status::from_errno("cannot move " + from, errno);
  }
  return Status::ok();
}

}  // namespace

Status VideoJournal::create(const std::string& video_path, const IndexEntry& meta) {
  close();
  path_ = video_path + kJournalSuffix;
  file_ = std::fopen(path_.c_str(), "we");
  if (file_ == nullptr) return Status::from_errno("cannot create " + path_, errno);
  const nlohmann::json header = {{"stream", meta.stream}, {"kind", meta.kind}, {"device", meta.device},
                                 {"rank", meta.rank},     {"pid", meta.pid},   {"mode", meta.mode}};
  const std::string text = std::string(recording::kStepsMagic) + "\n" +
      header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fputs(text.c_str(), file_) < 0 || std::fflush(file_) != 0) {
    return Status::from_errno("cannot write " + path_, errno);
  }
  return Status::ok();
}

Status VideoJournal::append(int64_t step) {
  if (path_.empty()) return Status::error("video journal not created");
  if (file_ == nullptr) {
    file_ = std::fopen(path_.c_str(), "ae");
    if (file_ == nullptr) return Status::from_errno("cannot reopen " + path_, errno);
  }
  if (std::fprintf(file_, "%lld\n", static_cast<long long>(step)) < 0 || std::fflush(file_) != 0) {
    return Status::from_errno("cannot write " + path_, errno);
  }
  return Status::ok();
}

void VideoJournal::close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

Status VideoJournal::keep(const std::string& session_dir, const std::string& final_path) {
  close();
  if (path_.empty()) return Status::ok();
  Status moved = move_to_steps(path_, session_dir, base_name(final_path));
  if (moved) path_.clear();
  return moved;
}

void VideoJournal::remove() {
  close();
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
}

StatusOr<IndexEntry> read_video_journal(const std::string& journal_path, int64_t max_frames) {
  StatusOr<recording::VideoSteps> read = recording::read_video_steps(journal_path, max_frames);
  if (!read) return read.status();
  return read->meta;
}

std::string final_name_of_temp(const std::string& temp_name) {
  // ".tmp-" <worker pid> "-" <producer id> "-" <final name>
  const std::string prefix = recording::kTempVideoPrefix;
  if (temp_name.compare(0, prefix.size(), prefix) != 0) return {};
  size_t at = prefix.size();
  for (int field = 0; field < 2; ++field) {
    const size_t dash = temp_name.find('-', at);
    if (dash == std::string::npos || dash == at) return {};
    for (size_t i = at; i < dash; ++i) {
      if (temp_name[i] < '0' || temp_name[i] > '9') return {};
    }
    at = dash + 1;
  }
  return temp_name.substr(at);
}

StatusOr<IndexEntry> recover_cut_video(const std::string& session_dir, const std::string& temp_name) {
  const std::string video = session_dir + "/" + temp_name;
  const std::string journal_path = video + kJournalSuffix;
  auto discard = [&](const std::string& why) -> StatusOr<IndexEntry> {
    ::unlink(video.c_str());
    ::unlink(journal_path.c_str());
    return Status::error(temp_name + ": " + why);
  };
  const std::string final_name = final_name_of_temp(temp_name);
  if (final_name.empty()) return discard("not a temporary video name");
  const plotting::Fmp4Extent extent = plotting::scan_fmp4(video);
  if (!extent.valid || extent.frames <= 0) {
    return discard(extent.valid ? "no whole frame" : "no video header (" + extent.error + ")");
  }
  StatusOr<IndexEntry> read = read_video_journal(journal_path, extent.frames);
  if (!read.is_ok()) return discard(read.message());
  IndexEntry entry = read.value();
  if (entry.frames <= 0) return discard("its journal lists no frame");
  // A frame is journaled after it is written: a crash in between leaves the journal one
  // behind, and the file keeps the frames the journal describes.
  const plotting::Fmp4Extent kept = entry.frames < extent.frames ? plotting::scan_fmp4(video, entry.frames) : extent;
  if (kept.frames != entry.frames) return discard("its frames and its journal disagree");
  if (kept.whole_bytes < kept.file_bytes && ::truncate(video.c_str(), static_cast<off_t>(kept.whole_bytes)) != 0) {
    return discard(std::string("cannot cut it to its whole frames: ") + errno_text(errno));
  }
  StatusOr<std::string> used = rename_to_free_name(video, session_dir + "/" + final_name);
  if (!used.is_ok()) return discard(used.message());
  entry.path = base_name(*used);
  if (!move_to_steps(journal_path, session_dir, entry.path)) ::unlink(journal_path.c_str());
  return entry;
}

}  // namespace tensorscope::daemon
