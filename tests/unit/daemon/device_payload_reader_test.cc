// DevicePayloadReader where no CUDA device can be used (a build without CUDA, or a
// machine without a driver): every device payload is refused with the reason, and the
// supervisor's capability check says the same. On a machine with a device these checks
// do not apply (the CUDA integration tests cover it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

#include "worker/device_payload_reader.h"
#include "tensorscope/shared/device_pool_table.h"
#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/ring_writer.h"
#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

TEST(DevicePayloadReader, WithoutADeviceEveryPayloadIsRefusedWithTheReason) {
  std::string why;
  if (device_payloads_supported(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  EXPECT_FALSE(why.empty());
  if (::access("/dev/nvidia0", F_OK) != 0) {
    EXPECT_TRUE(why.find("CUDA") != std::string::npos || why.find("driver") != std::string::npos) << why;
  }

  testing::TempDir dir("ts-devreader");
  auto layout = plan_segment_layout(1 << 20, 8);
  ASSERT_TRUE(layout);
  const std::string path = dir.path() + "/d." + std::to_string(::getpid()) + ".0.seg";
  auto segment = SharedSegment::create(path, *layout, {::getpid(), ::geteuid(), 0, "d"});
  ASSERT_TRUE(segment) << segment.message();
  DevicePoolIdentity pool;
  pool.capacity = 4096;
  pool.event_handles.resize(2);
  ASSERT_TRUE(publish_pool((*segment)->pool(0), pool));

  RingWriter writer(segment->get());
  RingWriter::Reservation r;
  ASSERT_EQ(writer.reserve(0, &r), RingWriter::ReserveResult::kOk);
  r.header->dtype = static_cast<uint8_t>(wire::DType::kFloat32);
  r.header->kind = static_cast<uint8_t>(wire::TensorKind::kTensor);
  r.header->ndim = 1;
  r.header->shape[0] = 16;
  r.header->payload_bytes = 64;
  r.header->flags = wire::kRecordDevicePayload;
  std::strcpy(r.header->name, "x");
  std::strcpy(r.header->device, "cuda0");
  writer.commit(r);

  RingReader reader(segment->get(), 1 << 20);
  RecordView view;
  ASSERT_EQ(reader.next(&view), RingReader::Result::kRecord) << reader.last_error();
  DevicePayloadReader device_reader;
  std::string refusal;
  const auto fetched = device_reader.fetch(1, **segment, &view, std::chrono::milliseconds(0), &refusal);
  ASSERT_EQ(fetched, DevicePayloadReader::Result::kFailed);
  EXPECT_NE(refusal.find(why), std::string::npos) << refusal;
  EXPECT_EQ(view.payload, nullptr);
  reader.drop(view, refusal);
  EXPECT_EQ((*segment)->header()->dropped_invalid.load(), 1u);
  EXPECT_EQ((*segment)->pool(0)->released_ordinal.load(), 1u);  // the block is free again
  EXPECT_EQ(device_reader.fetched(), 0u);
}

}  // namespace
}  // namespace tensorscope::daemon
