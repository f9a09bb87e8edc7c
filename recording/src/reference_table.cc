// reference_table.cc — see reference_table.h.
#include "tensorscope/recording/reference_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/output_dir.h"

namespace tensorscope::recording {
namespace {

// A line longer than this is no table's (stream names are at most 127 bytes).
constexpr size_t kMaxLineBytes = 64 * 1024;
// Read from the file at a time.
constexpr size_t kChunkBytes = 256 * 1024;

}  // namespace

std::string reference_table_for_rank(const std::string& reference, int rank) {
  std::string best;
  int64_t best_mtime_ns = INT64_MIN;
  for (const std::string& session : session_dirs_under(reference)) {
    const std::string dir = session + "/summaries";
    std::unique_ptr<DIR, int (*)(DIR*)> listing(::opendir(dir.c_str()), &::closedir);
    if (!listing) continue;
    while (const dirent* e = ::readdir(listing.get())) {
      int r = -1;
      int64_t pid = 0;
      if (!parse_summary_table_name(e->d_name, &r, &pid) || r != rank) continue;
      const std::string path = dir + "/" + e->d_name;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      if (mtime_ns > best_mtime_ns || (mtime_ns == best_mtime_ns && path < best)) {
        best_mtime_ns = mtime_ns;
        best = path;
      }
    }
  }
  return best;
}

Status ReferenceTable::open() {
  UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return Status::from_errno("cannot open " + path_, errno);
  if (fd_.valid()) {  // replaced (compacted): what was read before is skipped in the new file
    ++reopened_;
    skip_upto_ = last_step_;
  }
  fd_ = std::move(fd);
  ino_ = static_cast<uint64_t>(st.st_ino);
  offset_ = 0;
  buffer_.clear();
  taken_ = 0;
  return Status::ok();
}

Status ReferenceTable::read(int64_t keep_from, int64_t stop_after, uint64_t max_bytes) {
  at_end_ = false;
  if (!fd_.valid()) {
    if (Status st = open(); !st) return st;
  }
  for (uint64_t read_now = 0;;) {
    const size_t nl = buffer_.find('\n', taken_);
    if (nl != std::string::npos) {
      const std::string_view line(buffer_.data() + taken_, nl - taken_);
      taken_ = nl + 1;
      if (!take_line(line, keep_from, stop_after)) return Status::ok();
      continue;
    }
    // No whole line left: more of the file (a line still being written waits for its end).
    if (read_now >= max_bytes) return Status::ok();
    if (buffer_.size() - taken_ > kMaxLineBytes) {
      ++bad_lines_;
      taken_ = buffer_.size();
    }
    buffer_.erase(0, taken_);
    taken_ = 0;
    const size_t had = buffer_.size();
    buffer_.resize(had + kChunkBytes);
    auto got = pread_full(fd_.get(), buffer_.data() + had, kChunkBytes, offset_, path_);
    buffer_.resize(had + (got ? *got : 0));
    if (!got) return got.status();
    offset_ += *got;
    read_now += *got;
    if (*got == 0) {
      // At the end of this file: replaced by a compaction meanwhile? Then the new one.
      struct stat st {};
      if (::stat(path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_ino) != ino_) {
        if (Status opened = open(); !opened) return opened;
        continue;
      }
      at_end_ = true;
      return Status::ok();
    }
  }
}

bool ReferenceTable::take_line(std::string_view line, int64_t keep_from, int64_t stop_after) {
  SummaryTableRow row;
  if (!parse_summary_table_line(line, &row)) {
    if (!is_summary_table_header(line)) ++bad_lines_;
    return true;
  }
  if (row.steps != 1) {
    ++compacted_;
    return true;
  }
  if (skip_upto_ != kNoStep && row.step <= skip_upto_) return true;
  skip_upto_ = kNoStep;
  last_step_ = std::max(last_step_, row.step);
  int64_t& track_last = track_last_.try_emplace(row.track, kNoStep).first->second;
  track_last = std::max(track_last, row.step);
  if (row.step >= keep_from) {
    std::string name = row.summary.name;
    steps_[row.step][row.track][name].push_back(std::move(row.summary));
    ++rows_kept_;
  }
  return row.step <= stop_after;
}

const ReferenceTable::Group* ReferenceTable::group(int64_t step, const std::string& track) const {
  const auto s = steps_.find(step);
  if (s == steps_.end()) return nullptr;
  const auto t = s->second.find(track);
  return t == s->second.end() ? nullptr : &t->second;
}

void ReferenceTable::forget_before(int64_t step) {
  for (auto it = steps_.begin(); it != steps_.end() && it->first < step; it = steps_.erase(it)) {
    for (const auto& [track, group] : it->second) {
      for (const auto& [stream, rows] : group) rows_kept_ -= rows.size();
    }
  }
}

int64_t ReferenceTable::last_step(const std::string& track) const {
  const auto it = track_last_.find(track);
  return it == track_last_.end() ? kNoStep : it->second;
}

}  // namespace tensorscope::recording
