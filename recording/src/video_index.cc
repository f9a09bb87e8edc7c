// video_index.cc — see video_index.h.
#include "tensorscope/recording/video_index.h"

#include <exception>
#include <limits>
#include <utility>

#include "tensorscope/base/text_input.h"

namespace tensorscope::recording {
namespace {

constexpr std::size_t kMaxPathLength = 4096;

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
    std::string range = lo == std::numeric_limits<int64_t>::min()
        ? "a 64-bit integer"
        : "an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
    if (lo == 0 && hi == std::numeric_limits<int64_t>::max()) range = "an integer >= 0";
    return field_error(key, "expected " + range + ", got " + describe(*it));
  }
  *out = v;
  return Status::ok();
}

}  // namespace

Status validate_index_path(const std::string& path) {
  try {
    if (path.empty()) return Status::error("index entry: path: is empty");
    if (path.size() > kMaxPathLength)
      return Status::error("index entry: path: longer than " + std::to_string(kMaxPathLength) + " bytes");
    if (path.find('\0') != std::string::npos) return Status::error("index entry: path: contains a NUL byte");
    if (path.find('\\') != std::string::npos) return Status::error("index entry: path: contains a backslash");
    if (path[0] == '/')
      return Status::error("index entry: path: must be relative to the session dir, got \"" + path + "\"");
    std::size_t start = 0;
    while (true) {
      const std::size_t slash = path.find('/', start);
      const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
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
  return nlohmann::json{{"path", e.path},          {"stream", e.stream}, {"kind", e.kind},
                        {"device", e.device},      {"rank", e.rank},     {"pid", e.pid},
                        {"mode", e.mode},          {"frames", e.frames}, {"first_step", e.first_step},
                        {"last_step", e.last_step}};
}

StatusOr<IndexEntry> index_entry_from_json(const nlohmann::json& json) {
  try {
    if (!json.is_object()) return Status::error("index entry: expected an object, got " + describe(json));
    IndexEntry e;
    int64_t rank = 0;
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    for (Status s :
         {get_string(json, "path", &e.path), get_string(json, "stream", &e.stream),
          get_string(json, "device", &e.device), get_string(json, "kind", &e.kind), get_string(json, "mode", &e.mode),
          get_int(json, "rank", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &rank),
          get_int(json, "frames", 0, kMax, &e.frames), get_int(json, "first_step", kMin, kMax, &e.first_step),
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

StatusOr<std::vector<IndexEntry>> parse_index(const std::string& text) {
  try {
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Status::error("not valid JSON");
    if (!doc.is_object() || !doc.contains("files") || !doc["files"].is_array()) {
      return Status::error("expected an object with a \"files\" array");
    }
    std::vector<IndexEntry> entries;
    std::size_t i = 0;
    for (const nlohmann::json& f : doc["files"]) {
      StatusOr<IndexEntry> e = index_entry_from_json(f);
      if (!e.is_ok()) return Status::error("files[" + std::to_string(i) + "]: " + e.message());
      entries.push_back(std::move(*e));
      ++i;
    }
    return entries;
  } catch (const std::exception& e) {
    return Status::error(e.what());
  }
}

StatusOr<std::vector<IndexEntry>> read_index(const std::string& session_dir, bool* missing) {
  const std::string path = session_dir + "/" + kIndexFileName;
  bool absent = false;
  StatusOr<std::string> text = read_text_file(path, kMaxIndexBytes, "index file", &absent);
  if (missing != nullptr) *missing = absent;
  if (!text.is_ok()) return text.status();
  if (absent) return std::vector<IndexEntry>{};
  auto entries = parse_index(*text);
  if (!entries) return Status::error(path + ": " + entries.message());
  return entries;
}

}  // namespace tensorscope::recording
