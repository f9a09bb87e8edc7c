// The record ring: wrap-around at several capacities, many producer threads, full
// rings, cancelled records, and a consumer that survives garbage in the segment.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/row_labels_format.h"
#include "tensorscope/shared/ring_writer.h"
#include "tensorscope/shared/shared_segment.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

using testing::TempDir;

struct Ring {
  std::unique_ptr<SharedSegment> producer_side;
  std::unique_ptr<SharedSegment> consumer_side;  // a second mapping, as the daemon has
};

// `budget`: the segment without its device pool table (these tests size the data ring).
Ring make_ring(const TempDir& dir, uint64_t budget, uint32_t slots) {
  const uint64_t pool_table = wire::align_up(wire::kMaxDevicePools * wire::kDevicePoolEntrySize, 4096);
  auto layout = plan_segment_layout(budget + pool_table, slots);
  EXPECT_TRUE(layout) << layout.message();
  const std::string path = dir.path() + "/t." + std::to_string(::getpid()) + ".0.seg";
  auto created = SharedSegment::create(path, *layout, {::getpid(), ::geteuid(), 3, "t"});
  EXPECT_TRUE(created) << created.message();
  auto opened = SharedSegment::open(path);
  EXPECT_TRUE(opened) << opened.message();
  return Ring{std::move(*created), std::move(*opened)};
}

// Writes a float32 record whose payload is `count` copies of `value`.
RingWriter::ReserveResult write_record(RingWriter& writer, const std::string& name, int64_t step, size_t count,
                                       float value, RingWriter::Claim claim = RingWriter::Claim::kAnySpace) {
  RingWriter::Reservation r;
  const auto result = writer.reserve(count * sizeof(float), &r, claim);
  if (result != RingWriter::ReserveResult::kOk) return result;
  r.header->step = step;
  r.header->rank = 3;
  r.header->dtype = static_cast<uint8_t>(wire::DType::kFloat32);
  r.header->kind = static_cast<uint8_t>(wire::TensorKind::kTensor);
  r.header->ndim = 1;
  r.header->shape[0] = static_cast<int64_t>(count);
  std::snprintf(r.header->name, wire::kNameBytes, "%s", name.c_str());
  std::snprintf(r.header->device, wire::kDeviceBytes, "cpu");
  r.header->label[0] = '\0';
  r.header->render_hint = 0;
  auto* out = reinterpret_cast<float*>(r.payload);
  for (size_t i = 0; i < count; ++i) out[i] = value;
  writer.commit(r);
  return result;
}

bool payload_is(const RecordView& v, float value) {
  const size_t n = v.header.payload_bytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, v.payload + i * sizeof(float), sizeof(float));
    if (x != value) return false;
  }
  return true;
}

class RingWrapTest : public ::testing::TestWithParam<std::tuple<uint64_t, uint32_t>> {};

TEST_P(RingWrapTest, EveryRecordArrivesIntactAcrossManyLaps) {
  TempDir dir("ts-ring");
  const auto [budget, slots] = GetParam();
  Ring ring = make_ring(dir, budget, slots);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  std::mt19937 rng(static_cast<uint32_t>(budget + slots));
  const uint64_t capacity = ring.producer_side->data_capacity();
  std::uniform_int_distribution<size_t> size_dist(0, capacity / sizeof(float) / 3);

  int64_t written = 0, read = 0, full = 0;
  std::vector<std::pair<int64_t, size_t>> expected;  // (step, count) in order
  size_t next_expected = 0;
  const int64_t total = 3000;
  while (read < total) {
    // Write a burst, then read part of it, so the ring is often partly full.
    for (int k = 0; k < 5 && written < total; ++k) {
      const size_t count = size_dist(rng);
      const auto result = write_record(writer, "s", written, count, static_cast<float>(written));
      ASSERT_NE(result, RingWriter::ReserveResult::kTooLarge);
      if (result == RingWriter::ReserveResult::kFull) {
        ++full;
        break;
      }
      expected.emplace_back(written, count);
      ++written;
    }
    for (int k = 0; k < 3; ++k) {
      RecordView v;
      const auto result = reader.next(&v);
      if (result == RingReader::Result::kEmpty) break;
      ASSERT_EQ(result, RingReader::Result::kRecord) << reader.last_error();
      ASSERT_LT(next_expected, expected.size());
      EXPECT_EQ(v.header.step, expected[next_expected].first);
      EXPECT_EQ(v.header.shape[0], static_cast<int64_t>(expected[next_expected].second));
      EXPECT_TRUE(payload_is(v, static_cast<float>(v.header.step)));
      reader.release(v);
      ++next_expected;
      ++read;
    }
  }
  const auto* h = ring.consumer_side->header();
  EXPECT_EQ(h->received.load(), static_cast<uint64_t>(total));
  EXPECT_EQ(h->dropped_invalid.load(), 0u);
  // Several laps of both the slot table and the data ring were exercised.
  EXPECT_GT(h->slot_tail.load(), 2u * ring.producer_side->slot_count());
  EXPECT_GT(h->data_tail.load(), 2u * capacity);
  EXPECT_GT(full, 0);  // the full path was taken too
}

INSTANTIATE_TEST_SUITE_P(Capacities, RingWrapTest,
                         ::testing::Values(std::make_tuple(uint64_t{16} << 10, 2u),
                                           std::make_tuple(uint64_t{64} << 10, 4u),
                                           std::make_tuple(uint64_t{256} << 10, 16u),
                                           std::make_tuple(uint64_t{1} << 20, 64u),
                                           std::make_tuple(uint64_t{4} << 20, 1024u)));

TEST(Ring, TooLargeAndZeroSizedRecords) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 64 << 10, 8);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  RingWriter::Reservation r;
  EXPECT_EQ(writer.reserve(ring.producer_side->data_capacity() + 1, &r), RingWriter::ReserveResult::kTooLarge);
  ASSERT_EQ(write_record(writer, "empty", 1, 0, 0.f), RingWriter::ReserveResult::kOk);
  RecordView v;
  ASSERT_EQ(reader.next(&v), RingReader::Result::kRecord) << reader.last_error();
  EXPECT_EQ(v.header.payload_bytes, 0u);
  reader.release(v);
}

TEST(Ring, FullRingReportsFullUntilTheConsumerFrees) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 64 << 10, 4);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(write_record(writer, "s", i, 1, 1.f), RingWriter::ReserveResult::kOk);
  EXPECT_EQ(write_record(writer, "s", 4, 1, 1.f), RingWriter::ReserveResult::kFull);  // no slot
  RecordView v;
  ASSERT_EQ(reader.next(&v), RingReader::Result::kRecord);
  reader.release(v);
  EXPECT_EQ(write_record(writer, "s", 4, 1, 1.f), RingWriter::ReserveResult::kOk);
}

TEST(Ring, TensorsLeaveHeadroomForSmallRecords) {
  TempDir dir("ts-ring");
  using C = RingWriter::Claim;
  {  // slots: 32 slots, tensors stop with 2 left
    Ring ring = make_ring(dir, 1 << 20, 32);
    RingWriter writer(ring.producer_side.get());
    ASSERT_EQ(writer.headroom_slots(), 2u);
    for (int i = 0; i < 30; ++i)
      ASSERT_EQ(write_record(writer, "t", i, 1, 1.f, C::kLeaveHeadroom), RingWriter::ReserveResult::kOk);
    EXPECT_EQ(write_record(writer, "t", 30, 1, 1.f, C::kLeaveHeadroom), RingWriter::ReserveResult::kFull);
    EXPECT_EQ(write_record(writer, "summary", 30, 1, 2.f), RingWriter::ReserveResult::kOk);
    EXPECT_EQ(write_record(writer, "summary", 31, 1, 2.f), RingWriter::ReserveResult::kOk);
    EXPECT_EQ(write_record(writer, "summary", 32, 1, 2.f), RingWriter::ReserveResult::kFull);
    RingReader reader(ring.consumer_side.get(), UINT64_MAX);
    RecordView v;
    ASSERT_EQ(reader.next(&v), RingReader::Result::kRecord);
    reader.release(v);
    EXPECT_EQ(write_record(writer, "t", 31, 1, 1.f, C::kLeaveHeadroom), RingWriter::ReserveResult::kFull);
    EXPECT_EQ(write_record(writer, "summary", 32, 1, 2.f), RingWriter::ReserveResult::kOk);
  }
  {  // data: tensors stop a sixteenth short of the data space
    Ring ring = make_ring(dir, 64 << 10, 64);
    RingWriter writer(ring.producer_side.get());
    const uint64_t capacity = ring.producer_side->data_capacity();
    const size_t chunk = 1024;  // floats: 4 KiB records
    size_t tensors = 0;
    while (write_record(writer, "t", static_cast<int64_t>(tensors), chunk, 1.f, C::kLeaveHeadroom) ==
           RingWriter::ReserveResult::kOk) {
      ++tensors;
    }
    const uint64_t used = tensors * chunk * sizeof(float);
    EXPECT_LE(used + writer.headroom_bytes(), capacity);
    EXPECT_GT(used + chunk * sizeof(float) + writer.headroom_bytes(), capacity);
    EXPECT_EQ(write_record(writer, "summary", 0, chunk, 2.f), RingWriter::ReserveResult::kOk);
  }
}

// A producer whose consumer keeps up writes the start of the data space again and again
// (its pages stay hot): an empty ring starts over once a lap has used 1/kRestartFraction.
TEST(Ring, AnEmptyRingStartsOverAtItsBeginning) {
  TempDir dir("ts-ring");
  using C = RingWriter::Claim;
  Ring ring = make_ring(dir, 1 << 20, 256);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  const uint64_t capacity = ring.producer_side->data_capacity();
  const uint64_t restart = capacity / RingWriter::kRestartFraction;
  const size_t chunk = 256;  // floats: 1 KiB records
  RecordView v;
  auto read_offset = [&](int64_t step) {
    EXPECT_EQ(reader.next(&v), RingReader::Result::kRecord) << reader.last_error();
    EXPECT_EQ(v.header.step, step);
    EXPECT_TRUE(payload_is(v, static_cast<float>(step)));
    const uint64_t offset = v.header.payload_position % capacity;
    reader.release(v);
    return offset;
  };
  // Each record read before the next is written: they follow one another until the lap
  // has used `restart` bytes, then the next starts over at offset 0.
  int64_t step = 0;
  uint64_t expected = 0;
  for (; expected < restart; expected += chunk * sizeof(float), ++step) {
    ASSERT_EQ(write_record(writer, "s", step, chunk, static_cast<float>(step)), RingWriter::ReserveResult::kOk);
    ASSERT_EQ(read_offset(step), expected);
  }
  ASSERT_EQ(write_record(writer, "s", step, chunk, static_cast<float>(step)), RingWriter::ReserveResult::kOk);
  EXPECT_EQ(read_offset(step), 0u);
  ++step;
  // Not empty: no start-over. A record that ends past the restart point, then one more
  // written before the first is read.
  const uint64_t bytes = chunk * sizeof(float);
  uint64_t at = bytes;
  for (; at + bytes < restart; at += bytes, ++step) {
    ASSERT_EQ(write_record(writer, "s", step, chunk, static_cast<float>(step)), RingWriter::ReserveResult::kOk);
    ASSERT_EQ(read_offset(step), at);
  }
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(write_record(writer, "s", step + k, chunk, static_cast<float>(step + k)), RingWriter::ReserveResult::kOk);
  }
  EXPECT_EQ(read_offset(step), at);
  EXPECT_EQ(read_offset(step + 1), at + bytes);
  step += 2;
  // Right after a start-over, before the consumer has released anything (its data_tail
  // is still where the skip began): the ring counts as almost empty and takes as many
  // tensors as a fresh one, which all arrive in order.
  const int64_t burst = step;
  const size_t big = 4096;  // floats: 16 KiB records (the slots last longer than the bytes)
  ASSERT_EQ(write_record(writer, "s", step++, big, static_cast<float>(burst)), RingWriter::ReserveResult::kOk);
  EXPECT_LT(writer.fill(), 0.05);
  size_t tensors = 1;
  while (write_record(writer, "s", step, big, static_cast<float>(step), C::kLeaveHeadroom) ==
         RingWriter::ReserveResult::kOk) {
    ++tensors;
    ++step;
  }
  EXPECT_GE((tensors + 1) * big * sizeof(float) + writer.headroom_bytes(), capacity);
  EXPECT_GT(writer.fill(), 0.9);
  EXPECT_EQ(read_offset(burst), 0u);
  for (int64_t s = burst + 1; s < step; ++s) (void)read_offset(s);
  EXPECT_EQ(reader.next(&v), RingReader::Result::kEmpty);
  EXPECT_EQ(ring.consumer_side->header()->dropped_invalid.load(), 0u);
  EXPECT_LT(writer.fill(), 0.01);
}

TEST(Ring, CancelledRecordsAreSkippedNotCounted) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 64 << 10, 8);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  RingWriter::Reservation r;
  ASSERT_EQ(writer.reserve(128, &r), RingWriter::ReserveResult::kOk);
  writer.cancel(r);
  ASSERT_EQ(write_record(writer, "after", 2, 4, 2.f), RingWriter::ReserveResult::kOk);
  RecordView v;
  EXPECT_EQ(reader.next(&v), RingReader::Result::kSkipped);
  ASSERT_EQ(reader.next(&v), RingReader::Result::kRecord);
  EXPECT_STREQ(v.header.name, "after");
  reader.release(v);
  EXPECT_EQ(ring.consumer_side->header()->received.load(), 1u);
  EXPECT_EQ(ring.consumer_side->header()->dropped_invalid.load(), 0u);
}

TEST(Ring, ManyProducerThreadsOneConsumer) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 1 << 20, 64);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  constexpr int kThreads = 4, kPerThread = 5000;
  std::atomic<int64_t> committed{0}, full{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const float value = static_cast<float>(t * kPerThread + i);
        if (write_record(writer, "t" + std::to_string(t), i, 1 + (i % 200), value) == RingWriter::ReserveResult::kOk) {
          committed.fetch_add(1);
        } else {
          full.fetch_add(1);
        }
      }
    });
  }
  std::vector<int64_t> last_step(kThreads, -1);
  int64_t received = 0;
  std::thread joiner([&] {
    for (auto& th : threads) th.join();
    done.store(true);
  });
  for (;;) {
    RecordView v;
    const auto result = reader.next(&v);
    if (result == RingReader::Result::kEmpty) {
      if (done.load() && reader.next(&v) == RingReader::Result::kEmpty) break;
      continue;
    }
    ASSERT_EQ(result, RingReader::Result::kRecord) << reader.last_error();
    const int t = v.header.name[1] - '0';
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_GT(v.header.step, last_step[static_cast<size_t>(t)]);  // per-thread order kept
    last_step[static_cast<size_t>(t)] = v.header.step;
    EXPECT_TRUE(payload_is(v, static_cast<float>(t * kPerThread + v.header.step)));
    reader.release(v);
    ++received;
  }
  joiner.join();
  EXPECT_EQ(received, committed.load());
  EXPECT_EQ(committed.load() + full.load(), kThreads * kPerThread);
}

// Garbage in the slot table and records: every bad record is dropped and counted, an
// impossible slot state poisons the segment, nothing crashes.
TEST(Ring, GarbageRecordsAreDroppedAndCounted) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 256 << 10, 16);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), 1 << 16);
  std::mt19937 rng(7);
  int valid_written = 0, garbage_written = 0;
  for (int i = 0; i < 2000; ++i) {
    RingWriter::Reservation r;
    const size_t count = 1 + rng() % 64;
    if (writer.reserve(count * 4, &r) != RingWriter::ReserveResult::kOk) {
      // drain a little
      RecordView v;
      for (auto res = reader.next(&v); res != RingReader::Result::kEmpty; res = reader.next(&v)) {
        ASSERT_NE(res, RingReader::Result::kPoisoned);
        if (res == RingReader::Result::kRecord) reader.release(v);
      }
      continue;
    }
    const bool garbage = rng() % 2 == 0;
    r.header->dtype = static_cast<uint8_t>(wire::DType::kFloat32);
    r.header->kind = static_cast<uint8_t>(wire::TensorKind::kTensor);
    r.header->ndim = 1;
    r.header->shape[0] = static_cast<int64_t>(count);
    std::snprintf(r.header->name, wire::kNameBytes, "ok");
    std::snprintf(r.header->device, wire::kDeviceBytes, "cpu");
    r.header->label[0] = '\0';
    r.header->render_hint = 0;
    if (garbage) {
      // Scribble random bytes over every field after `sequence`, keeping the claim.
      const uint64_t pos = r.header->payload_position, bytes = r.header->payload_bytes;
      auto* raw = reinterpret_cast<uint8_t*>(r.header);
      for (size_t b = 8; b < wire::kRecordHeaderSize; ++b) raw[b] = static_cast<uint8_t>(rng());
      switch (rng() % 6) {  // sometimes keep most fields sane so one check must catch it
        case 0: r.header->payload_position = pos + (rng() % 2 ? 1u << 30 : 0); break;
        case 1: r.header->payload_bytes = bytes * 3; break;
        default: break;
      }
      r.header->flags &= static_cast<uint8_t>(~wire::kRecordCancelled);  // garbage, not a cancel
      ++garbage_written;
    } else {
      ++valid_written;
    }
    writer.commit(r);
  }
  RecordView v;
  for (;;) {
    const auto result = reader.next(&v);
    if (result == RingReader::Result::kEmpty) break;
    ASSERT_NE(result, RingReader::Result::kPoisoned);
    if (result == RingReader::Result::kRecord) reader.release(v);
  }
  const auto* h = ring.consumer_side->header();
  // A garbage header can be valid by chance only if it describes a real payload; these
  // random ones never do, so the counts are exact.
  EXPECT_EQ(h->received.load(), static_cast<uint64_t>(valid_written));
  EXPECT_EQ(h->dropped_invalid.load(), static_cast<uint64_t>(garbage_written));
}

// A float32 record of `rows` x 2 with a row labels section (`section`, written as is)
// after its values, `ring_bytes` claimed in all (default: exactly what it needs).
void write_labelled(RingWriter& writer, int64_t rows, const std::string& section, uint64_t ring_bytes = 0,
                    uint8_t ndim = 2) {
  const uint64_t bytes = static_cast<uint64_t>(rows) * 2 * sizeof(float);
  const uint64_t needed = wire::align_up(bytes, 8) + section.size();
  RingWriter::Reservation r;
  ASSERT_EQ(writer.reserve(ring_bytes != 0 ? ring_bytes : needed, &r), RingWriter::ReserveResult::kOk);
  r.header->dtype = static_cast<uint8_t>(wire::DType::kFloat32);
  r.header->kind = static_cast<uint8_t>(wire::TensorKind::kActivation);
  r.header->ndim = ndim;
  r.header->shape[0] = rows;
  r.header->shape[1] = 2;
  std::snprintf(r.header->name, wire::kNameBytes, "emb");
  std::snprintf(r.header->device, wire::kDeviceBytes, "cpu");
  r.header->label[0] = '\0';
  r.header->render_hint = 0;
  r.header->payload_bytes = ndim == 0 ? sizeof(float) : bytes;
  r.header->row_labels_bytes = static_cast<uint32_t>(section.size());
  auto* values = reinterpret_cast<float*>(r.payload);
  for (int64_t i = 0; i < rows * 2; ++i) values[i] = static_cast<float>(i);
  if (needed <= (ring_bytes != 0 ? ring_bytes : needed)) {
    std::memcpy(r.payload + wire::align_up(bytes, 8), section.data(), section.size());
  }
  writer.commit(r);
}

TEST(Ring, RowLabelsArriveWithTheirRecordAndMalformedOnesAreDropped) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 256 << 10, 16);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), 1 << 16);
  const RowLabels labels{{0, 1, 1}, {"cat", "dog"}};
  const std::string section = *encode_row_labels(labels);

  write_labelled(writer, 3, section);                                       // good
  write_labelled(writer, 4, section);                                       // 3 labels, 4 rows
  write_labelled(writer, 3, section.substr(0, section.size() - 4));         // cut short
  write_labelled(writer, 3, section, 0, /*ndim=*/0);                        // on a 0-d tensor
  write_labelled(writer, 3, *encode_row_labels(RowLabels{{5, 6, 7}, {}}));  // good, numeric
  write_labelled(writer, 3, section, wire::align_up(24, 8) + 8);            // past its claimed ring bytes (the last)

  RecordView v;
  ASSERT_EQ(reader.next(&v), RingReader::Result::kRecord) << reader.last_error();
  ASSERT_TRUE(v.row_labels);
  EXPECT_EQ(*v.row_labels, labels);
  float last;
  std::memcpy(&last, v.payload + 5 * sizeof(float), sizeof last);
  EXPECT_EQ(last, 5.0f);  // the values are the tensor's, the section after them
  reader.release(v);
  const char* reasons[] = {"3 row labels for a tensor of 4 rows", "size does not match",
                           "not a tensor of at least one dimension"};
  for (const char* reason : reasons) {
    ASSERT_EQ(reader.next(&v), RingReader::Result::kDropped) << reason;
    EXPECT_NE(reader.last_error().find(reason), std::string::npos) << reader.last_error();
  }
  ASSERT_EQ(reader.next(&v), RingReader::Result::kRecord) << reader.last_error();
  ASSERT_TRUE(v.row_labels);
  EXPECT_EQ(v.row_labels->values, (std::vector<int64_t>{5, 6, 7}));
  reader.release(v);
  ASSERT_EQ(reader.next(&v), RingReader::Result::kDropped);
  EXPECT_NE(reader.last_error().find("out of bounds"), std::string::npos) << reader.last_error();
  EXPECT_EQ(reader.next(&v), RingReader::Result::kEmpty);
  EXPECT_EQ(ring.consumer_side->header()->dropped_invalid.load(), 4u);
  EXPECT_EQ(ring.consumer_side->header()->received.load(), 2u);
}

TEST(Ring, CorruptSlotTablePoisonsTheSegment) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 64 << 10, 8);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), UINT64_MAX);
  ASSERT_EQ(write_record(writer, "s", 0, 4, 1.f), RingWriter::ReserveResult::kOk);
  ring.producer_side->slot(0)->sequence.store(0xdeadbeef);
  RecordView v;
  EXPECT_EQ(reader.next(&v), RingReader::Result::kPoisoned);
  EXPECT_EQ(reader.next(&v), RingReader::Result::kPoisoned);
  EXPECT_EQ(ring.consumer_side->header()->consumer_state.load(), wire::kConsumerPoisoned);
  EXPECT_NE(reader.last_error().find("sequence"), std::string::npos);
}

TEST(Ring, WholeSegmentOfRandomBytesIsRefusedAtOpen) {
  TempDir dir("ts-ring");
  const std::string path = dir.path() + "/garbage.seg";
  std::mt19937 rng(3);
  std::vector<char> junk(1 << 16);
  for (auto& c : junk) c = static_cast<char>(rng());
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(junk.data(), 1, junk.size(), f);
  std::fclose(f);
  ::chmod(path.c_str(), 0600);
  auto opened = SharedSegment::open(path);
  EXPECT_FALSE(opened);
  EXPECT_NE(opened.message().find("magic"), std::string::npos) << opened.message();
  ::chmod(path.c_str(), 0644);
  opened = SharedSegment::open(path);
  EXPECT_FALSE(opened);
  EXPECT_NE(opened.message().find("0644"), std::string::npos) << opened.message();
}

// Random headers: whatever validation accepts really is in bounds and self-consistent.
TEST(Ring, RandomHeadersAcceptedOnlyWhenConsistent) {
  wire::RecordHeader h{};
  int accepted = 0;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) {
    auto* raw = reinterpret_cast<uint8_t*>(&h);
    for (size_t b = 0; b < sizeof(h); ++b) raw[b] = static_cast<uint8_t>(rng());
    if (i % 3 == 0) {
      h.name[5] = '\0';
      h.device[3] = '\0';
      h.label[0] = '\0';
      h.dtype = static_cast<uint8_t>(1 + rng() % 10);
      h.kind = 1;
      h.ndim = static_cast<uint8_t>(rng() % 9);
    }
    if (i % 5 == 0) {  // make some consistent so the accepting branch is exercised
      h.ndim = 1;
      h.shape[0] = static_cast<int64_t>(rng() % 1000);
      h.payload_bytes = static_cast<uint64_t>(h.shape[0]) * wire::dtype_size(static_cast<wire::DType>(h.dtype));
      h.payload_position = (rng() % 1000) * 64;
      h.render_hint = static_cast<uint8_t>(rng() % (wire::kMaxRenderHint + 1));
      h.row_labels_bytes = 0;
    }
    const uint64_t capacity = 1 << 20;
    const std::string why = validate_record_header(h, capacity, 0, capacity, capacity);
    if (why.empty()) {
      ++accepted;
      ASSERT_GE(h.dtype, 1);
      ASSERT_LE(h.dtype, wire::kMaxDType);
      ASSERT_LE(h.ndim, wire::kMaxDims);
      ASSERT_LE(h.render_hint, wire::kMaxRenderHint);
      ASSERT_LE(h.payload_position % capacity + h.payload_bytes, capacity);
      ASSERT_NE(std::memchr(h.name, 0, wire::kNameBytes), nullptr);
      ASSERT_NE(std::memchr(h.device, 0, wire::kDeviceBytes), nullptr);
      uint64_t numel = 1;
      for (int d = 0; d < h.ndim; ++d) numel *= static_cast<uint64_t>(h.shape[d]);
      ASSERT_EQ(numel * wire::dtype_size(static_cast<wire::DType>(h.dtype)), h.payload_bytes);
    }
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

// Records the consumer cannot use (cancelled by the producer, or refused by validation)
// still give their space back: a ring fed only such records never fills up for good.
TEST(Ring, CancelledAndRefusedRecordsNeverWedgeTheRing) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 64 << 10, 8);
  RingWriter writer(ring.producer_side.get());
  RingReader reader(ring.consumer_side.get(), /*max_payload_bytes=*/1024);
  const uint64_t big = 8 << 10;  // above the reader's limit: every such record is refused
  for (int i = 0; i < 2000; ++i) {
    RingWriter::Reservation r;
    ASSERT_EQ(writer.reserve(big, &r), RingWriter::ReserveResult::kOk) << "wedged at " << i;
    if (i % 2 == 0) {
      writer.cancel(r);
    } else {
      r.header->dtype = static_cast<uint8_t>(wire::DType::kUInt8);
      r.header->kind = static_cast<uint8_t>(wire::TensorKind::kTensor);
      r.header->ndim = 1;
      r.header->shape[0] = static_cast<int64_t>(big);
      std::snprintf(r.header->name, wire::kNameBytes, "big");
      std::snprintf(r.header->device, wire::kDeviceBytes, "cpu");
      r.header->label[0] = '\0';
      writer.commit(r);
    }
    RecordView v;
    const auto result = reader.next(&v);
    ASSERT_EQ(result, i % 2 == 0 ? RingReader::Result::kSkipped : RingReader::Result::kDropped);
  }
  EXPECT_EQ(ring.consumer_side->header()->dropped_invalid.load(), 1000u);
}

// A consumer that died after freeing a slot but before advancing slot_tail: the next
// consumer skips the slot instead of declaring the segment corrupt.
TEST(Ring, ConsumerRestartAfterAHalfFinishedReleaseResumes) {
  TempDir dir("ts-ring");
  Ring ring = make_ring(dir, 64 << 10, 4);
  RingWriter writer(ring.producer_side.get());
  ASSERT_EQ(write_record(writer, "s", 0, 4, 0.f), RingWriter::ReserveResult::kOk);
  ASSERT_EQ(write_record(writer, "s", 1, 4, 1.f), RingWriter::ReserveResult::kOk);
  // The dead consumer's half release of position 0:
  ring.consumer_side->slot(0)->sequence.store(0 + ring.consumer_side->slot_count());
  RingReader restarted(ring.consumer_side.get(), UINT64_MAX);
  RecordView v;
  EXPECT_EQ(restarted.next(&v), RingReader::Result::kSkipped);
  ASSERT_EQ(restarted.next(&v), RingReader::Result::kRecord) << restarted.last_error();
  EXPECT_EQ(v.header.step, 1);
  EXPECT_TRUE(payload_is(v, 1.f));
  restarted.release(v);
  EXPECT_FALSE(restarted.poisoned());
}

}  // namespace
}  // namespace tensorscope
