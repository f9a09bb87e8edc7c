// posix_file_test.cc — the POSIX file helpers: whole writes through short transfers,
// reads to the end of a file and exact reads that name where the file ends, errno left
// at the failing call's error, descriptors owned and closed once, a path compared with an
// open file, renames that never replace a file (to the next free "<stem>-N<ext>" name).
#include "tensorscope/base/posix_file.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "file_text.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

using ::testing::HasSubstr;

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

using testing::read_text_file;
using testing::write_text_file;

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(PosixFile, ErrnoTextIsTheSystemsText) {
  EXPECT_EQ(errno_text(ENOSPC), "No space left on device");
  EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
}

TEST(PosixFile, UniqueFdClosesOnceAndMovesOwnership) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    UniqueFd a(fds[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), fds[0]);
    UniqueFd c;
    c = std::move(b);
    EXPECT_TRUE(is_open(fds[0]));
  }
  EXPECT_FALSE(is_open(fds[0]));
  UniqueFd d(fds[1]);
  EXPECT_EQ(d.release(), fds[1]);
  EXPECT_TRUE(is_open(fds[1]));
  UniqueFd e(fds[1]);
  EXPECT_TRUE(e.close("pipe").is_ok());
  EXPECT_FALSE(is_open(fds[1]));
  EXPECT_TRUE(e.close("pipe").is_ok());  // nothing held: nothing to do
}

TEST(PosixFile, WriteAllGetsThroughShortWrites) {
  // A socket's small buffer takes a big write in many pieces.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  UniqueFd writer(sv[0]), reader(sv[1]);
  const int small = 4096;
  ::setsockopt(writer.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  std::string received;
  std::thread drain([&] {
    char buffer[1000];
    ssize_t n;
    while ((n = ::read(reader.get(), buffer, sizeof buffer)) > 0) received.append(buffer, static_cast<size_t>(n));
  });
  Status s = write_all(writer.get(), data, "socket");
  writer.reset();
  drain.join();
  ASSERT_TRUE(s) << s.message();
  EXPECT_TRUE(received == data);
}

TEST(PosixFile, PwriteAndReadsAtOffsets) {
  testing::TempDir dir("posix");
  const std::string path = dir.path() + "/f";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(write_all(fd.get(), std::string("0123456789"), path));
  ASSERT_TRUE(pwrite_all(fd.get(), "ab", 2, 4, path));
  char buffer[16] = {};
  ASSERT_TRUE(pread_exact(fd.get(), buffer, 10, 0, path));
  EXPECT_EQ(std::string(buffer, 10), "0123ab6789");
  auto got = pread_full(fd.get(), buffer, 16, 6, path);
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(*got, 4u);  // to the end, no further
  EXPECT_EQ(std::string(buffer, 4), "6789");
  errno = EINVAL;
  Status short_read = pread_exact(fd.get(), buffer, 8, 6, path);
  ASSERT_FALSE(short_read);
  EXPECT_EQ(short_read.message(), path + ": cannot read: the file ends at byte 10, before byte 14");
  EXPECT_EQ(errno, 0);
}

TEST(PosixFile, FailuresNameTheFileAndLeaveErrno) {
  testing::TempDir dir("posix");
  const std::string path = dir.path() + "/r";
  ASSERT_TRUE(write_all(UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT, 0600)).get(), std::string("x"), path));
  UniqueFd read_only(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  Status w = write_all(read_only.get(), std::string("data"), path);
  ASSERT_FALSE(w);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(w.message(), path + ": cannot write: Bad file descriptor");
  Status pw = pwrite_all(read_only.get(), "d", 1, 0, path);
  EXPECT_EQ(errno, EBADF);
  EXPECT_THAT(pw.message(), HasSubstr("cannot write"));
  UniqueFd write_only(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  char c;
  auto r = pread_full(write_only.get(), &c, 1, 0, path);
  ASSERT_FALSE(r);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(r.message(), path + ": cannot read: Bad file descriptor");
}

TEST(PosixFile, FsyncOfFilesAndDirectories) {
  testing::TempDir dir("posix");
  EXPECT_TRUE(fsync_path(dir.path(), /*directory=*/true));
  const std::string file = dir.path() + "/f";
  UniqueFd(::open(file.c_str(), O_WRONLY | O_CREAT, 0600));
  EXPECT_TRUE(fsync_path(file, false));
  Status not_dir = fsync_path(file, /*directory=*/true);
  ASSERT_FALSE(not_dir);
  EXPECT_EQ(errno, ENOTDIR);
  Status missing = fsync_path(dir.path() + "/none", false);
  ASSERT_FALSE(missing);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(missing.message(), dir.path() + "/none: cannot open for fsync: No such file or directory");
}

TEST(PosixFile, IsSameFileComparesDeviceAndInode) {
  testing::TempDir dir("posix");
  const std::string a = dir.path() + "/a";
  const std::string b = dir.path() + "/b";
  UniqueFd fd(::open(a.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(fd.valid());
  UniqueFd(::open(b.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  EXPECT_TRUE(is_same_file(fd.get(), a));
  EXPECT_FALSE(is_same_file(fd.get(), b));
  // A symbolic link to the file is not followed.
  ASSERT_EQ(::symlink(a.c_str(), (dir.path() + "/link").c_str()), 0);
  EXPECT_FALSE(is_same_file(fd.get(), dir.path() + "/link"));
  // Renamed: the old name is gone, the new one names the open file.
  const std::string c = dir.path() + "/c";
  ASSERT_EQ(::rename(a.c_str(), c.c_str()), 0);
  EXPECT_FALSE(is_same_file(fd.get(), a));
  EXPECT_TRUE(is_same_file(fd.get(), c));
  // Replaced by another file under the same name.
  ASSERT_EQ(::rename(b.c_str(), c.c_str()), 0);
  EXPECT_FALSE(is_same_file(fd.get(), c));
  EXPECT_FALSE(is_same_file(-1, b));
}

TEST(RenameNoReplace, RefusesExistingTarget) {
  testing::TempDir dir("posix");
  const std::string a = write_text_file(dir.path() + "/a", "A");
  const std::string b = write_text_file(dir.path() + "/b", "B");
  bool target_exists = false;
  Status refused = rename_no_replace(a, b, &target_exists);
  EXPECT_FALSE(refused);
  EXPECT_TRUE(target_exists);
  EXPECT_THAT(refused.message(), HasSubstr(b));
  EXPECT_EQ(read_text_file(b), "B");
  Status renamed = rename_no_replace(a, dir.path() + "/c", &target_exists);
  EXPECT_TRUE(renamed) << renamed.message();
  EXPECT_FALSE(exists(a));
  EXPECT_EQ(read_text_file(dir.path() + "/c"), "A");
  EXPECT_FALSE(rename_no_replace(dir.path() + "/missing", dir.path() + "/d", &target_exists));
  EXPECT_FALSE(target_exists);
}

TEST(RenameToFreeName, TakesTheNextFreeSuffix) {
  testing::TempDir dir("posix");
  const std::string target = write_text_file(dir.path() + "/stream.seg0.mp4", "precious");
  write_text_file(dir.path() + "/stream.seg0-1.mp4", "also precious");
  StatusOr<std::string> used = rename_to_free_name(write_text_file(dir.path() + "/.tmp-a", "new"), target);
  ASSERT_TRUE(used) << used.message();
  EXPECT_EQ(*used, dir.path() + "/stream.seg0-2.mp4");
  EXPECT_EQ(read_text_file(*used), "new");
  EXPECT_EQ(read_text_file(target), "precious");
  EXPECT_EQ(read_text_file(dir.path() + "/stream.seg0-1.mp4"), "also precious");
  // No extension (a leading dot is none): the suffix goes at the end.
  const std::string hidden = write_text_file(dir.path() + "/.hidden", "x");
  used = rename_to_free_name(write_text_file(dir.path() + "/.tmp-b", "y"), hidden);
  ASSERT_TRUE(used) << used.message();
  EXPECT_EQ(*used, dir.path() + "/.hidden-1");
  // A source that is not there: the error, nothing renamed.
  used = rename_to_free_name(dir.path() + "/missing", dir.path() + "/free");
  ASSERT_FALSE(used);
  EXPECT_THAT(used.message(), HasSubstr(dir.path() + "/missing"));
  EXPECT_FALSE(exists(dir.path() + "/free"));
}

}  // namespace
}  // namespace tensorscope
