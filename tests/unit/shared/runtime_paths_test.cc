// The automatic runtime directory: the shared name when it is free or ours, the per-user
// $XDG_RUNTIME_DIR/tensorscope when another user has squatted it (a symlink, a file, a
// directory that is not ours), and a clear error when there is no way around it.
#include "tensorscope/shared/runtime_paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tensorscope {
namespace {

class RuntimePaths : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "ts-runtime-paths-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    shared_ = root_ + "/shm";
    xdg_ = root_ + "/xdg";
    std::filesystem::create_directories(shared_);
    std::filesystem::create_directories(xdg_);
    ::chmod(xdg_.c_str(), 0700);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string name() const { return shared_ + "/tensorscope-" + std::to_string(::geteuid()); }

  std::string root_, shared_, xdg_;
};

TEST_F(RuntimePaths, TheSharedNameWhenFreeOrOurs) {
  EXPECT_EQ(automatic_runtime_dir(shared_, xdg_.c_str()), name());
  ASSERT_TRUE(ensure_private_dir(name()));
  EXPECT_EQ(automatic_runtime_dir(shared_, xdg_.c_str()), name());
  EXPECT_EQ(automatic_runtime_dir(shared_, nullptr), name());
}

TEST_F(RuntimePaths, ASquattedNameFallsBackToTheUsersOwnRuntimeDir) {
  // A symlink planted where our directory would be (to a directory we could use, even).
  ASSERT_EQ(::symlink(root_.c_str(), name().c_str()), 0);
  EXPECT_EQ(automatic_runtime_dir(shared_, xdg_.c_str()), xdg_ + "/tensorscope");
  ASSERT_TRUE(ensure_private_dir(automatic_runtime_dir(shared_, xdg_.c_str())));
  // Without a usable per-user directory: the squatted name, refused with a way out.
  EXPECT_EQ(automatic_runtime_dir(shared_, nullptr), name());
  EXPECT_EQ(automatic_runtime_dir(shared_, "relative/xdg"), name());
  ::chmod(xdg_.c_str(), 0755);  // not private: not used
  EXPECT_EQ(automatic_runtime_dir(shared_, xdg_.c_str()), name());
  const Status refused = ensure_private_dir(name());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("TENSORSCOPE_RUNTIME_DIR"), std::string::npos) << refused.message();
  // A plain file squats as well.
  ::unlink(name().c_str());
  {
    std::FILE* f = std::fopen(name().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  ::chmod(xdg_.c_str(), 0700);
  EXPECT_EQ(automatic_runtime_dir(shared_, xdg_.c_str()), xdg_ + "/tensorscope");
}

TEST_F(RuntimePaths, AnotherUsersDirectoryIsNotOurs) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a directory of another user needs root";
  ASSERT_EQ(::mkdir(name().c_str(), 0700), 0);
  ASSERT_EQ(::chown(name().c_str(), 12345, 12345), 0);
  EXPECT_EQ(automatic_runtime_dir(shared_, xdg_.c_str()), xdg_ + "/tensorscope");
}

}  // namespace
}  // namespace tensorscope
