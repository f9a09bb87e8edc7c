// status_test.cc — Status and StatusOr: ok and failed states, the message of a failed
// system call (Status::from_errno), a StatusOr built from an ok Status.
#include "tensorscope/base/status.h"

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

namespace tensorscope {
namespace {

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::ok());
  const Status failed = Status::error("it broke");
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.message(), "it broke");
}

TEST(Status, FromErrnoNamesWhatFailedAndWhy) {
  const Status full = Status::from_errno("cannot write /out/a.mp4", ENOSPC);
  EXPECT_FALSE(full);
  EXPECT_EQ(full.message(), "cannot write /out/a.mp4: No space left on device");
  EXPECT_EQ(Status::from_errno("socket", EACCES).message(), "socket: Permission denied");
}

TEST(StatusOr, ValueOrError) {
  StatusOr<int> value(7);
  ASSERT_TRUE(value);
  EXPECT_EQ(*value, 7);
  StatusOr<int> failed(Status::from_errno("open", ENOENT));
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.message(), "open: No such file or directory");
  StatusOr<int> wrong(Status::ok());  // a bug in the caller: still an error, never a value
  EXPECT_FALSE(wrong);
}

}  // namespace
}  // namespace tensorscope
