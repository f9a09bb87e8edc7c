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

namespace tensorscope {
namespace {

namespace fs = std::filesystem;

// The session folders under a common parent (many nodes' daemons): found at the first
// depth that has any, in name order; a session folder is itself; hidden folders and
// folders with none of the marks are not.
TEST(SessionDirs, FoundUnderAParentAtTheFirstDepthThatHasAny) {
  std::string pattern = (fs::temp_directory_path() / "ts-session-dirs-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path root = pattern;
  for (const char* node : {"node1", "node0", "node10"}) {
    fs::create_directories(root / node / "out" / "exp1" / "summaries");
  }
  fs::create_directories(root / "node2" / "out" / "exp1");  // nothing written: not a session
  fs::create_directories(root / ".hidden" / "out" / "exp1" / "summaries");
  std::ofstream(root / "node2" / "out" / "notes.txt") << "x";
  const auto found = session_dirs_under(root.string());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], (root / "node0" / "out" / "exp1").string());
  EXPECT_EQ(found[1], (root / "node1" / "out" / "exp1").string());
  EXPECT_EQ(found[2], (root / "node10" / "out" / "exp1").string());
  EXPECT_TRUE(is_session_dir(found[0]));
  EXPECT_EQ(session_dirs_under(found[1]), std::vector<std::string>{found[1]}) << "a session folder is itself";
  fs::create_directories(root / "node0" / "run_info");  // a shallower session folder wins
  EXPECT_EQ(session_dirs_under(root.string()), std::vector<std::string>{(root / "node0").string()});
  EXPECT_TRUE(session_dirs_under((root / "missing").string()).empty());
  fs::create_directories(root / "a" / "b" / "c" / "d" / "e" / "index.json");  // deeper than kSessionSearchDepth
  EXPECT_TRUE(session_dirs_under((root / "a").string()).empty());
  fs::remove_all(root);
}

}  // namespace
}  // namespace tensorscope
