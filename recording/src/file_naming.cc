// file_naming.cc — see file_naming.h.
#include "tensorscope/recording/file_naming.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "tensorscope/base/status.h"

namespace tensorscope::recording {
namespace {

constexpr std::size_t kHashSuffixLength = 9;  // "~" + 8 hex digits

bool is_safe(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

std::string hash_suffix(const std::string& name) {
  const uint64_t h = fnv1a_64(name);
  const auto folded = static_cast<uint32_t>(h ^ (h >> 32));
  char buf[16];
  std::snprintf(buf, sizeof(buf), "~%08x", static_cast<unsigned>(folded));
  return buf;
}

// The shared rule. `separator_safe` (device and mode) additionally breaks up "__" (the
// separator of video file names) and keeps '_' from leading, so that a video file name
// splits back into its parts from the right in exactly one way.
std::string sanitize_component(const std::string& name, std::size_t max_length, bool separator_safe) {
  std::string out;
  out.reserve(name.size() < max_length ? name.size() : max_length);
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    char safe = is_safe(c) ? ch : '_';
    if (separator_safe && safe == '_' && !out.empty() && out.back() == '_') safe = '-';
    out += safe;
    if (out.size() > max_length) break;  // will be truncated anyway; bound the work
  }
  if (out.empty()) out = "_";
  if (out[0] == '.' || out[0] == '-') out[0] = '_';
  if (separator_safe && out[0] == '_') out[0] = 'x';
  if (out == name && out.size() <= max_length) return out;
  // Changed or too long: keep a readable prefix and make it unique with the hash.
  const std::size_t keep = max_length - kHashSuffixLength;
  if (out.size() > keep) out.resize(keep);
  return out + hash_suffix(name);
}

}  // namespace

uint64_t fnv1a_64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string sanitize_stream_name(const std::string& name) {
  return sanitize_component(name, kMaxStreamComponentLength, false);
}

namespace {

// "<stream>__<device>__rank<rank>__pid<producer pid>__<mode>" (video_file_name's parts).
std::string stream_file_stem(const std::string& stream, const std::string& device, int rank, int64_t producer_pid,
                             const std::string& mode) {
  return sanitize_stream_name(stream) + "__" + sanitize_component(device, kMaxDeviceComponentLength, true) + "__rank" +
      std::to_string(rank) + "__pid" + std::to_string(producer_pid < 0 || producer_pid > INT32_MAX ? 0 : producer_pid) +
      "__" + sanitize_component(mode, kMaxModeComponentLength, true);
}

}  // namespace

std::string video_file_name(const std::string& stream, const std::string& device, int rank, int64_t producer_pid,
                            const std::string& mode, int segment) {
  TENSORSCOPE_CHECK(segment >= 0);
  char seg[16];
  std::snprintf(seg, sizeof(seg), "%04d", segment);
  return stream_file_stem(stream, device, rank, producer_pid, mode) + "__" + seg + kVideoExtension;
}

std::string separation_table_path(const std::string& stream, const std::string& device, int rank, int64_t producer_pid,
                                  const std::string& mode) {
  return "separation/" + stream_file_stem(stream, device, rank, producer_pid, mode) + ".csv";
}

std::string npy_dump_path(const std::string& stream, int64_t step, int rank) {
  return "dumps/step_" + std::to_string(step) + "/" + sanitize_stream_name(stream) + "_rank" + std::to_string(rank) +
      ".npy";
}

std::string npy_labels_path(const std::string& stream, int64_t step, int rank) {
  std::string path = npy_dump_path(stream, step, rank);
  return path.insert(path.size() - 4, ".labels");
}

std::string temp_video_file_name(const std::string& final_name, int worker_pid, uint64_t producer_id) {
  std::string out =
      std::string(kTempVideoPrefix) + std::to_string(worker_pid) + "-" + std::to_string(producer_id) + "-" + final_name;
  const std::string ext = kVideoExtension;
  if (out.size() < ext.size() || out.compare(out.size() - ext.size(), ext.size(), ext) != 0) out += ext;
  return out;
}

}  // namespace tensorscope::recording
