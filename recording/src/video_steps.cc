// video_steps.cc — see video_steps.h.
#include "tensorscope/recording/video_steps.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace tensorscope::recording {
namespace {

constexpr size_t kMaxLineBytes = 4096;

}  // namespace

std::string kept_steps_path(const std::string& session_dir, const std::string& video_name) {
  return session_dir + "/" + kStepsDirName + "/" + video_name + kStepsSuffix;
}

StatusOr<VideoSteps> read_video_steps(const std::string& journal_path, int64_t max_frames) {
  std::ifstream in(journal_path, std::ios::binary);
  if (!in) return Status::error("cannot open " + journal_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t end_magic = text.find('\n');
  if (end_magic == std::string::npos || text.compare(0, end_magic, kStepsMagic) != 0) {
    return Status::error(journal_path + ": not a video steps file");
  }
  const size_t end_header = text.find('\n', end_magic + 1);
  if (end_header == std::string::npos || end_header - end_magic > kMaxLineBytes) {
    return Status::error(journal_path + ": no header line");
  }
  nlohmann::json header = nlohmann::json::parse(text.substr(end_magic + 1, end_header - end_magic - 1), nullptr,
                                                /*allow_exceptions=*/false);
  if (!header.is_object()) return Status::error(journal_path + ": the header line is not a JSON object");
  header["path"] = "pending.mp4";  // index_entry_from_json checks every field; the path is set later
  header["frames"] = 0;
  header["first_step"] = 0;
  header["last_step"] = 0;
  StatusOr<IndexEntry> entry = index_entry_from_json(header);
  if (!entry.is_ok()) return Status::error(journal_path + ": " + entry.message());
  VideoSteps out;
  IndexEntry& e = out.meta;
  e = entry.value();
  e.path.clear();
  size_t at = end_header + 1;
  while (e.frames < max_frames) {
    const size_t newline = text.find('\n', at);
    if (newline == std::string::npos) break;  // a last line cut by a crash
    const std::string line = text.substr(at, newline - at);
    at = newline + 1;
    char* end = nullptr;
    errno = 0;
    const long long step = std::strtoll(line.c_str(), &end, 10);
    if (line.empty() || errno != 0 || end != line.c_str() + line.size()) {
      return Status::error(journal_path + ": line " + std::to_string(e.frames + 3) + " is not a step");
    }
    if (e.frames == 0) e.first_step = step;
    e.last_step = step;
    ++e.frames;
    out.steps.push_back(step);
  }
  return out;
}

}  // namespace tensorscope::recording
