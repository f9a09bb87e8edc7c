// registration_test.cc — the supervisor's checks of a registration request
// (registration.h): each refusal says what is wrong, and a good request opens the
// producer's segment.
#include "supervisor/registration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "temp_dir.h"
#include "tensorscope/shared/control_protocol.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {
namespace {

using ::testing::HasSubstr;

nlohmann::json request(const std::string& segment) {
  return {{control::kType, control::kRegister},
          {"abi", wire::kAbiVersion},
          {control::kProtocol, control::kControlProtocolVersion},
          {"session", "s"},
          {"segment", segment}};
}

TEST(Registration, EachRefusalSaysWhatIsWrong) {
  testing::TempDir dir("ts-register");
  const PeerCredentials me{::getpid(), ::geteuid(), ::getegid()};
  const std::string mine = segment_file_name("s", ::getpid(), 0);
  auto refusal = [&](nlohmann::json m) { return check_registration(m, me, "s", dir.path()).message(); };

  nlohmann::json m = request(mine);
  m.erase("abi");
  EXPECT_THAT(refusal(m), HasSubstr("without an ABI version"));
  m = request(mine);
  m["abi"] = wire::kAbiVersion + 1;
  EXPECT_THAT(refusal(m), HasSubstr("wire ABI version " + std::to_string(wire::kAbiVersion + 1)));
  m = request(mine);
  m[control::kProtocol] = "one";
  EXPECT_THAT(refusal(m), HasSubstr("control protocol version"));
  m = request(mine);
  m["session"] = "other";
  EXPECT_THAT(refusal(m), HasSubstr("registration for session"));
  EXPECT_THAT(refusal(request("../etc/passwd")), HasSubstr("bad segment name"));
  EXPECT_THAT(refusal(request(segment_file_name("s", ::getpid() + 1, 0))),
              HasSubstr("does not belong to the connecting pid"));
  EXPECT_THAT(refusal(request(mine)), HasSubstr("cannot open segment"));  // no such file
}

TEST(Registration, AGoodRequestOpensTheSegment) {
  testing::TempDir dir("ts-register");
  const std::string name = segment_file_name("s", ::getpid(), 0);
  auto layout = plan_segment_layout(1 << 20, 64);
  ASSERT_TRUE(layout.is_ok()) << layout.message();
  auto made = SharedSegment::create(dir.path() + "/" + name, *layout, {::getpid(), ::geteuid(), 3, "s"});
  ASSERT_TRUE(made.is_ok()) << made.message();
  const PeerCredentials me{::getpid(), ::geteuid(), ::getegid()};
  StatusOr<AcceptedRegistration> accepted = check_registration(request(name), me, "s", dir.path());
  ASSERT_TRUE(accepted.is_ok()) << accepted.message();
  EXPECT_EQ(accepted->segment->header()->rank, 3);
  EXPECT_EQ(accepted->segment_path, dir.path() + "/" + name);
  ::close(accepted->segment_fd);
  // The peer is another process than the one the segment names.
  const PeerCredentials other{::getpid() + 1, ::geteuid(), ::getegid()};
  EXPECT_THAT(check_registration(request(name), other, "s", dir.path()).message(), HasSubstr("does not belong"));
  const nlohmann::json reply = registered_reply(7, false, "no GPU", {"/runs/fp32", "a note"});
  EXPECT_EQ(reply[control::kProducerId], 7);
  EXPECT_EQ(reply["cuda_note"], "no GPU");
  EXPECT_EQ(reply["reference"], "/runs/fp32");
  EXPECT_EQ(reply["reference_note"], "a note");
  EXPECT_EQ(reply[control::kType], control::kRegistered);
}

}  // namespace
}  // namespace tensorscope::daemon
