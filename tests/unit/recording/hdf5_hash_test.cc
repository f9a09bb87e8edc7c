// hdf5_hash_test.cc — the HDF5 sink's hash is XXH64 with seed 0: the reference
// implementation's values for inputs that take each path (under 4, 4..7, 8..31 and 32
// or more bytes, tails of every length), and no dependence on alignment.
#include "hdf5/hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tensorscope::recording::hdf5 {
namespace {

uint64_t hash_of(const std::string& s) { return hash_bytes(s.data(), s.size()); }

std::vector<unsigned char> counting(size_t n) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i);
  return bytes;
}

// Values of the reference implementation (libxxhash 0.8, XXH64(data, n, 0)).
TEST(Hdf5Hash, MatchesXxh64) {
  EXPECT_EQ(hash_bytes(nullptr, 0), 0xef46db3751d8e999ULL);
  EXPECT_EQ(hash_of("a"), 0xd24ec4f1a98c6e5bULL);
  EXPECT_EQ(hash_of("abc"), 0x44bc2cf5ad770999ULL);
  const std::vector<unsigned char> bytes = counting(100);  // 0, 1, 2, ...
  EXPECT_EQ(hash_bytes(bytes.data(), 5), 0xdd0274386e26030cULL);
  EXPECT_EQ(hash_bytes(bytes.data(), 20), 0xa3e3fbe96798d8acULL);
  EXPECT_EQ(hash_bytes(bytes.data(), 32), 0xcbf59c5116ff32b4ULL);
  EXPECT_EQ(hash_bytes(bytes.data(), 47), 0x0d9883a03e7bfbb8ULL);
  EXPECT_EQ(hash_bytes(bytes.data(), 100), 0x6ac1e58032166597ULL);
}

TEST(Hdf5Hash, EveryLengthAndAlignmentAgree) {
  const std::vector<unsigned char> bytes = counting(80);
  std::vector<unsigned char> shifted(81);
  for (size_t n = 0; n <= 72; ++n) {
    std::memcpy(shifted.data() + 1, bytes.data(), n);
    EXPECT_EQ(hash_bytes(bytes.data(), n), hash_bytes(shifted.data() + 1, n)) << n;
    if (n > 0) {
      EXPECT_NE(hash_bytes(bytes.data(), n), hash_bytes(bytes.data(), n - 1)) << n;
    }
  }
}

}  // namespace
}  // namespace tensorscope::recording::hdf5
