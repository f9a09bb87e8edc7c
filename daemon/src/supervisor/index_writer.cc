// index_writer.cc — see index_writer.h.
#include "supervisor/index_writer.h"

#include "tensorscope/base/atomic_file.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/base/text_input.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <utility>

namespace tensorscope::daemon {
namespace {

constexpr int kMaxCorruptCopies = 10000;

// The index document as ordered JSON: keys in the documented order, files by path.
std::string render_index(const std::map<std::string, IndexEntry>& entries) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& [path, e] : entries) {
    nlohmann::ordered_json f;
    f["path"] = e.path;
    f["stream"] = e.stream;
    f["kind"] = e.kind;
    f["device"] = e.device;
    f["rank"] = e.rank;
    f["pid"] = e.pid;
    f["mode"] = e.mode;
    f["frames"] = e.frames;
    f["first_step"] = e.first_step;
    f["last_step"] = e.last_step;
    files.push_back(std::move(f));
  }
  nlohmann::ordered_json doc;
  doc["files"] = std::move(files);
  // Stream names come from the training process and may not be valid UTF-8: replace
  // bad bytes with U+FFFD rather than throw.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

IndexWriter::IndexWriter(std::string session_dir) : session_dir_(std::move(session_dir)) {}

std::string IndexWriter::index_path() const {
  if (session_dir_.empty()) return kIndexFileName;
  return session_dir_ + "/" + kIndexFileName;
}

std::vector<IndexEntry> IndexWriter::entries() const {
  std::vector<IndexEntry> out;
  out.reserve(entries_.size());
  for (const auto& [path, e] : entries_) out.push_back(e);
  return out;
}

Status IndexWriter::load() {
  try {
    const std::string path = index_path();
    bool missing = false;
    StatusOr<std::string> text = read_text_file(path, recording::kMaxIndexBytes, "index file", &missing);
    if (!text.is_ok()) return text.status();
    last_corrupt_path_.clear();
    entries_.clear();
    if (missing) return Status::ok();

    // Parse and check everything before touching entries_.
    std::string problem;
    std::map<std::string, IndexEntry> loaded;
    StatusOr<std::vector<IndexEntry>> parsed = recording::parse_index(*text);
    if (parsed) {
      for (IndexEntry& e : *parsed) loaded[e.path] = std::move(e);
    } else {
      problem = parsed.message();
    }
    if (problem.empty()) {
      entries_ = std::move(loaded);
      return Status::ok();
    }

    // Corrupt: keep it for inspection under a free name, and start empty.
    for (int n = 1; n <= kMaxCorruptCopies; ++n) {
      const std::string target = path + ".corrupt-" + std::to_string(n);
      struct stat st {};
      if (::lstat(target.c_str(), &st) == 0) continue;
      if (const int err = errno; err != ENOENT) return Status::error(target + ": cannot check: " + errno_text(err));
      if (::rename(path.c_str(), target.c_str()) != 0) {
        const int err = errno;
        return Status::error(path + " is corrupt (" + problem + ") and cannot be moved to " + target + ": " +
                             errno_text(err));
      }
      last_corrupt_path_ = target;
      spdlog::warn("tensorscope: {} is corrupt ({}); moved it to {} and starting a new index", path, problem, target);
      return Status::ok();
    }
    return Status::error(path + " is corrupt (" + problem + ") and " + std::to_string(kMaxCorruptCopies) +
                         " corrupt copies already exist; remove them");
  } catch (const std::exception& e) {
    return Status::error(index_path() + ": cannot load: " + e.what());
  } catch (...) {
    return Status::error(index_path() + ": cannot load: unknown error");
  }
}

Status IndexWriter::add(const IndexEntry& entry) {
  Status staged = stage(entry);
  if (!staged.is_ok()) return staged;
  return write();
}

Status IndexWriter::stage(const IndexEntry& entry) {
  try {
    // Same checks as for an entry that arrives as JSON.
    StatusOr<IndexEntry> checked = index_entry_from_json(to_json(entry));
    if (!checked.is_ok()) return checked.status();
    entries_[entry.path] = entry;
    return Status::ok();
  } catch (const std::exception& e) {
    return Status::error(index_path() + ": cannot add entry: " + e.what());
  }
}

size_t IndexWriter::forget_missing_files() {
  size_t gone = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    struct stat st {};
    if (::stat((session_dir_ + "/" + it->first).c_str(), &st) != 0 && errno == ENOENT) {
      it = entries_.erase(it);
      ++gone;
    } else {
      ++it;
    }
  }
  return gone;
}

Status IndexWriter::write() {
  try {
    const std::string path = index_path();
    const std::string text = render_index(entries_);

    last_errno_ = 0;
    AtomicWriteOptions options;
    options.fixed_temp_path = path + ".tmp";  // one writer: a crash's leftover is replaced
    Status written = write_file_atomically(path, text, {}, options);
    if (!written) last_errno_ = errno;
    return written;
  } catch (const std::exception& e) {
    return Status::error(index_path() + ": cannot write: " + e.what());
  }
}

}  // namespace tensorscope::daemon
