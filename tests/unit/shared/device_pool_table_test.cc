// The device pool table of a segment (ABI v2): publishing and reading a pool's identity
// across two mappings, device-payload records through the ring (no ring bytes, the pool
// block released with the record, also when cancelled or dropped), and the checks a
// worker applies to an untrusted pool location.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <functional>

#include "tensorscope/shared/device_pool_table.h"
#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/ring_writer.h"
#include "tensorscope/shared/shared_segment.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

using testing::TempDir;

struct Mappings {
  std::unique_ptr<SharedSegment> producer;
  std::unique_ptr<SharedSegment> consumer;
};

Mappings make_segment(const TempDir& dir) {
  auto layout = plan_segment_layout(1 << 20, 16);
  EXPECT_TRUE(layout) << layout.message();
  const std::string path = dir.path() + "/p." + std::to_string(::getpid()) + ".0.seg";
  auto created = SharedSegment::create(path, *layout, {::getpid(), ::geteuid(), 0, "p"});
  EXPECT_TRUE(created) << created.message();
  auto opened = SharedSegment::open(path);
  EXPECT_TRUE(opened) << opened.message();
  return {std::move(*created), std::move(*opened)};
}

DevicePoolIdentity sample_pool(uint32_t events = 4) {
  DevicePoolIdentity id;
  id.generation = 3;
  id.device_ordinal = 1;
  id.capacity = 1 << 16;
  id.generation_start_position = 5 << 16;
  id.generation_start_ordinal = 40;
  for (size_t i = 0; i < id.device_uuid.size(); ++i) id.device_uuid[i] = static_cast<uint8_t>(0xA0 + i);
  for (size_t i = 0; i < id.mem_handle.size(); ++i) id.mem_handle[i] = static_cast<uint8_t>(i);
  id.event_handles.resize(events);
  for (uint32_t e = 0; e < events; ++e) id.event_handles[e].fill(static_cast<uint8_t>(e + 1));
  return id;
}

// Fills `h` as a device-payload record for block `ordinal` at `position` of pool 2
// (everything but sequence and payload_position).
void fill_device_record(wire::RecordHeader& h, uint64_t position, uint64_t ordinal, uint64_t floats,
                        uint32_t events = 4) {
  h.dtype = static_cast<uint8_t>(wire::DType::kFloat32);
  h.kind = static_cast<uint8_t>(wire::TensorKind::kActivation);
  h.ndim = 1;
  h.shape[0] = static_cast<int64_t>(floats);
  h.payload_bytes = floats * 4;
  h.flags = wire::kRecordDevicePayload;
  h.pool_index = 2;
  h.pool_generation = 3;
  h.pool_position = position;
  h.pool_ordinal = ordinal;
  h.pool_event = static_cast<uint32_t>(ordinal % events);
  std::strcpy(h.name, "net.fc1");
  std::strcpy(h.device, "cuda1");
}

using Edit = std::function<void(wire::RecordHeader&)>;

// Claims a slot with no ring bytes, fills it as a device record (then `edit`), and
// commits or cancels it.
void publish_record(RingWriter& writer, uint64_t position, uint64_t ordinal, uint64_t floats, const Edit& edit = {},
                    bool cancel = false) {
  RingWriter::Reservation r;
  ASSERT_EQ(writer.reserve(0, &r), RingWriter::ReserveResult::kOk);
  fill_device_record(*r.header, position, ordinal, floats);
  if (edit) edit(*r.header);
  if (cancel) {
    writer.cancel(r);
  } else {
    writer.commit(r);
  }
}

TEST(DevicePoolTable, PublishedIdentityReadsBackInTheOtherMapping) {
  TempDir dir;
  Mappings m = make_segment(dir);
  EXPECT_FALSE(read_pool_identity(*m.consumer->pool(2)));  // EMPTY
  const DevicePoolIdentity id = sample_pool();
  ASSERT_TRUE(publish_pool(m.producer->pool(2), id));
  auto read = read_pool_identity(*m.consumer->pool(2));
  ASSERT_TRUE(read) << read.message();
  EXPECT_EQ(read->generation, 3u);
  EXPECT_EQ(read->device_ordinal, 1);
  EXPECT_EQ(read->capacity, uint64_t{1} << 16);
  EXPECT_EQ(read->generation_start_ordinal, 40u);
  EXPECT_EQ(read->device_uuid, id.device_uuid);
  EXPECT_EQ(read->mem_handle, id.mem_handle);
  ASSERT_EQ(read->event_handles.size(), 4u);
  EXPECT_EQ(read->event_handles[3], id.event_handles[3]);
  // Releases start at the generation's start, not at zero.
  const PoolReleases r =
      read_pool_releases(*m.producer->pool(2), id.generation_start_position, id.generation_start_ordinal);
  EXPECT_EQ(r.released_to, id.generation_start_position);
  EXPECT_EQ(r.released_ordinal, 40u);
  EXPECT_FALSE(publish_pool(m.producer->pool(2), id));  // once per segment
}

TEST(DevicePoolTable, MalformedIdentitiesAreRefusedOnBothSides) {
  TempDir dir;
  Mappings m = make_segment(dir);
  DevicePoolIdentity bad = sample_pool();
  bad.capacity = 1000;  // not a multiple of 256
  EXPECT_FALSE(publish_pool(m.producer->pool(0), bad));
  bad = sample_pool(0);
  EXPECT_FALSE(publish_pool(m.producer->pool(0), bad));
  EXPECT_EQ(m.producer->pool(0)->state.load(), wire::kPoolEmpty);
  // A producer that scribbles a published entry is refused by the reader.
  ASSERT_TRUE(publish_pool(m.producer->pool(0), sample_pool()));
  m.producer->pool(0)->event_count = wire::kMaxPoolEvents + 1;
  auto read = read_pool_identity(*m.consumer->pool(0));
  ASSERT_FALSE(read);
  EXPECT_NE(read.message().find("events"), std::string::npos) << read.message();
  m.producer->pool(0)->event_count = 4;
  m.producer->pool(0)->capacity = 0;
  EXPECT_FALSE(read_pool_identity(*m.consumer->pool(0)));
}

TEST(DevicePoolTable, LocationChecksRefuseEveryInconsistentField) {
  const DevicePoolIdentity pool = sample_pool();
  const uint64_t start = pool.generation_start_position;
  auto check = [&](uint64_t position, uint64_t ordinal, uint64_t floats, const Edit& edit = {}) {
    wire::RecordHeader h{};
    fill_device_record(h, position, ordinal, floats);
    if (edit) edit(h);
    return validate_device_location(h, pool);
  };
  EXPECT_EQ(check(start, 40, 100), "");
  // The last block that fits before the end of a lap.
  EXPECT_EQ(check(start + (1 << 16) - 512, 41, 128), "");

  EXPECT_NE(check(start, 40, 100, [](wire::RecordHeader& h) { h.pool_generation = 2; }), "");
  EXPECT_NE(check(start, 39, 100), "");                                                   // before the generation
  EXPECT_NE(check(start - 256, 40, 100), "");                                             // before the generation
  EXPECT_NE(check(start, 40, 100, [](wire::RecordHeader& h) { h.pool_event = 1; }), "");  // block 40: event 0
  EXPECT_NE(check(start, 40, 100, [](wire::RecordHeader& h) { h.pool_event = 4; }), "");
  EXPECT_NE(check(start + 64, 40, 100), "");               // misaligned
  EXPECT_NE(check(start + (1 << 16) - 256, 40, 100), "");  // wraps
  EXPECT_NE(check(start, 40, (1 << 14) + 1), "");          // larger than the pool
  EXPECT_NE(check(start, 40, UINT64_MAX / 4), "");         // absurd size
}

TEST(DevicePoolTable, DeviceRecordsTakeNoRingBytesAndReleaseTheirBlock) {
  TempDir dir;
  Mappings m = make_segment(dir);
  ASSERT_TRUE(publish_pool(m.producer->pool(2), sample_pool()));
  RingWriter writer(m.producer.get());
  RingReader reader(m.consumer.get(), 1 << 20);
  const uint64_t start = sample_pool().generation_start_position;
  const uint64_t data_head = m.producer->header()->data_head.load();

  publish_record(writer, start, 40, 1000);  // 4000 B -> block of 4096
  publish_record(writer, start + 4096, 41, 10);
  EXPECT_EQ(m.producer->header()->data_head.load(), data_head);  // no ring bytes

  RecordView view;
  ASSERT_EQ(reader.next(&view), RingReader::Result::kRecord) << reader.last_error();
  EXPECT_EQ(view.payload, nullptr);
  EXPECT_EQ(view.header.payload_bytes, 4000u);
  EXPECT_EQ(validate_device_location(view.header, *read_pool_identity(*m.consumer->pool(2))), "");
  reader.release(view);
  PoolReleases r = read_pool_releases(*m.producer->pool(2), start, 40);
  EXPECT_EQ(r.released_to, start + 4096);
  EXPECT_EQ(r.released_ordinal, 41u);

  ASSERT_EQ(reader.next(&view), RingReader::Result::kRecord);
  reader.drop(view, "device gone");  // a worker that cannot read it still frees it
  r = read_pool_releases(*m.producer->pool(2), start, 40);
  EXPECT_EQ(r.released_to, start + 4096 + 256);
  EXPECT_EQ(r.released_ordinal, 42u);
  EXPECT_EQ(m.consumer->header()->received.load(), 1u);
  EXPECT_EQ(m.consumer->header()->dropped_invalid.load(), 1u);
  EXPECT_EQ(m.consumer->header()->bytes_received.load(), 4000u);
}

TEST(DevicePoolTable, CancelledAndInvalidDeviceRecordsStillFreeTheirBlocks) {
  TempDir dir;
  Mappings m = make_segment(dir);
  ASSERT_TRUE(publish_pool(m.producer->pool(2), sample_pool()));
  RingWriter writer(m.producer.get());
  RingReader reader(m.consumer.get(), 1 << 20);
  const uint64_t start = sample_pool().generation_start_position;

  publish_record(writer, start, 40, 64, {}, /*cancel=*/true);
  publish_record(writer, start + 256, 41, 64,
                 [](wire::RecordHeader& h) { h.pool_index = wire::kMaxDevicePools; });  // no such entry
  publish_record(writer, start + 512, 42, 64, [](wire::RecordHeader& h) { h.dtype = 99; });

  RecordView view;
  EXPECT_EQ(reader.next(&view), RingReader::Result::kSkipped);
  EXPECT_EQ(read_pool_releases(*m.producer->pool(2), start, 40).released_ordinal, 41u);
  EXPECT_EQ(reader.next(&view), RingReader::Result::kDropped);
  EXPECT_NE(reader.last_error().find("pool"), std::string::npos) << reader.last_error();
  EXPECT_EQ(reader.next(&view), RingReader::Result::kDropped);
  const PoolReleases r = read_pool_releases(*m.producer->pool(2), start, 40);
  EXPECT_EQ(r.released_to, start + 768);
  EXPECT_EQ(r.released_ordinal, 43u);
  EXPECT_EQ(reader.next(&view), RingReader::Result::kEmpty);
  EXPECT_EQ(m.consumer->header()->dropped_invalid.load(), 2u);
}

TEST(DevicePoolTable, RetiringASegmentRevokesItsPublishedPoolsOnly) {
  TempDir dir;
  Mappings m = make_segment(dir);
  ASSERT_TRUE(publish_pool(m.producer->pool(1), sample_pool()));
  ASSERT_TRUE(publish_pool(m.producer->pool(4), sample_pool()));
  revoke_pools(m.producer->pool(0));
  for (size_t i = 0; i < wire::kMaxDevicePools; ++i) {
    const uint32_t want = (i == 1 || i == 4) ? wire::kPoolRevoked : wire::kPoolEmpty;
    EXPECT_EQ(m.consumer->pool(i)->state.load(), want) << "entry " << i;
  }
  EXPECT_FALSE(read_pool_identity(*m.consumer->pool(1)));          // a worker stops using it
  EXPECT_FALSE(publish_pool(m.producer->pool(1), sample_pool()));  // never republished
}

TEST(DevicePoolTable, StaleReleasesReadAsTheGenerationStart) {
  TempDir dir;
  Mappings m = make_segment(dir);
  ASSERT_TRUE(publish_pool(m.producer->pool(0), sample_pool()));
  m.consumer->pool(0)->released_to.store(7);  // from an older generation
  m.consumer->pool(0)->released_ordinal.store(1);
  const PoolReleases r = read_pool_releases(*m.producer->pool(0), 5 << 16, 40);
  EXPECT_EQ(r.released_to, uint64_t{5} << 16);
  EXPECT_EQ(r.released_ordinal, 40u);
}

}  // namespace
}  // namespace tensorscope
