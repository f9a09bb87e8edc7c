// fmp4_scan_test.cc — scan_fmp4 on whole, cut and hostile files.
#include "tensorscope/plotting/fmp4_scan.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "test_util.h"

namespace tensorscope::plotting {
namespace {

std::string box(const std::string& type, const std::string& payload) {
  const uint32_t size = static_cast<uint32_t>(8 + payload.size());
  std::string out = {static_cast<char>(size >> 24), static_cast<char>(size >> 16), static_cast<char>(size >> 8),
                     static_cast<char>(size)};
  return out + type + payload;
}

// A moof with one traf holding one trun of `samples` samples.
std::string moof(uint32_t samples) {
  const std::string count = {static_cast<char>(samples >> 24), static_cast<char>(samples >> 16),
                             static_cast<char>(samples >> 8), static_cast<char>(samples)};
  return box("moof", box("mfhd", std::string(8, '\0')) + box("traf", box("trun", std::string(4, '\0') + count)));
}

std::string save(const testing::TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("v.mp4");
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Fmp4Scan, CountsWholeFragmentsAndStopsAtACut) {
  testing::TempDir dir;
  const std::string header = box("ftyp", "isom") + box("moov", std::string(20, 'm'));
  const std::string f1 = moof(1) + box("mdat", "frame-one");
  const std::string f2 = moof(3) + box("mdat", "frames-two-to-four");
  const std::string index = box("mfra", std::string(8, '\0'));
  const std::string whole = header + f1 + f2 + index;
  Fmp4Extent e = scan_fmp4(save(dir, whole));
  EXPECT_TRUE(e.valid);
  EXPECT_EQ(e.frames, 4);
  EXPECT_EQ(e.whole_bytes, whole.size());
  EXPECT_EQ(e.error, "");
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    e = scan_fmp4(save(dir, whole.substr(0, cut)));
    const int64_t frames = cut >= header.size() + f1.size() + f2.size() ? 4 : cut >= header.size() + f1.size() ? 1 : 0;
    EXPECT_EQ(e.frames, frames) << "cut at " << cut;
    EXPECT_EQ(e.valid, cut >= header.size()) << "cut at " << cut;
    if (e.valid) {
      EXPECT_LE(e.whole_bytes, cut);
    }
  }
}

TEST(Fmp4Scan, HostileBytesAreRefusedNotTrusted) {
  testing::TempDir dir;
  const std::string header = box("ftyp", "isom") + box("moov", "");
  // A box claiming 4 GiB, a 64-bit size of 2^63, a moof claiming a huge payload, a size
  // below its header, an mdat without its moof, a trun cut short.
  std::string huge = "\xff\xff\xff\xfftrak";
  std::string size64 = std::string("\0\0\0\1free", 8) + std::string("\x80\0\0\0\0\0\0\0", 8);
  std::string big_moof = std::string("\x7f\0\0\0moof", 8);
  std::string tiny = std::string("\0\0\0\4free", 8);
  for (const std::string& tail : {huge, size64, big_moof, tiny, box("mdat", "x"),
                                  box("moof", box("traf", box("trun", "ab"))) + box("mdat", "")}) {
    const Fmp4Extent e = scan_fmp4(save(dir, header + tail));
    EXPECT_TRUE(e.valid);
    EXPECT_EQ(e.frames, 0);
    EXPECT_EQ(e.whole_bytes, header.size());
    EXPECT_NE(e.error, "");
  }
  EXPECT_FALSE(scan_fmp4(save(dir, box("moov", "") + box("ftyp", ""))).valid);
  EXPECT_FALSE(scan_fmp4(dir.file("missing.mp4")).valid);
  std::mt19937 random(7);
  for (int i = 0; i < 200; ++i) {
    std::string noise(static_cast<size_t>(random() % 400), '\0');
    for (char& c : noise) c = static_cast<char>(random());
    const Fmp4Extent e = scan_fmp4(save(dir, header + noise));
    EXPECT_LE(e.whole_bytes, e.file_bytes);
  }
}

}  // namespace
}  // namespace tensorscope::plotting
