// Layout of the wire ABI as another program would see it: raw byte offsets.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tensorscope/shared/shared_segment.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {
namespace {

TEST(WireFormat, DtypeSizesAndNames) {
  EXPECT_EQ(wire::dtype_size(wire::DType::kFloat32), 4u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kFloat64), 8u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kFloat16), 2u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kBFloat16), 2u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kInt8), 1u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kInt16), 2u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kInt32), 4u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kInt64), 8u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kUInt8), 1u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kBool), 1u);
  EXPECT_EQ(wire::dtype_size(wire::DType::kInvalid), 0u);
  EXPECT_STREQ(wire::dtype_name(wire::DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(wire::dtype_name(static_cast<wire::DType>(200)), "invalid");
  EXPECT_STREQ(wire::tensor_kind_name(wire::TensorKind::kGradient), "gradient");
}

TEST(WireFormat, HeaderFieldsLandAtDocumentedByteOffsets) {
  std::vector<uint8_t> bytes(wire::kSegmentHeaderSize, 0);
  auto* h = new (bytes.data()) wire::SegmentHeader();
  h->magic = wire::kSegmentMagic;
  h->slot_count = 0x11223344;
  h->rank = 7;
  h->slot_tail.store(0xAABBCCDD, std::memory_order_relaxed);
  h->received.store(42, std::memory_order_relaxed);
  uint64_t magic;
  std::memcpy(&magic, bytes.data(), 8);
  EXPECT_EQ(magic, wire::kSegmentMagic);
  EXPECT_EQ(std::memcmp(bytes.data(), "SCOP_SEG", 8), 0);
  uint32_t slots;
  std::memcpy(&slots, bytes.data() + 32, 4);
  EXPECT_EQ(slots, 0x11223344u);
  int32_t rank;
  std::memcpy(&rank, bytes.data() + 68, 4);
  EXPECT_EQ(rank, 7);
  uint64_t tail;
  std::memcpy(&tail, bytes.data() + 320, 8);
  EXPECT_EQ(tail, 0xAABBCCDDu);
  uint64_t received;
  std::memcpy(&received, bytes.data() + 448, 8);
  EXPECT_EQ(received, 42u);
}

TEST(WireFormat, RecordFieldsLandAtDocumentedByteOffsets) {
  std::vector<uint8_t> bytes(wire::kRecordHeaderSize, 0);
  auto* r = new (bytes.data()) wire::RecordHeader();
  r->payload_bytes = 1234;
  r->shape[2] = 99;
  std::strcpy(r->name, "layer1.out");
  std::strcpy(r->device, "cuda3");
  r->flags = wire::kRecordCancelled;
  uint64_t payload_bytes;
  std::memcpy(&payload_bytes, bytes.data() + 16, 8);
  EXPECT_EQ(payload_bytes, 1234u);
  int64_t dim2;
  std::memcpy(&dim2, bytes.data() + 48 + 16, 8);
  EXPECT_EQ(dim2, 99);
  EXPECT_STREQ(reinterpret_cast<const char*>(bytes.data() + 112), "layer1.out");
  EXPECT_STREQ(reinterpret_cast<const char*>(bytes.data() + 240), "cuda3");
  EXPECT_EQ(bytes[384], wire::kRecordCancelled);

  r->pool_position = 0x1122334455667788ULL;
  r->pool_index = 5;
  r->pool_event = 63;
  uint64_t pool_position;
  std::memcpy(&pool_position, bytes.data() + 392, 8);
  EXPECT_EQ(pool_position, 0x1122334455667788ULL);
  uint32_t pool_index, pool_event;
  std::memcpy(&pool_index, bytes.data() + 408, 4);
  std::memcpy(&pool_event, bytes.data() + 416, 4);
  EXPECT_EQ(pool_index, 5u);
  EXPECT_EQ(pool_event, 63u);
}

TEST(WireFormat, LayoutPlanning) {
  auto layout = plan_segment_layout(1 << 20, 100);
  ASSERT_TRUE(layout) << layout.message();
  EXPECT_EQ(layout->slot_count, 128u);  // rounded up to a power of two
  EXPECT_EQ(layout->data_offset % 4096, 0u);
  EXPECT_GE(layout->pool_table_offset, wire::kSegmentHeaderSize + 128 * wire::kRecordHeaderSize);
  EXPECT_EQ(layout->pool_table_offset % 64, 0u);
  EXPECT_GE(layout->data_offset, layout->pool_table_offset + wire::kMaxDevicePools * wire::kDevicePoolEntrySize);
  EXPECT_LE(layout->segment_size, uint64_t{1} << 20);
  EXPECT_EQ(layout->data_offset + layout->data_capacity, layout->segment_size);
  EXPECT_FALSE(plan_segment_layout(4096, 1024));  // budget too small
  EXPECT_FALSE(plan_segment_layout(1 << 20, 1));
}

TEST(WireFormat, HeaderValidationNamesTheProblem) {
  auto layout = plan_segment_layout(1 << 20, 16);
  ASSERT_TRUE(layout);
  std::vector<uint8_t> bytes(wire::kSegmentHeaderSize, 0);
  auto* h = new (bytes.data()) wire::SegmentHeader();
  h->magic = wire::kSegmentMagic;
  h->abi_version = wire::kAbiVersion;
  h->header_size = wire::kSegmentHeaderSize;
  h->record_header_size = wire::kRecordHeaderSize;
  h->segment_size = layout->segment_size;
  h->slot_table_offset = wire::kSegmentHeaderSize;
  h->slot_count = layout->slot_count;
  h->pool_table_offset = layout->pool_table_offset;
  h->pool_count = wire::kMaxDevicePools;
  h->pool_entry_size = wire::kDevicePoolEntrySize;
  h->data_offset = layout->data_offset;
  h->data_capacity = layout->data_capacity;
  EXPECT_TRUE(validate_segment_header(*h, layout->segment_size));

  h->pool_count = wire::kMaxDevicePools + 1;
  EXPECT_NE(validate_segment_header(*h, layout->segment_size).message().find("pool table"), std::string::npos);
  h->pool_count = wire::kMaxDevicePools;
  h->pool_table_offset = wire::kSegmentHeaderSize;  // overlaps the slot table
  EXPECT_FALSE(validate_segment_header(*h, layout->segment_size));
  h->pool_table_offset = layout->data_offset - 64;  // runs into the data ring
  EXPECT_FALSE(validate_segment_header(*h, layout->segment_size));
  h->pool_table_offset = layout->pool_table_offset;

  h->abi_version = wire::kAbiVersion + 1;
  Status st = validate_segment_header(*h, layout->segment_size);
  EXPECT_FALSE(st);
  EXPECT_NE(st.message().find("ABI version " + std::to_string(wire::kAbiVersion + 1)), std::string::npos)
      << st.message();
  h->abi_version = wire::kAbiVersion;

  h->magic = 0;
  EXPECT_NE(validate_segment_header(*h, layout->segment_size).message().find("magic"), std::string::npos);
  h->magic = wire::kSegmentMagic;

  EXPECT_FALSE(validate_segment_header(*h, layout->segment_size - 4096));  // size mismatch
  h->slot_count = 3;
  EXPECT_FALSE(validate_segment_header(*h, layout->segment_size));
  h->slot_count = layout->slot_count;
  h->data_capacity = layout->data_capacity + 4096;
  EXPECT_FALSE(validate_segment_header(*h, layout->segment_size));
}

}  // namespace
}  // namespace tensorscope
