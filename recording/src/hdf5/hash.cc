// hash.cc — see hash.h.
#include "hdf5/hash.h"

#include <cstring>

namespace tensorscope::recording::hdf5 {
namespace {

constexpr uint64_t kP1 = 11400714785074694791ULL;
constexpr uint64_t kP2 = 14029467366897019727ULL;
constexpr uint64_t kP3 = 1609587929392839161ULL;
constexpr uint64_t kP4 = 9650029242287828579ULL;
constexpr uint64_t kP5 = 2870177450012600261ULL;

constexpr uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
constexpr uint64_t xxh_round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
constexpr uint64_t xxh_merge(uint64_t h, uint64_t v) { return (h ^ xxh_round(0, v)) * kP1 + kP4; }

// Element `i` of type S at `src` (any alignment).
template <typename S>
S load(const unsigned char* src, uint64_t i) {
  S value;
  std::memcpy(&value, src + i * sizeof(S), sizeof(S));
  return value;
}

}  // namespace

uint64_t hash_bytes(const void* data, uint64_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + n;
  uint64_t h = 0;
  if (n >= 32) {
    uint64_t v1 = kP1 + kP2;
    uint64_t v2 = kP2;
    uint64_t v3 = 0;
    uint64_t v4 = 0 - kP1;
    for (; end - p >= 32; p += 32) {
      v1 = xxh_round(v1, load<uint64_t>(p, 0));
      v2 = xxh_round(v2, load<uint64_t>(p, 1));
      v3 = xxh_round(v3, load<uint64_t>(p, 2));
      v4 = xxh_round(v4, load<uint64_t>(p, 3));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = xxh_merge(xxh_merge(xxh_merge(xxh_merge(h, v1), v2), v3), v4);
  } else {
    h = kP5;
  }
  h += n;
  for (; end - p >= 8; p += 8) h = rotl(h ^ xxh_round(0, load<uint64_t>(p, 0)), 27) * kP1 + kP4;
  if (end - p >= 4) {
    h = rotl(h ^ (static_cast<uint64_t>(load<uint32_t>(p, 0)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace tensorscope::recording::hdf5
