// tensorboard_events.cc — see tensorboard_events.h.
#include "tensorscope/recording/tensorboard_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

#include "tensorscope/base/posix_path.h"

namespace tensorscope::recording {
namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protocol buffer pieces: a field's key, a varint, a length-delimited field.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void key(std::string& out, int field, int wire_type) { varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
void bytes_field(std::string& out, int field, std::string_view data) {
  key(out, field, 2);
  varint(out, data.size());
  out.append(data);
}
template <typename T>
void fixed(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // (little-endian hosts only: x86-64, aarch64)
  out.append(b, sizeof(T));
}
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  key(e, 1, 1);
  fixed(e, wall_time);
  key(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  return e;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = kCrc32cTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view record) {
  std::string out;
  fixed(out, static_cast<uint64_t>(record.size()));
  fixed(out, masked_crc32c(std::string_view(out.data(), 8)));
  out.append(record);
  fixed(out, masked_crc32c(record));
  return out;
}

std::string event_file_version(double wall_time) {
  std::string e;
  key(e, 1, 1);
  fixed(e, wall_time);
  bytes_field(e, 3, "brain.Event:2");
  return e;
}

std::string event_scalars(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    bytes_field(v, 1, tag);
    key(v, 2, 5);
    fixed(v, value);
    bytes_field(summary, 1, v);
  }
  std::string e = event_head(wall_time, step);
  bytes_field(e, 5, summary);
  return e;
}

std::string event_text(double wall_time, int64_t step, const std::string& tag, const std::string& markdown) {
  std::string plugin, metadata, tensor, value, summary;
  bytes_field(plugin, 1, "text");
  bytes_field(metadata, 1, plugin);
  key(tensor, 1, 0);
  varint(tensor, 7);           // DT_STRING
  bytes_field(tensor, 2, "");  // a scalar: no dimensions
  bytes_field(tensor, 8, markdown);
  bytes_field(value, 1, tag);
  bytes_field(value, 8, tensor);
  bytes_field(value, 9, metadata);
  bytes_field(summary, 1, value);
  std::string e = event_head(wall_time, step);
  bytes_field(e, 5, summary);
  return e;
}

StatusOr<TensorBoardEvents> TensorBoardEvents::create(const std::string& run_dir, double wall_time) {
  if (Status made = make_directories(run_dir); !made) return made;
  char host[256] = "localhost";
  (void)::gethostname(host, sizeof(host) - 1);
  static std::atomic<int> made_here{0};  // two files of one process in one second: apart
  const int n = made_here.fetch_add(1);
  const std::string path = run_dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time)) + "." +
      host + "." + std::to_string(::getpid()) + (n > 0 ? "." + std::to_string(n) : "");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return Status::error("cannot create " + path + ": " + std::strerror(errno));
  TensorBoardEvents events(std::move(fd), path);
  if (Status first = events.append({event_file_version(wall_time)}); !first) return first;
  return events;
}

Status TensorBoardEvents::append(const std::vector<std::string>& events) {
  std::string block;
  for (const std::string& e : events) block += tfrecord(e);
  return write_all(fd_.get(), block, path_);
}

}  // namespace tensorscope::recording
