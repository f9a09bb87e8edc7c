// file_naming_test.cc — stream names from shared memory become safe, unique file names.
#include "tensorscope/recording/file_naming.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace tensorscope::recording {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The promises of sanitize_stream_name, for any input.
void expect_safe_component(const std::string& out, std::size_t max_length) {
  ASSERT_FALSE(out.empty());
  EXPECT_NE(out, ".");
  EXPECT_NE(out, "..");
  EXPECT_NE(out[0], '.') << out;
  EXPECT_NE(out[0], '-') << out;
  EXPECT_LE(out.size(), max_length) << out;
  for (const char c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.' || c == '-' || c == '~';
    EXPECT_TRUE(ok) << "byte " << static_cast<int>(static_cast<unsigned char>(c)) << " in " << out;
  }
}

bool has_hash_suffix(const std::string& out) { return std::regex_search(out, std::regex("~[0-9a-f]{8}$")); }

TEST(FileNamingTest, SafeNamesAreKeptAsTheyAre) {
  for (const std::string& name :
       std::vector<std::string>{"conv1.out", "layer_3-grad", "A", "x.y.z", "_private", "a..b", std::string(96, 'q')}) {
    EXPECT_EQ(sanitize_stream_name(name), name);
  }
}

TEST(FileNamingTest, TraversalIsNeutralized) {
  const std::string out = sanitize_stream_name("../../etc/passwd");
  expect_safe_component(out, kMaxStreamComponentLength);
  EXPECT_EQ(out.find('/'), std::string::npos);
  EXPECT_THAT(out, StartsWith("_._.._etc_passwd~"));
  EXPECT_TRUE(has_hash_suffix(out));
}

TEST(FileNamingTest, SlashAndUnderscoreDoNotCollide) {
  const std::string a = sanitize_stream_name("a/b");
  const std::string b = sanitize_stream_name("a_b");
  EXPECT_EQ(b, "a_b");
  EXPECT_THAT(a, StartsWith("a_b~"));
  EXPECT_NE(a, b);
  EXPECT_NE(sanitize_stream_name("a\\b"), a);
  EXPECT_NE(sanitize_stream_name("a b"), a);
}

TEST(FileNamingTest, NulBytesAndUnicode) {
  const std::string nul = sanitize_stream_name(std::string("a\0b", 3));
  expect_safe_component(nul, kMaxStreamComponentLength);
  EXPECT_EQ(nul.find('\0'), std::string::npos);
  EXPECT_NE(nul, sanitize_stream_name(std::string("a\0c", 3)));
  EXPECT_NE(nul, sanitize_stream_name("a b"));

  const std::string uni = sanitize_stream_name("caf\xc3\xa9/\xe5\xb1\x82");  // "café/层"
  expect_safe_component(uni, kMaxStreamComponentLength);
  EXPECT_THAT(uni, StartsWith("caf______~"));
  EXPECT_NE(uni, sanitize_stream_name("caf\xc3\xa8/\xe5\xb1\x82"));
}

TEST(FileNamingTest, EmptyDotAndDotDot) {
  for (const std::string& name :
       std::vector<std::string>{"", ".", "..", "...", "-", "-rf", ".hidden", "~", "~12345678"}) {
    const std::string out = sanitize_stream_name(name);
    expect_safe_component(out, kMaxStreamComponentLength);
    EXPECT_TRUE(has_hash_suffix(out)) << name << " -> " << out;
  }
  EXPECT_NE(sanitize_stream_name(""), sanitize_stream_name("_"));
  EXPECT_NE(sanitize_stream_name("."), sanitize_stream_name(".."));
  EXPECT_THAT(sanitize_stream_name(".hidden"), StartsWith("_hidden~"));
}

TEST(FileNamingTest, LongNamesAreTruncatedButStayDistinct) {
  const std::string a(1000, 'a');
  std::string b = a;
  b.back() = 'b';
  const std::string sa = sanitize_stream_name(a);
  const std::string sb = sanitize_stream_name(b);
  EXPECT_EQ(sa.size(), kMaxStreamComponentLength);
  expect_safe_component(sa, kMaxStreamComponentLength);
  EXPECT_TRUE(has_hash_suffix(sa));
  EXPECT_NE(sa, sb);
  // 97 safe characters: just over the limit.
  const std::string s97 = sanitize_stream_name(std::string(97, 'x'));
  EXPECT_EQ(s97.size(), kMaxStreamComponentLength);
  EXPECT_NE(s97, std::string(96, 'x'));
  EXPECT_EQ(sanitize_stream_name(std::string(1 << 20, '/')).size(), kMaxStreamComponentLength);
}

TEST(FileNamingTest, StableAcrossCalls) {
  EXPECT_EQ(sanitize_stream_name("a/b"), sanitize_stream_name("a/b"));
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cULL);  // published FNV-1a test vector
  EXPECT_EQ(fnv1a_64("foobar"), 0x85944171f73967e8ULL);
}

TEST(FileNamingTest, RandomNamesNeverCollideAndAreAlwaysSafe) {
  std::mt19937_64 rng(12345);
  // Names from a small, collision-prone alphabet: many sanitize alike.
  const std::string alphabet = std::string("ab_/.-\\ \0\xff", 10);
  std::unordered_map<std::string, std::string> seen;  // component -> name
  int attempts = 0;
  while (seen.size() < 10000 && attempts < 100000) {
    ++attempts;
    const std::size_t len = rng() % 12 + (rng() % 20 == 0 ? 120 : 0);
    std::string name;
    for (std::size_t i = 0; i < len; ++i) name += alphabet[rng() % alphabet.size()];
    const std::string out = sanitize_stream_name(name);
    expect_safe_component(out, kMaxStreamComponentLength);
    const auto [it, inserted] = seen.emplace(out, name);
    if (!inserted) {
      EXPECT_EQ(it->second, name) << "two names map to " << out;
    }
  }
  EXPECT_EQ(seen.size(), 10000u);
}

TEST(FileNamingTest, VideoFileName) {
  EXPECT_EQ(video_file_name("conv1.out", "cpu", 0, 4242, "histogram", 0),
            "conv1.out__cpu__rank0__pid4242__histogram__0000.mp4");
  EXPECT_EQ(video_file_name("x", "cuda0", 3, 7, "auto", 12), "x__cuda0__rank3__pid7__auto__0012.mp4");
  EXPECT_EQ(video_file_name("x", "cuda0", 3, 7, "auto", 123456), "x__cuda0__rank3__pid7__auto__123456.mp4");
  // A pid out of pid_t's range is written as 0.
  EXPECT_EQ(video_file_name("x", "cpu", 0, -5, "auto", 0), "x__cpu__rank0__pid0__auto__0000.mp4");
  EXPECT_EQ(video_file_name("x", "cpu", 0, int64_t{1} << 40, "auto", 0), "x__cpu__rank0__pid0__auto__0000.mp4");
  const std::string hostile = video_file_name("../a", "../../dev", -1, 1, "a/b", 1);
  EXPECT_EQ(hostile.find('/'), std::string::npos);
  EXPECT_THAT(hostile, EndsWith("__0001.mp4"));
  EXPECT_THAT(hostile, HasSubstr("__rank-1__"));
  EXPECT_NE(hostile[0], '.');
}

TEST(FileNamingTest, VideoFileNamesSplitUnambiguously) {
  // "__" inside device or mode, or a leading '_', could shift the separators.
  EXPECT_NE(video_file_name("a_", "b", 0, 1, "m", 0), video_file_name("a", "_b", 0, 1, "m", 0));
  EXPECT_NE(video_file_name("a", "b__c", 0, 1, "m", 0), video_file_name("a__b", "c", 0, 1, "m", 0));
  EXPECT_NE(video_file_name("a", "d", 0, 1, "x__rank0__y", 0), video_file_name("a", "d", 0, 1, "x", 0));
  EXPECT_NE(video_file_name("a", "d", 0, 1, "x", 0), video_file_name("a", "d", 0, 2, "x", 0));
  const std::string dev = video_file_name("s", "__weird__dev__", 0, 1, "_m_", 0);
  const std::string middle = dev.substr(3, dev.find("__rank") - 3);
  EXPECT_EQ(middle.find("__"), std::string::npos) << dev;
  EXPECT_NE(middle[0], '_') << dev;
  // Even hostile parts keep the whole name (and its temp name) under NAME_MAX.
  const std::string longest = video_file_name(std::string(500, '/'), std::string(500, '/'), -2147483647 - 1, 2147483647,
                                              std::string(500, '/'), 2147483647);
  EXPECT_LT(temp_video_file_name(longest, 2147483647, UINT64_MAX).size(), 255u);
}

TEST(FileNamingTest, TempVideoFileName) {
  const std::string final_name = video_file_name("conv1", "cpu", 0, 99, "histogram", 0);
  const std::string tmp = temp_video_file_name(final_name, 4242, 17);
  EXPECT_THAT(tmp, StartsWith(".tmp-"));
  EXPECT_THAT(tmp, EndsWith(".mp4"));
  EXPECT_THAT(tmp, HasSubstr("4242"));
  EXPECT_THAT(tmp, HasSubstr(final_name));
  EXPECT_THAT(tmp, StartsWith(".tmp-4242-17-"));
  EXPECT_NE(tmp, temp_video_file_name(final_name, 4243, 17));
  EXPECT_NE(tmp, temp_video_file_name(final_name, 4242, 18));  // two producers, one worker
  EXPECT_THAT(temp_video_file_name("odd", 1, 1), EndsWith(".mp4"));
}

}  // namespace
}  // namespace tensorscope::recording
