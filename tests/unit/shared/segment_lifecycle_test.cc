// Segments from birth to removal: reserved space (no SIGBUS on a small tmpfs), the
// producer's lock, the cleanup of dead producers' leftovers, the names involved, the
// socket that appears only when it listens.
#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "small_tmpfs.h"
#include "temp_dir.h"
#include "tensorscope/shared/file_lock.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/segment_cleanup.h"
#include "tensorscope/shared/shared_segment.h"

namespace tensorscope {
namespace {

using testing::SmallTmpfs;
using testing::TempDir;

SegmentLayout layout_of(uint64_t bytes) {
  auto layout = plan_segment_layout(bytes, 64);
  EXPECT_TRUE(layout) << layout.message();
  return *layout;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A child creates a segment named for its own pid, says so, and is SIGKILLed: its file stays.
std::string segment_of_killed_process(const std::string& dir) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const std::string path = segment_file_path(dir, "s", static_cast<long>(::getpid()), 0);
    auto seg = SharedSegment::create(path, layout_of(1 << 20), {::getpid(), ::geteuid(), 0, "s"});
    const char ok = seg ? 'y' : 'n';
    (void)!::write(fds[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(fds[1]);
  char ok = 0;
  EXPECT_EQ(::read(fds[0], &ok, 1), 1);
  ::close(fds[0]);
  EXPECT_EQ(ok, 'y');
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return segment_file_name("s", pid, 0);
}

TEST(SegmentFiles, PidIsReadFromSegmentNamesAndTheirCreatingNames) {
  EXPECT_EQ(segment_file_pid("exp1.1234.0.seg"), 1234);
  EXPECT_EQ(segment_file_pid("my.dotted.session.77.12.seg"), 77);
  EXPECT_EQ(segment_file_pid(".exp1.1234.3.seg.creating"), 1234);
  for (const char* bad : {"exp1.sock", "exp1.lock", "exp1.12.seg.x", ".seg", "1.2.seg", "x.12a.0.seg", "x..0.seg",
                          "x.12..seg", "exp1.1234.0.seg.creating", "a/b.1.0.seg", "index.json"}) {
    EXPECT_EQ(segment_file_pid(bad), 0) << bad;
  }
}

TEST(SegmentFiles, CreatedSegmentIsReservedLockedAndHasNoTemporaryLeftOver) {
  TempDir dir;
  const std::string path = segment_file_path(dir.path(), "s", ::getpid(), 0);
  {
    auto seg = SharedSegment::create(path, layout_of(4 << 20), {::getpid(), ::geteuid(), 0, "s"});
    ASSERT_TRUE(seg) << seg.message();
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, (*seg)->size()) << "every byte is allocated";
    EXPECT_EQ(lock_state(path), LockState::kHeld);
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{segment_file_name("s", ::getpid(), 0)});
    (*seg)->prefault_data();  // never writes: the header is intact afterwards
    auto opened = SharedSegment::open(path);
    ASSERT_TRUE(opened) << opened.message();
  }
  EXPECT_EQ(lock_state(path), LockState::kFree) << "the lock goes with the segment object";
}

TEST(SegmentFiles, ATooSmallFilesystemIsAnErrorAtCreationNotASignalLater) {
  SmallTmpfs tmpfs("8m");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.why();
  const std::string path = segment_file_path(tmpfs.path(), "s", ::getpid(), 0);
  bool out_of_space = false;
  auto seg = SharedSegment::create(path, layout_of(32 << 20), {::getpid(), ::geteuid(), 0, "s"}, &out_of_space);
  ASSERT_FALSE(seg);
  EXPECT_TRUE(out_of_space);
  EXPECT_NE(seg.message().find("No space left"), std::string::npos) << seg.message();
  EXPECT_TRUE(names_in(tmpfs.path()).empty()) << "nothing is left behind";
  // A size that fits is created, and every page can be written.
  auto small = SharedSegment::create(path, layout_of(4 << 20), {::getpid(), ::geteuid(), 0, "s"}, &out_of_space);
  ASSERT_TRUE(small) << small.message();
  std::fill((*small)->data(), (*small)->data() + (*small)->data_capacity(), 0x5a);
  EXPECT_EQ((*small)->data()[(*small)->data_capacity() - 1], 0x5a);
}

TEST(SegmentFiles, AFileSizeLimitIsAnErrorNotSIGXFSZ) {
  TempDir dir;
  const pid_t pid = ::fork();
  if (pid == 0) {
    rlimit limit{1 << 20, 1 << 20};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    bool out_of_space = false;
    const std::string path = segment_file_path(dir.path(), "s", ::getpid(), 0);
    auto seg = SharedSegment::create(path, layout_of(8 << 20), {::getpid(), ::geteuid(), 0, "s"}, &out_of_space);
    ::_exit(!seg && out_of_space ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SegmentCleanup, RemovesOnlyTheSegmentsOfDeadProducers) {
  TempDir dir;
  const std::string dead = segment_of_killed_process(dir.path());
  // A live producer: this process, holding its segment.
  const std::string live_path = segment_file_path(dir.path(), "s", ::getpid(), 1);
  auto live = SharedSegment::create(live_path, layout_of(1 << 20), {::getpid(), ::geteuid(), 0, "s"});
  ASSERT_TRUE(live) << live.message();
  // Unlocked, but its pid runs (an older client, or a reused pid): kept.
  const std::string unlocked_alive = segment_file_name("s", ::getppid(), 0);
  std::ofstream(dir.path() + "/" + unlocked_alive) << "x";
  // A dead process's half-made segment, and files that are not segments.
  const std::string creating = "." + segment_file_name("s", 999999999, 2) + ".creating";
  std::ofstream(dir.path() + "/" + creating) << "x";
  // Named after a dead pid, but locked by a live process (a pid namespace apart): kept.
  const std::string locked_dead_pid = segment_file_name("s", 999999998, 0);
  std::ofstream(dir.path() + "/" + locked_dead_pid) << "x";
  const int locked_fd = ::open((dir.path() + "/" + locked_dead_pid).c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_EQ(try_lock_file(locked_fd), 0);
  std::ofstream(dir.path() + "/s.lock") << "";
  std::ofstream(dir.path() + "/notes.seg.txt") << "";

  const SegmentCleanup cleanup = remove_dead_segments(dir.path());
  std::vector<std::string> removed = cleanup.removed;
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected = {creating, dead};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  EXPECT_GE(cleanup.bytes, uint64_t{1} << 20);
  std::vector<std::string> left = {segment_file_name("s", ::getpid(), 1), unlocked_alive, locked_dead_pid, "s.lock",
                                   "notes.seg.txt"};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(names_in(dir.path()), left);
  EXPECT_TRUE(remove_dead_segments(dir.path()).removed.empty()) << "a second pass finds nothing";
  EXPECT_TRUE(remove_dead_segments(dir.path() + "/missing").removed.empty());
  ::close(locked_fd);
  EXPECT_EQ(remove_dead_segments(dir.path()).removed, std::vector<std::string>{locked_dead_pid})
      << "once its lock is gone";
}

TEST(FileLock, HeldUntilTheHolderDies) {
  TempDir dir;
  const std::string path = dir.path() + "/l";
  std::ofstream(path) << "";
  EXPECT_EQ(lock_state(path), LockState::kFree);
  EXPECT_EQ(lock_state(dir.path() + "/missing"), LockState::kUnknown);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(path.c_str(), O_RDWR);
    const char ok = try_lock_file(fd) == 0 ? 'y' : 'n';
    (void)!::write(fds[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(fds[0], &ok, 1), 1);
  EXPECT_EQ(ok, 'y');
  EXPECT_EQ(lock_state(path), LockState::kHeld);
  const int mine = ::open(path.c_str(), O_RDWR);
  EXPECT_TRUE(lock_held_elsewhere(try_lock_file(mine)));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(lock_state(path), LockState::kFree);
  EXPECT_EQ(try_lock_file(mine), 0);
  ::close(mine);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(ListenUnix, TheSocketAppearsListeningAndReplacesOnlyAStaleOne) {
  TempDir dir;
  const std::string path = dir.path() + "/s.sock";
  auto first = listen_unix(path);
  ASSERT_TRUE(first) << first.message();
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"s.sock"}) << "no hidden bind name left";
  auto client = connect_unix(path);
  ASSERT_TRUE(client) << client.message();
  ::close(*client);
  auto second = listen_unix(path);
  EXPECT_FALSE(second);
  EXPECT_NE(second.message().find("already listening"), std::string::npos) << second.message();
  ::close(*first);  // the file stays: a stale socket
  int err = 0;
  EXPECT_FALSE(connect_unix(path, &err));
  EXPECT_EQ(err, ECONNREFUSED);
  auto third = listen_unix(path);
  ASSERT_TRUE(third) << third.message();
  auto again = connect_unix(path);
  EXPECT_TRUE(again) << again.message();
  if (again) ::close(*again);
  ::close(*third);
}

}  // namespace
}  // namespace tensorscope
