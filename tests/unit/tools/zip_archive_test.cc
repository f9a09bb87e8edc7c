// zip_archive_test.cc — ZipArchive on hand-built archives: entries and data offsets,
// comments, ZIP64 records and extra fields (including a sparse archive over 4 GiB),
// compressed and encrypted entries, and corrupt input: every truncation of a small
// archive, every single-byte corruption, hostile counts, offsets and name lengths.
#include "compare/zip_archive.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "temp_dir.h"
#include "torch_file_builder.h"

namespace tensorscope::compare {
namespace {

using testing::build_zip;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::write_bytes;
using testing::write_zip_file;
using testing::ZipSpec;

ZipSpec small_spec() {
  ZipSpec spec;
  spec.entries.push_back({"arch/data.pkl", "pickle bytes"});
  spec.entries.push_back({"arch/data/0", std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8)});
  spec.entries.push_back({"arch/version", "3\n"});
  return spec;
}

StatusOr<ZipArchive> open_bytes(const TempDir& dir, const std::string& bytes, const std::string& name = "a.zip") {
  const std::string path = dir.path() + "/" + name;
  EXPECT_TRUE(write_bytes(path, bytes));
  return ZipArchive::open(path);
}

void expect_small_entries(const ZipArchive& zip) {
  ASSERT_EQ(zip.entries().size(), 3u);
  EXPECT_EQ(zip.entries()[0].name, "arch/data.pkl");
  EXPECT_EQ(zip.entries()[1].size, 8u);
  const ZipEntry* data = zip.find("arch/data/0");
  ASSERT_NE(data, nullptr);
  auto bytes = zip.read_entry(*data, 100);
  ASSERT_TRUE(bytes) << bytes.message();
  EXPECT_EQ(*bytes, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  auto pkl = zip.read_entry(zip.entries()[0], 100);
  ASSERT_TRUE(pkl) << pkl.message();
  EXPECT_EQ(*pkl, "pickle bytes");
  EXPECT_EQ(zip.find("nope"), nullptr);
}

TEST(ZipArchiveTest, ReadsEntriesAndDataOffsets) {
  TempDir dir("zip");
  const ZipSpec spec = small_spec();
  const auto pieces = testing::build_zip_pieces(spec);
  auto zip = open_bytes(dir, build_zip(spec));
  ASSERT_TRUE(zip) << zip.message();
  expect_small_entries(*zip);
  for (size_t i = 0; i < spec.entries.size(); ++i) {
    auto offset = zip->data_offset(zip->entries()[i]);
    ASSERT_TRUE(offset) << offset.message();
    EXPECT_EQ(*offset, pieces.data_offsets[i]);
    EXPECT_EQ(*offset % 64, 0u);  // the builder aligns like PyTorch
  }
}

TEST(ZipArchiveTest, VariantsOfTheDirectoryRecords) {
  TempDir dir("zip");
  ZipSpec spec = small_spec();
  spec.zip64_eocd = false;  // plain 32-bit records only
  spec.align = 0;
  auto zip = open_bytes(dir, build_zip(spec));
  ASSERT_TRUE(zip) << zip.message();
  expect_small_entries(*zip);

  spec = small_spec();
  spec.comment = std::string(65535, 'c');      // the longest comment; contains no signature
  spec.comment.replace(100, 4, "PK\x05\x06");  // a fake signature inside the comment
  zip = open_bytes(dir, build_zip(spec));
  ASSERT_TRUE(zip) << zip.message();
  expect_small_entries(*zip);

  spec = small_spec();
  spec.zip64_extra = true;  // saturated 32-bit fields, real values in the ZIP64 extra field
  zip = open_bytes(dir, build_zip(spec));
  ASSERT_TRUE(zip) << zip.message();
  expect_small_entries(*zip);

  spec.zip64_eocd = false;  // saturated fields without the ZIP64 record
  zip = open_bytes(dir, build_zip(spec));
  ASSERT_FALSE(zip);
  EXPECT_THAT(zip.message(), HasSubstr("ZIP64"));
}

TEST(ZipArchiveTest, EntriesBeyondFourGiBThroughZip64) {
  TempDir dir("zip");
  ZipSpec spec;
  spec.zip64_extra = true;
  const uint64_t big = (uint64_t{5} << 30) + 12;
  spec.entries.push_back({"arch/data/0", "", big});
  spec.entries.push_back({"arch/data/1", "tail"});
  const std::string path = dir.path() + "/big.zip";
  ASSERT_TRUE(write_zip_file(path, spec));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  if (static_cast<uint64_t>(st.st_blocks) * 512 > (uint64_t{1} << 30)) {
    GTEST_SKIP() << "the file system does not keep sparse files sparse";
  }
  auto zip = ZipArchive::open(path);
  ASSERT_TRUE(zip) << zip.message();
  ASSERT_EQ(zip->entries().size(), 2u);
  EXPECT_EQ(zip->entries()[0].size, big);
  EXPECT_GT(zip->entries()[1].local_header_offset, uint64_t{1} << 32);
  auto tail = zip->read_entry(zip->entries()[1], 100);
  ASSERT_TRUE(tail) << tail.message();
  EXPECT_EQ(*tail, "tail");
  auto offset = zip->data_offset(zip->entries()[0]);
  ASSERT_TRUE(offset) << offset.message();
  char last[4] = {1, 1, 1, 1};
  ASSERT_TRUE(zip->read_at(*offset + big - 4, last, 4));
  EXPECT_EQ(std::string(last, 4), std::string(4, '\0'));
  // Too large for read_entry's cap.
  EXPECT_FALSE(zip->read_entry(zip->entries()[0], 1 << 20));
}

TEST(ZipArchiveTest, CompressedAndEncryptedEntriesAreClearErrors) {
  TempDir dir("zip");
  ZipSpec spec = small_spec();
  spec.entries[1].method = 8;
  auto zip = open_bytes(dir, build_zip(spec));
  ASSERT_TRUE(zip) << zip.message();  // listing works; reading that entry does not
  auto offset = zip->data_offset(*zip->find("arch/data/0"));
  ASSERT_FALSE(offset);
  EXPECT_THAT(offset.message(), HasSubstr("'arch/data/0'"));
  EXPECT_THAT(offset.message(), HasSubstr("compressed (deflate)"));
  EXPECT_THAT(offset.message(), HasSubstr(dir.path() + "/a.zip"));
  EXPECT_TRUE(zip->read_entry(*zip->find("arch/data.pkl"), 100));

  spec = small_spec();
  spec.entries[0].flags = 1;
  zip = open_bytes(dir, build_zip(spec));
  ASSERT_TRUE(zip) << zip.message();
  auto pkl = zip->read_entry(zip->entries()[0], 100);
  ASSERT_FALSE(pkl);
  EXPECT_THAT(pkl.message(), HasSubstr("encrypted"));
}

TEST(ZipArchiveTest, NotAZip) {
  TempDir dir("zip");
  for (const std::string& bytes :
       {std::string(), std::string("PK"), std::string(100, 'x'), std::string("\x80\x02}q\x00.", 6)}) {
    auto zip = open_bytes(dir, bytes, "n.zip");
    ASSERT_FALSE(zip);
    EXPECT_THAT(zip.message(), HasSubstr(dir.path() + "/n.zip: not a zip archive"));
  }
  auto missing = ZipArchive::open(dir.path() + "/missing.zip");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.message(), HasSubstr("missing.zip: cannot open"));
  auto directory = ZipArchive::open(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.message(), HasSubstr("not a regular file"));
}

// Every prefix of a valid archive is an error (the end record is at the end), never a
// crash; and so is the archive with its tail cut off after the central directory.
TEST(ZipArchiveTest, EveryTruncationIsAnError) {
  TempDir dir("zip");
  for (bool zip64 : {false, true}) {
    ZipSpec spec = small_spec();
    spec.zip64_eocd = zip64;
    spec.zip64_extra = zip64;
    const std::string full = build_zip(spec);
    ASSERT_TRUE(open_bytes(dir, full));
    for (size_t len = 0; len < full.size(); ++len) {
      auto zip = open_bytes(dir, full.substr(0, len), "t.zip");
      EXPECT_FALSE(zip) << "length " << len;
      if (!zip) {
        EXPECT_THAT(zip.message(), HasSubstr("t.zip")) << len;
      }
    }
  }
}

// Flipping any one byte gives an archive that opens or not, but nothing crashes and
// whatever opens reads only inside the file.
TEST(ZipArchiveTest, EverySingleByteCorruptionIsHandled) {
  TempDir dir("zip");
  ZipSpec spec = small_spec();
  spec.zip64_extra = true;
  const std::string full = build_zip(spec);
  size_t opened = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x80}}) {
      std::string bad = full;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      auto zip = open_bytes(dir, bad, "c.zip");
      if (!zip) continue;
      ++opened;
      for (const ZipEntry& e : zip->entries()) {
        auto data = zip->read_entry(e, 1 << 20);
        if (data) {
          EXPECT_LE(data->size(), full.size());
        }
      }
    }
  }
  EXPECT_GT(opened, 0u);  // e.g. a flipped byte inside an entry's data
}

TEST(ZipArchiveTest, HostileDirectoryValues) {
  TempDir dir("zip");
  ZipSpec spec = small_spec();
  spec.zip64_eocd = false;
  spec.align = 0;
  const std::string good = build_zip(spec);
  const size_t eocd = good.size() - 22;
  auto patch = [](std::string bytes, size_t at, uint64_t value, size_t n) {
    std::string v;
    testing::put_le(v, value, n);
    bytes.replace(at, n, v);
    return bytes;
  };
  auto patched = [&](size_t at, uint64_t value, size_t n) { return patch(good, at, value, n); };
  struct Case {
    std::string bytes;
    std::string message;
  };
  // The central directory: offset and first entry.
  const size_t cd_offset = static_cast<size_t>(testing::build_zip_pieces(spec).pieces.back().first);
  const std::vector<Case> cases = {
      {patched(eocd + 10, 0xFFFF, 2), "ZIP64"},                               // entries saturated
      {patched(eocd + 8, 5, 2), "multi-disk"},                                // entries on disk != total
      {patched(eocd + 4, 1, 2), "multi-disk"},                                // disk number
      {patch(patched(eocd + 8, 4000, 2), eocd + 10, 4000, 2), "cannot fit"},  // too many entries
      {patched(eocd + 16, 0xFFFFFF00u, 4), "lies outside the file"},          // CD offset
      {patched(eocd + 12, 0x7FFFFFFFu, 4), "larger than"},                    // CD size over the cap
      {patched(cd_offset, 0x12345678u, 4), "bad signature"},                  // first CD entry
      {patched(cd_offset + 28, 5000, 2), "runs past"},                        // name length
      {patched(cd_offset + 42, 0xFFFFFFF0u, 4), "lies outside the file's data area"},
      {patched(cd_offset + 20, 0x7FFFFFF0u, 4), "lies outside the file's data area"},
  };
  for (const Case& c : cases) {
    auto zip = open_bytes(dir, c.bytes, "h.zip");
    ASSERT_FALSE(zip) << c.message;
    EXPECT_THAT(zip.message(), HasSubstr(c.message));
    EXPECT_THAT(zip.message(), HasSubstr("h.zip"));
  }
  // A name over the cap (the record itself is consistent).
  ZipSpec long_name = small_spec();
  long_name.entries[0].name = std::string(kMaxZipNameBytes + 1, 'n');
  auto zip = open_bytes(dir, build_zip(long_name), "h.zip");
  ASSERT_FALSE(zip);
  EXPECT_THAT(zip.message(), HasSubstr("longer than"));
  // A local header that names another entry, or has a bad signature.
  std::string bad_local = good;
  bad_local[30] = 'X';  // first letter of the first entry's local name
  zip = open_bytes(dir, bad_local, "h.zip");
  ASSERT_TRUE(zip) << zip.message();
  auto offset = zip->data_offset(zip->entries()[0]);
  ASSERT_FALSE(offset);
  EXPECT_THAT(offset.message(), HasSubstr("local header names a different entry"));
  bad_local = good;
  bad_local[0] = 'Q';
  zip = open_bytes(dir, bad_local, "h.zip");
  ASSERT_TRUE(zip) << zip.message();
  offset = zip->data_offset(zip->entries()[0]);
  ASSERT_FALSE(offset);
  EXPECT_THAT(offset.message(), HasSubstr("bad local header signature"));
}

}  // namespace
}  // namespace tensorscope::compare
