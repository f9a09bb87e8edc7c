// control_protocol_test.cc — the control protocol's names: message_type reads only a
// string "type" of an object, the 13 type names are distinct and spelled as the wire
// carries them, error_message has the error shape.
#include "tensorscope/shared/control_protocol.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tensorscope::control {
namespace {

TEST(ControlProtocol, MessageTypeReadsAStringTypeOfAnObjectOnly) {
  EXPECT_EQ(message_type({{"type", "register"}, {"abi", 2}}), "register");
  EXPECT_EQ(message_type({{"type", 1}}), "");
  EXPECT_EQ(message_type({{"kind", "status"}}), "");
  EXPECT_EQ(message_type(nlohmann::json::array({"type", "status"})), "");
  EXPECT_EQ(message_type(nlohmann::json("status")), "");
  EXPECT_EQ(message_type(nlohmann::json()), "");
}

TEST(ControlProtocol, TypeNamesAreDistinctAndAsOnTheWire) {
  const std::set<std::string> names = {kRegister, kRegistered, kError, kStatus,       kConfig,   kAttach, kDetach,
                                       kShutdown, kHeartbeat,  kFile,  kAttachFailed, kDetached, kBye};
  EXPECT_EQ(names.size(), 13u);
  // A rename is a protocol change: these strings are what old peers send.
  EXPECT_EQ(std::string(kRegister), "register");
  EXPECT_EQ(std::string(kAttachFailed), "attach_failed");
  EXPECT_EQ(std::string(kProducerId), "producer_id");
}

TEST(ControlProtocol, ErrorMessageHasTheErrorShape) {
  const nlohmann::json e = error_message("no such session");
  EXPECT_EQ(message_type(e), kError);
  EXPECT_EQ(e.value(kMessage, ""), "no such session");
  EXPECT_EQ(e.size(), 2u);
}

}  // namespace
}  // namespace tensorscope::control
