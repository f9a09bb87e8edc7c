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

constexpr std::size_t kMaxPathLength = 4096;
constexpr int kMaxCorruptCopies = 10000;


// index.json of a very long run with many streams stays far below this.
constexpr std::size_t kMaxIndexBytes = std::size_t{256} << 20;

std::string describe(const nlohmann::json& j) {
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  constexpr std::size_t kMaxShown = 80;
  if (s.size() > kMaxShown) s = s.substr(0, kMaxShown) + "...";
  return s;
}

Status field_error(const std::string& key, const std::string& problem) {
  return Status::error("index entry: " + key + ": " + problem);
}

Status get_string(const nlohmann::json& j, const char* key, std::string* out) {
  const auto it = j.find(key);
  if (it == j.end()) return field_error(key, "missing");
  if (!it->is_string()) return field_error(key, "expected a string, got " + describe(*it));
  *out = it->get<std::string>();
  return Status::ok();
}

Status get_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const auto it = j.find(key);
  if (it == j.end()) return field_error(key, "missing");
  bool ok = false;
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    ok = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    v = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    ok = true;
    v = it->get<int64_t>();
  }
  if (!ok || v < lo || v > hi) {
    std::string range =
        lo == std::numeric_limits<int64_t>::min()
            ? "a 64-bit integer"
            : "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (lo == 0 && hi == std::numeric_limits<int64_t>::max()) range = "an integer >= 0";
    return field_error(key, "expected " + range + ", got " + describe(*it));
  }
  *out = v;
  return Status::ok();
}

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

Status validate_index_path(const std::string& path) {
  try {
    if (path.empty()) return Status::error("index entry: path: is empty");
    if (path.size() > kMaxPathLength)
      return Status::error("index entry: path: longer than " + std::to_string(kMaxPathLength) +
                           " bytes");
    if (path.find('\0') != std::string::npos)
      return Status::error("index entry: path: contains a NUL byte");
    if (path.find('\\') != std::string::npos)
      return Status::error("index entry: path: contains a backslash");
    if (path[0] == '/')
      return Status::error("index entry: path: must be relative to the session dir, got \"" + path +
                           "\"");
    std::size_t start = 0;
    while (true) {
      const std::size_t slash = path.find('/', start);
      const std::string part =
          path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (part.empty() || part == "." || part == "..")
        return Status::error(
            "index entry: path: must stay inside the session dir (no empty, "
            "\".\" or \"..\" component), got " +
            describe(nlohmann::json(path)));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    return Status::ok();
  } catch (const std::exception& e) {
    return Status::error(std::string("index entry: path: ") + e.what());
  }
}

nlohmann::json to_json(const IndexEntry& e) {
  return nlohmann::json{{"path", e.path},          {"stream", e.stream},
                        {"kind", e.kind},          {"device", e.device},
                        {"rank", e.rank},          {"pid", e.pid},
                        {"mode", e.mode},
                        {"frames", e.frames},      {"first_step", e.first_step},
                        {"last_step", e.last_step}};
}

StatusOr<IndexEntry> index_entry_from_json(const nlohmann::json& json) {
  try {
    if (!json.is_object())
      return Status::error("index entry: expected an object, got " + describe(json));
    IndexEntry e;
    int64_t rank = 0;
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    for (Status s :
         {get_string(json, "path", &e.path), get_string(json, "stream", &e.stream),
          get_string(json, "device", &e.device), get_string(json, "kind", &e.kind),
          get_string(json, "mode", &e.mode),
          get_int(json, "rank", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                  &rank),
          get_int(json, "frames", 0, kMax, &e.frames),
          get_int(json, "first_step", kMin, kMax, &e.first_step),
          get_int(json, "last_step", kMin, kMax, &e.last_step), validate_index_path(e.path)}) {
      if (!s.is_ok()) return s;
    }
    e.rank = static_cast<int>(rank);
    if (json.contains("pid")) {
      if (Status s = get_int(json, "pid", 0, kMax, &e.pid); !s.is_ok()) return s;
    }
    return e;
  } catch (const std::exception& ex) {
    return Status::error(std::string("index entry: ") + ex.what());
  } catch (...) {
    return Status::error("index entry: unknown error");
  }
}

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
    StatusOr<std::string> text = read_text_file(path, kMaxIndexBytes, "index file", &missing);
    if (!text.is_ok()) return text.status();
    last_corrupt_path_.clear();
    entries_.clear();
    if (missing) return Status::ok();

    // Parse and check everything before touching entries_.
    std::string problem;
    std::map<std::string, IndexEntry> loaded;
    const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      problem = "not valid JSON";
    } else if (!doc.is_object() || !doc.contains("files") || !doc["files"].is_array()) {
      problem = "expected an object with a \"files\" array";
    } else {
      std::size_t i = 0;
      for (const nlohmann::json& f : doc["files"]) {
        StatusOr<IndexEntry> e = index_entry_from_json(f);
        if (!e.is_ok()) {
          problem = "files[" + std::to_string(i) + "]: " + e.message();
          break;
        }
        loaded[e->path] = std::move(*e);
        ++i;
      }
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
      if (const int err = errno; err != ENOENT)
        return Status::error(target + ": cannot check: " + errno_text(err));
      if (::rename(path.c_str(), target.c_str()) != 0) {
        const int err = errno;
        return Status::error(path + " is corrupt (" + problem + ") and cannot be moved to " +
                             target + ": " + errno_text(err));
      }
      last_corrupt_path_ = target;
      spdlog::warn("tensorscope: {} is corrupt ({}); moved it to {} and starting a new index", path,
                   problem, target);
      return Status::ok();
    }
    return Status::error(path + " is corrupt (" + problem + ") and " +
                         std::to_string(kMaxCorruptCopies) +
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
