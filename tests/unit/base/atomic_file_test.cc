// atomic_file_test.cc — replacing a file atomically: the new contents in full, the mode,
// no temporary file left after success or failure, the old file intact when the disk is
// full, names at the file system's limit, concurrent writers.
#include "tensorscope/base/atomic_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "small_tmpfs.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

TEST(AtomicFile, ReplacesTheFileWithBothPieces) {
  testing::TempDir dir("atomic");
  const std::string path = dir.path() + "/index.json";
  ASSERT_TRUE(write_file_atomically(path, "old"));
  EXPECT_EQ(slurp(path), "old");
  ASSERT_TRUE(write_file_atomically(path, "head:", "body"));
  EXPECT_EQ(slurp(path), "head:body");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"index.json"});
}

TEST(AtomicFile, TheModeIsTheOneAskedFor) {
  testing::TempDir dir("atomic");
  const mode_t old_mask = ::umask(022);
  AtomicWriteOptions options;
  options.mode = 0600;
  ASSERT_TRUE(write_file_atomically(dir.path() + "/private", "x", {}, options));
  ASSERT_TRUE(write_file_atomically(dir.path() + "/public", "x"));
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() + "/private").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir.path() + "/public").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(AtomicFile, AFailureLeavesTheTargetAndNoTemporaryFile) {
  testing::TempDir dir("atomic");
  Status missing_dir = write_file_atomically(dir.path() + "/no/such/file", "x");
  ASSERT_FALSE(missing_dir);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_THAT(missing_dir.message(), HasSubstr("cannot create"));
  // The target is a non-empty directory: the rename fails, the temporary file goes.
  fs::create_directories(dir.path() + "/target/inside");
  Status over_dir = write_file_atomically(dir.path() + "/target", "x");
  ASSERT_FALSE(over_dir);
  EXPECT_THAT(over_dir.message(), HasSubstr("cannot rename"));
  EXPECT_TRUE(errno == EISDIR || errno == ENOTEMPTY) << errno;
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"target"});
  Status no_name = write_file_atomically(dir.path() + "/", "x");
  ASSERT_FALSE(no_name);
  EXPECT_EQ(errno, EINVAL);
}

TEST(AtomicFile, AFullDiskKeepsTheOldContents) {
  testing::SmallTmpfs tmpfs("64k");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.why();
  const std::string path = tmpfs.path() + "/index.json";
  ASSERT_TRUE(write_file_atomically(path, "the old index"));
  const std::string big(1 << 20, 'x');
  Status full = write_file_atomically(path, big);
  ASSERT_FALSE(full);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_THAT(full.message(), HasSubstr("No space left on device"));
  EXPECT_EQ(slurp(path), "the old index");
  EXPECT_EQ(names_in(tmpfs.path()), std::vector<std::string>{"index.json"});
}

TEST(AtomicFile, NamesAtTheLimitAndACustomPrefix) {
  testing::TempDir dir("atomic");
  const std::string name(255, 'n');
  AtomicWriteOptions options;
  options.temp_prefix = ".tmp-npy-";
  ASSERT_TRUE(write_file_atomically(dir.path() + "/" + name, "x", {}, options));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{name});
}

TEST(AtomicFile, AFixedTemporaryNameReplacesACrashLeftover) {
  testing::TempDir dir("atomic");
  const std::string path = dir.path() + "/index.json";
  std::ofstream(path + ".tmp") << "garbage from a crash, longer than what comes next";
  AtomicWriteOptions options;
  options.fixed_temp_path = path + ".tmp";
  ASSERT_TRUE(write_file_atomically(path, "{}", {}, options));
  EXPECT_EQ(slurp(path), "{}");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"index.json"});
  options.fixed_temp_path = dir.path() + "/no/such/dir/index.json.tmp";
  Status s = write_file_atomically(path, "[]", {}, options);
  ASSERT_FALSE(s);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_THAT(s.message(), HasSubstr("index.json.tmp: cannot create"));
  EXPECT_EQ(slurp(path), "{}");
}

TEST(AtomicFile, ConcurrentWritersLeaveOneWholeVersion) {
  testing::TempDir dir("atomic");
  const std::string path = dir.path() + "/shared";
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      const std::string body(100000, static_cast<char>('a' + t));
      AtomicWriteOptions options;
      options.sync_directory = false;
      for (int i = 0; i < 20; ++i) ASSERT_TRUE(write_file_atomically(path, body, {}, options));
    });
  }
  for (auto& w : writers) w.join();
  const std::string final_text = slurp(path);
  ASSERT_EQ(final_text.size(), 100000u);
  EXPECT_EQ(final_text, std::string(100000, final_text[0]));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"shared"});
}

}  // namespace
}  // namespace tensorscope
