// fuzz_ring_reader.cc — a producer's segment as a worker reads it (ring_reader.h): a
// valid segment identity, then the fuzz input over the producer-written parts (the
// ring positions, the slot table, the payloads), read until the ring is empty or
// poisoned. Every record the reader accepts must lie inside the data region.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "fuzz_target.h"
#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/shared_segment.h"

namespace {

const tensorscope::SegmentLayout& layout() {
  static const tensorscope::SegmentLayout l = *tensorscope::plan_segment_layout(64 << 10, 16);
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  // A valid segment, then the input written over everything after the identity block.
  const std::string path = fuzz::file_with("", ".seg");
  ::unlink(path.c_str());
  SegmentIdentity identity;
  identity.pid = ::getpid();
  identity.uid = ::geteuid();
  identity.session = "fuzz";
  StatusOr<std::unique_ptr<SharedSegment>> made = SharedSegment::create(path, layout(), identity);
  if (!made.is_ok()) return 0;
  auto* bytes = reinterpret_cast<uint8_t*>((*made)->header());
  constexpr size_t kIdentityBytes = 256;
  const size_t room = layout().segment_size - kIdentityBytes;
  std::memcpy(bytes + kIdentityBytes, data, std::min(size, room));
  StatusOr<std::unique_ptr<SharedSegment>> consumer = SharedSegment::open(path);
  if (!consumer.is_ok()) {
    ::unlink(path.c_str());
    return 0;
  }
  RingReader reader(consumer->get(), 1 << 20);
  const uint8_t* begin = (*consumer)->data();
  const uint8_t* end = begin + (*consumer)->data_capacity();
  for (int i = 0; i < 64; ++i) {
    RecordView view;
    const RingReader::Result r = reader.next(&view);
    if (r == RingReader::Result::kEmpty || r == RingReader::Result::kPoisoned) break;
    if (r != RingReader::Result::kRecord) continue;
    const uint64_t bytes = ring_tensor_bytes(view.header);
    if (bytes > 0 && (view.payload < begin || view.payload + bytes > end)) std::abort();
    reader.release(view);
  }
  ::unlink(path.c_str());
  return 0;
}
