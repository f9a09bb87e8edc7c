// The session `tensorscope view` opens when none is named: the directory written last
// (its own time or its index.json's), never a file or a name that is no session's.
#include "tensorscope/shared/output_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace tensorscope {
namespace {

namespace fs = std::filesystem;

class OutputDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ts-output-dir-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  // Sets `path`'s modification time to `seconds` after an hour ago.
  void touch(const std::string& path, int seconds) {
    const auto when = fs::file_time_type::clock::now() - std::chrono::hours(1) + std::chrono::seconds(seconds);
    fs::last_write_time(path, when);
  }
  std::string root_;
};

TEST_F(OutputDir, TheSessionWrittenLast) {
  EXPECT_EQ(latest_session_dir(root_), "");
  EXPECT_EQ(latest_session_dir(root_ + "/missing"), "");
  for (const char* s : {"exp1", "exp2", "exp3"}) fs::create_directories(root_ + "/" + s);
  std::ofstream(root_ + "/exp1/index.json") << "{}";
  touch(root_ + "/exp1", 10);
  touch(root_ + "/exp2", 30);
  touch(root_ + "/exp3", 20);
  touch(root_ + "/exp1/index.json", 15);
  EXPECT_EQ(latest_session_dir(root_), root_ + "/exp2");
  touch(root_ + "/exp1/index.json", 40);  // a session still writing its index
  EXPECT_EQ(latest_session_dir(root_), root_ + "/exp1");
}

TEST_F(OutputDir, FilesAndNamesThatAreNoSessionsAreSkipped) {
  fs::create_directories(root_ + "/old");
  touch(root_ + "/old", 0);
  std::ofstream(root_ + "/notes.txt") << "x";
  fs::create_directories(root_ + "/.hidden");
  fs::create_directories(root_ + "/bad name");
  touch(root_ + "/notes.txt", 50);
  touch(root_ + "/.hidden", 50);
  touch(root_ + "/bad name", 50);
  EXPECT_EQ(latest_session_dir(root_), root_ + "/old");
}

}  // namespace
}  // namespace tensorscope
