#include "tensorscope/base/posix_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace tensorscope {
namespace {

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(PosixPath, MakeDirectoriesCreatesParentsAndAcceptsAnExistingDirectory) {
  testing::TempDir dir("ts-path");
  const std::string deep = dir.path() + "/a/b//c/";
  ASSERT_TRUE(make_directories(deep)) << make_directories(deep).message();
  EXPECT_TRUE(is_dir(dir.path() + "/a/b/c"));
  EXPECT_TRUE(make_directories(deep)) << "an existing directory is fine";
  std::ofstream(dir.path() + "/file") << "x";
  const Status on_file = make_directories(dir.path() + "/file/sub");
  EXPECT_FALSE(on_file);
  EXPECT_NE(on_file.message().find(dir.path() + "/file"), std::string::npos) << on_file.message();
  EXPECT_FALSE(make_directories(""));
}

TEST(PosixPath, NormalizedFoldsDotsLexically) {
  EXPECT_EQ(normalized_path("/a/./b//../c/"), "/a/c");
  EXPECT_EQ(normalized_path("x/../.."), "..");
  EXPECT_EQ(normalized_path("../x/./y"), "../x/y");
  EXPECT_EQ(normalized_path("/.."), "/");
  EXPECT_EQ(normalized_path("/"), "/");
  EXPECT_EQ(normalized_path(""), ".");
  EXPECT_EQ(normalized_path("a/.."), ".");
}

TEST(PosixPath, AbsoluteResolvedAndParent) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(absolute_path("runs/./x"), normalized_path(std::string(cwd) + "/runs/x"));
  EXPECT_EQ(absolute_path("/tmp/../tmp/y"), "/tmp/y");

  testing::TempDir dir("ts-path");
  ASSERT_TRUE(make_directories(dir.path() + "/real"));
  ASSERT_EQ(::symlink((dir.path() + "/real").c_str(), (dir.path() + "/link").c_str()), 0);
  char* real = ::realpath((dir.path() + "/real").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(resolved_path(dir.path() + "/link"), real) << "symbolic links are followed";
  std::free(real);
  EXPECT_EQ(resolved_path(dir.path() + "/missing/../x"), normalized_path(dir.path() + "/x"))
      << "what does not exist is made absolute";

  EXPECT_EQ(parent_path("/a/b"), "/a");
  EXPECT_EQ(parent_path("/a/b/"), "/a");
  EXPECT_EQ(parent_path("b"), ".");
  EXPECT_EQ(parent_path("/b"), "/");
  EXPECT_EQ(parent_path("/"), "/");
}

TEST(PosixPath, ShellWordsPasteIntoAShell) {
  EXPECT_EQ(shell_word("/home/me/tensorscope_runs/exp-1.2"), "/home/me/tensorscope_runs/exp-1.2");
  EXPECT_EQ(shell_word("/data/my runs/exp1"), "'/data/my runs/exp1'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word("$HOME;rm"), "'$HOME;rm'");
  EXPECT_EQ(shell_word(""), "''");
}
}  // namespace
}  // namespace tensorscope
