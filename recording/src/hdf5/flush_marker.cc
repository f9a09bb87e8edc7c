// flush_marker.cc — see flush_marker.h.
#include "hdf5/flush_marker.h"

#include <cstring>

#include "hdf5/hash.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/hdf5_sink.h"

namespace tensorscope::recording::hdf5 {
namespace {

constexpr uint64_t kRecordFixedBytes = 32;  // magic, generation, count; checksum
static_assert((kSlotBytes - kRecordFixedBytes) / 16 == kHdf5RecordGroups);
static_assert(kHeaderBytes <= kHeaderSpan);
constexpr char kHeaderMagic[8] = {'T', 'S', 'H', '5', 'F', 'L', 'S', 'H'};
constexpr char kRecordMagic[8] = {'T', 'S', 'H', '5', 'R', 'E', 'C', 'D'};

void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads `n` bytes at `offset`; false when fewer are there.
bool read_marker(int fd, uint64_t offset, unsigned char* out, size_t n) {
  return pread_exact(fd, out, n, offset, "").is_ok();
}

}  // namespace

uint64_t name_hash(const std::string& name) { return hash_bytes(name.data(), name.size()); }

uint64_t group_digest(const std::vector<GroupRows>& groups) {
  uint64_t digest = 0;
  for (const GroupRows& g : groups) {
    unsigned char bytes[16];
    put_u64(bytes, g.name_hash);
    put_u64(bytes + 8, g.rows);
    digest += hash_bytes(bytes, sizeof(bytes));
  }
  return digest;
}

std::vector<unsigned char> encode_header(const FlushHeader& h) {
  std::vector<unsigned char> b(kHeaderBytes, 0);
  std::memcpy(b.data(), kHeaderMagic, 8);
  put_u32(&b[8], kMarkerVersion);
  put_u32(&b[12], static_cast<uint32_t>(h.state));
  put_u64(&b[16], h.generation);
  put_u64(&b[24], h.completed);
  put_u32(&b[32], h.record_slot);
  put_u32(&b[36], h.record_complete ? 1 : 0);
  put_u64(&b[40], h.groups);
  put_u64(&b[48], h.digest);
  put_u64(&b[56], hash_bytes(b.data(), 56));
  return b;
}

uint64_t slot_offset(uint32_t slot) { return kHeaderSpan + slot * kSlotBytes; }

std::vector<unsigned char> encode_record(uint64_t generation, const std::vector<GroupRows>& groups) {
  std::vector<unsigned char> b(24 + 16 * groups.size() + 8, 0);
  std::memcpy(b.data(), kRecordMagic, 8);
  put_u64(&b[8], generation);
  put_u64(&b[16], groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    put_u64(&b[24 + 16 * i], groups[i].name_hash);
    put_u64(&b[32 + 16 * i], groups[i].rows);
  }
  put_u64(&b[b.size() - 8], hash_bytes(b.data(), b.size() - 8));
  return b;
}

Status write_marker(int fd, const std::string& path, uint64_t offset, const std::vector<unsigned char>& bytes) {
  Status s = pwrite_all(fd, bytes.data(), bytes.size(), offset, path);
  if (!s) return Status::error(s.message() + " (the flush marker)");
  return s;
}

Markers read_markers(int fd) {
  Markers m;
  unsigned char b[kHeaderBytes];
  if (!read_marker(fd, 0, b, sizeof(b)) || std::memcmp(b, kHeaderMagic, 8) != 0) return m;
  m.kind = Markers::Kind::kDamaged;
  if (get_u64(&b[56]) != hash_bytes(b, 56)) {
    m.problem = "its flush marker is damaged";
    return m;
  }
  const uint32_t state = get_u32(&b[12]);
  if (get_u32(&b[8]) != kMarkerVersion || state < static_cast<uint32_t>(MarkState::kCreated) ||
      state > static_cast<uint32_t>(MarkState::kFlushed)) {
    m.problem = "its flush marker is of an unknown version";
    return m;
  }
  FlushHeader& h = m.header;
  h.state = static_cast<MarkState>(state);
  h.generation = get_u64(&b[16]);
  h.completed = get_u64(&b[24]);
  h.record_slot = get_u32(&b[32]);
  h.record_complete = get_u32(&b[36]) != 0;
  h.groups = get_u64(&b[40]);
  h.digest = get_u64(&b[48]);
  if (h.record_slot > 1 || (h.state == MarkState::kFlushed && h.generation != h.completed)) {
    m.problem = "its flush marker is inconsistent";
    return m;
  }
  m.kind = Markers::Kind::kUsable;
  if (h.completed == 0 || !h.record_complete) return m;
  // The record, written before the header that names it.
  const uint64_t at = slot_offset(h.record_slot);
  unsigned char head[24] = {};
  const uint64_t count = read_marker(fd, at, head, sizeof(head)) ? get_u64(&head[16]) : 0;
  if (std::memcmp(head, kRecordMagic, 8) != 0 || get_u64(&head[8]) != h.completed || count != h.groups ||
      count > kHdf5RecordGroups) {
    m.kind = Markers::Kind::kDamaged;
    m.problem = "the record of its last flush is damaged";
    return m;
  }
  std::vector<unsigned char> bytes(24 + 16 * count + 8);
  if (!read_marker(fd, at, bytes.data(), bytes.size()) ||
      get_u64(&bytes[bytes.size() - 8]) != hash_bytes(bytes.data(), bytes.size() - 8)) {
    m.kind = Markers::Kind::kDamaged;
    m.problem = "the record of its last flush is damaged";
    return m;
  }
  for (uint64_t i = 0; i < count; ++i) {
    m.record[get_u64(&bytes[24 + 16 * i])] = get_u64(&bytes[32 + 16 * i]);
  }
  m.has_record = m.record.size() == count;  // distinct names (no hash collision)
  return m;
}

bool matches_markers(const std::vector<std::pair<std::string, uint64_t>>& rows, const Markers& m) {
  std::vector<GroupRows> groups;
  for (const auto& [name, n] : rows) groups.push_back({name_hash(name), n});
  if (groups.size() != m.header.groups || group_digest(groups) != m.header.digest) return false;
  if (!m.has_record) return true;
  for (const GroupRows& g : groups) {
    auto it = m.record.find(g.name_hash);
    if (it == m.record.end() || it->second != g.rows) return false;
  }
  return true;
}

}  // namespace tensorscope::recording::hdf5
