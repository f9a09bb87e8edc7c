// hdf5_flush_marker_test.cc — the flush marker codec of HDF5 recordings: the header's
// and the record's bytes (a file format: little-endian, magic, checksums), read back as
// written, every damage caught (checksum, version, state, slot, generation, count), no
// header at all told apart from a damaged one, and the check of a file's groups against
// the last completed flush (by record, or by digest alone when there is no record).
#include "hdf5/flush_marker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/hdf5_sink.h"

namespace tensorscope::recording::hdf5 {
namespace {

using Rows = std::vector<std::pair<std::string, uint64_t>>;

uint64_t u64_at(const std::vector<unsigned char>& b, size_t at) {
  uint64_t v = 0;
  for (size_t i = 8; i-- > 0;) v = (v << 8) | b[at + i];
  return v;
}

std::vector<GroupRows> groups_of(const Rows& rows) {
  std::vector<GroupRows> groups;
  for (const auto& [name, n] : rows) groups.push_back({name_hash(name), n});
  return groups;
}

// A file holding marker bytes, as the user block of a recording.
class MarkerFile {
 public:
  MarkerFile() : path_(dir_.path() + "/markers") {
    fd_.reset(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  }
  void write(uint64_t offset, const std::vector<unsigned char>& bytes) {
    ASSERT_TRUE(write_marker(fd_.get(), path_, offset, bytes));
  }
  // Header "flushed" of flush `generation`, with its record in `slot`.
  void write_flushed(uint64_t generation, uint32_t slot, const Rows& rows) {
    FlushHeader h;
    h.state = MarkState::kFlushed;
    h.generation = generation;
    h.completed = generation;
    h.record_slot = slot;
    h.record_complete = true;
    h.groups = rows.size();
    h.digest = group_digest(groups_of(rows));
    write(slot_offset(slot), encode_record(generation, groups_of(rows)));
    write(0, encode_header(h));
  }
  void flip(uint64_t offset) {
    unsigned char c = 0;
    ASSERT_TRUE(pread_exact(fd_.get(), &c, 1, offset, path_));
    c ^= 0x01;
    ASSERT_TRUE(pwrite_all(fd_.get(), &c, 1, offset, path_));
  }
  Markers read() const { return read_markers(fd_.get()); }

 private:
  testing::TempDir dir_{"flush-marker"};
  std::string path_;
  UniqueFd fd_;
};

TEST(Hdf5FlushMarker, HeaderBytes) {
  FlushHeader h;
  h.state = MarkState::kFlushing;
  h.generation = 7;
  h.completed = 6;
  h.record_slot = 1;
  h.record_complete = true;
  h.groups = 3;
  h.digest = 0x0102030405060708ULL;
  const std::vector<unsigned char> b = encode_header(h);
  ASSERT_EQ(b.size(), kHeaderBytes);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "TSH5FLSH");
  EXPECT_EQ(b[8], kMarkerVersion);
  EXPECT_EQ(b[12], 2);  // flushing
  EXPECT_EQ(u64_at(b, 16), 7u);
  EXPECT_EQ(u64_at(b, 24), 6u);
  EXPECT_EQ(b[32], 1);
  EXPECT_EQ(b[36], 1);
  EXPECT_EQ(u64_at(b, 40), 3u);
  EXPECT_EQ(b[48], 0x08);  // little-endian
  EXPECT_EQ(b[55], 0x01);
}

TEST(Hdf5FlushMarker, RecordBytesAndSlots) {
  const std::vector<unsigned char> b = encode_record(5, {{11, 2}, {22, 4}});
  ASSERT_EQ(b.size(), 24u + 2 * 16 + 8);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "TSH5RECD");
  EXPECT_EQ(u64_at(b, 8), 5u);
  EXPECT_EQ(u64_at(b, 16), 2u);
  EXPECT_EQ(u64_at(b, 24), 11u);
  EXPECT_EQ(u64_at(b, 32), 2u);
  EXPECT_EQ(u64_at(b, 40), 22u);
  EXPECT_EQ(u64_at(b, 48), 4u);
  EXPECT_EQ(slot_offset(0), kHeaderSpan);
  EXPECT_EQ(slot_offset(1), kHeaderSpan + kSlotBytes);
  EXPECT_EQ(slot_offset(1) + kSlotBytes, kUserblockBytes);
  // The largest record fits its slot.
  EXPECT_LE(encode_record(1, std::vector<GroupRows>(kHdf5RecordGroups)).size(), kSlotBytes);
}

TEST(Hdf5FlushMarker, GroupDigestIgnoresOrderButNotRows) {
  const Rows rows = {{"a", 1}, {"b", 2}, {"c", 3}};
  const Rows reordered = {{"c", 3}, {"a", 1}, {"b", 2}};
  const Rows other = {{"a", 1}, {"b", 2}, {"c", 4}};
  EXPECT_EQ(group_digest(groups_of(rows)), group_digest(groups_of(reordered)));
  EXPECT_NE(group_digest(groups_of(rows)), group_digest(groups_of(other)));
  EXPECT_EQ(group_digest({}), 0u);
}

TEST(Hdf5FlushMarker, NoHeaderIsAbsent) {
  MarkerFile empty;
  EXPECT_EQ(empty.read().kind, Markers::Kind::kAbsent);
  MarkerFile foreign;
  foreign.write(0, std::vector<unsigned char>(kHeaderBytes, 'x'));
  EXPECT_EQ(foreign.read().kind, Markers::Kind::kAbsent);
}

TEST(Hdf5FlushMarker, CreatedHeaderReadsBack) {
  MarkerFile f;
  f.write(0, encode_header(FlushHeader{}));
  const Markers m = f.read();
  ASSERT_EQ(m.kind, Markers::Kind::kUsable) << m.problem;
  EXPECT_EQ(m.header.state, MarkState::kCreated);
  EXPECT_EQ(m.header.completed, 0u);
  EXPECT_FALSE(m.has_record);
}

TEST(Hdf5FlushMarker, FlushedHeaderAndRecordReadBack) {
  const Rows rows = {{"x", 10}, {"y@1", 3}};
  for (const uint32_t slot : {0u, 1u}) {
    MarkerFile f;
    f.write_flushed(4, slot, rows);
    const Markers m = f.read();
    ASSERT_EQ(m.kind, Markers::Kind::kUsable) << m.problem;
    EXPECT_EQ(m.header.state, MarkState::kFlushed);
    EXPECT_EQ(m.header.generation, 4u);
    EXPECT_EQ(m.header.completed, 4u);
    EXPECT_EQ(m.header.record_slot, slot);
    ASSERT_TRUE(m.has_record);
    EXPECT_EQ(m.record.size(), 2u);
    EXPECT_EQ(m.record.at(name_hash("x")), 10u);
    EXPECT_EQ(m.record.at(name_hash("y@1")), 3u);
    EXPECT_TRUE(matches_markers(rows, m));
    EXPECT_TRUE(matches_markers({{"y@1", 3}, {"x", 10}}, m));
    EXPECT_FALSE(matches_markers({{"x", 10}, {"y@1", 4}}, m));
    EXPECT_FALSE(matches_markers({{"x", 10}}, m));
    EXPECT_FALSE(matches_markers({{"x", 10}, {"z", 3}}, m));
  }
}

TEST(Hdf5FlushMarker, WithoutARecordTheDigestDecides) {
  const Rows rows = {{"x", 10}, {"y", 3}};
  MarkerFile f;
  FlushHeader h;
  h.state = MarkState::kFlushed;
  h.generation = h.completed = 2;
  h.record_complete = false;  // more groups than a record holds
  h.groups = rows.size();
  h.digest = group_digest(groups_of(rows));
  f.write(0, encode_header(h));
  const Markers m = f.read();
  ASSERT_EQ(m.kind, Markers::Kind::kUsable) << m.problem;
  EXPECT_FALSE(m.has_record);
  EXPECT_TRUE(matches_markers(rows, m));
  EXPECT_FALSE(matches_markers({{"x", 10}, {"y", 4}}, m));
}

TEST(Hdf5FlushMarker, FlushingHeaderNamesThePreviousRecord) {
  const Rows rows = {{"x", 10}};
  MarkerFile f;
  f.write_flushed(3, 1, rows);
  FlushHeader h = f.read().header;
  h.state = MarkState::kFlushing;
  h.generation = 4;
  f.write(0, encode_header(h));
  const Markers m = f.read();
  ASSERT_EQ(m.kind, Markers::Kind::kUsable) << m.problem;
  EXPECT_EQ(m.header.state, MarkState::kFlushing);
  EXPECT_EQ(m.header.completed, 3u);
  EXPECT_TRUE(m.has_record);
  EXPECT_TRUE(matches_markers(rows, m));
}

// The problem read_markers() finds in a file holding only `header` ("" when usable).
std::string problem_of(const FlushHeader& header) {
  MarkerFile f;
  f.write(0, encode_header(header));
  const Markers m = f.read();
  EXPECT_EQ(m.kind, m.problem.empty() ? Markers::Kind::kUsable : Markers::Kind::kDamaged);
  return m.problem;
}

TEST(Hdf5FlushMarker, DamagedHeadersAreCaught) {
  MarkerFile checksum;
  checksum.write_flushed(1, 0, {{"x", 1}});
  checksum.flip(20);
  const Markers m = checksum.read();
  EXPECT_EQ(m.kind, Markers::Kind::kDamaged);
  EXPECT_EQ(m.problem, "its flush marker is damaged");

  FlushHeader state;
  state.state = static_cast<MarkState>(4);
  EXPECT_EQ(problem_of(state), "its flush marker is of an unknown version");

  FlushHeader slot;
  slot.record_slot = 2;
  EXPECT_EQ(problem_of(slot), "its flush marker is inconsistent");

  FlushHeader generation;  // "flushed", but not the flush it names as completed
  generation.state = MarkState::kFlushed;
  generation.generation = 3;
  generation.completed = 2;
  EXPECT_EQ(problem_of(generation), "its flush marker is inconsistent");

  EXPECT_EQ(problem_of(FlushHeader{}), "");
}

TEST(Hdf5FlushMarker, DamagedRecordsAreCaught) {
  const Rows rows = {{"x", 1}, {"y", 2}};
  MarkerFile checksum;
  checksum.write_flushed(1, 0, rows);
  checksum.flip(slot_offset(0) + 30);  // a row count
  EXPECT_EQ(checksum.read().kind, Markers::Kind::kDamaged);
  EXPECT_EQ(checksum.read().problem, "the record of its last flush is damaged");

  MarkerFile missing;  // the header names slot 1, written nowhere
  missing.write_flushed(1, 0, rows);
  FlushHeader h = missing.read().header;
  h.record_slot = 1;
  missing.write(0, encode_header(h));
  EXPECT_EQ(missing.read().kind, Markers::Kind::kDamaged);

  MarkerFile stale;  // the slot holds the record of another flush
  stale.write_flushed(2, 0, rows);
  stale.write(slot_offset(0), encode_record(1, groups_of(rows)));
  EXPECT_EQ(stale.read().kind, Markers::Kind::kDamaged);

  MarkerFile count;  // the header counts other groups than the record
  count.write_flushed(1, 0, rows);
  h = count.read().header;
  h.groups = 3;
  count.write(0, encode_header(h));
  EXPECT_EQ(count.read().kind, Markers::Kind::kDamaged);
}

TEST(Hdf5FlushMarker, AHashCollisionLeavesNoRecord) {
  MarkerFile f;
  const std::vector<GroupRows> twice = {{name_hash("x"), 1}, {name_hash("x"), 2}};
  FlushHeader h;
  h.state = MarkState::kFlushed;
  h.generation = h.completed = 1;
  h.record_complete = true;
  h.groups = 2;
  h.digest = group_digest(twice);
  f.write(slot_offset(0), encode_record(1, twice));
  f.write(0, encode_header(h));
  const Markers m = f.read();
  EXPECT_EQ(m.kind, Markers::Kind::kUsable);
  EXPECT_FALSE(m.has_record);
}

}  // namespace
}  // namespace tensorscope::recording::hdf5
