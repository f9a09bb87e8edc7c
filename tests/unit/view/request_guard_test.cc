// request_guard_test.cc — token, Host, Origin and request-target checks of the view server.
#include "tensorscope/view/request_guard.h"

#include <gtest/gtest.h>

#include <set>

namespace tensorscope::view {
namespace {

TEST(RequestGuardTest, TokensAreRandomHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    auto t = make_token();
    ASSERT_TRUE(t.is_ok());
    ASSERT_EQ(t->size(), 32u);
    for (char c : *t) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << *t;
    seen.insert(*t);
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST(RequestGuardTest, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(RequestGuardTest, TargetsAreSplitAndDecoded) {
  auto t = parse_target("/files/0/a%20b.mp4?t=x%2By&q=a+b&empty=&flag");
  ASSERT_TRUE(t.is_ok()) << t.message();
  EXPECT_EQ(t->path, "/files/0/a b.mp4");
  EXPECT_EQ(t->query.at("t"), "x+y");
  EXPECT_EQ(t->query.at("q"), "a b");
  EXPECT_EQ(t->query.at("empty"), "");
  EXPECT_EQ(t->query.at("flag"), "");
  auto first = parse_target("/?t=1&t=2");
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->query.at("t"), "1");
}

TEST(RequestGuardTest, BadTargetsAreRefused) {
  EXPECT_FALSE(parse_target("").is_ok());
  EXPECT_FALSE(parse_target("files").is_ok());
  EXPECT_FALSE(parse_target("http://evil/").is_ok());
  EXPECT_FALSE(parse_target("/a%2").is_ok());
  EXPECT_FALSE(parse_target("/a%zz").is_ok());
  EXPECT_FALSE(parse_target("/a%00b").is_ok());
  EXPECT_FALSE(parse_target("/?a=%").is_ok());
  EXPECT_FALSE(parse_target("/" + std::string(5000, 'a')).is_ok());
  std::string many = "/?";
  for (int i = 0; i < 40; ++i) many += "k" + std::to_string(i) + "=1&";
  EXPECT_FALSE(parse_target(many).is_ok());
}

TEST(RequestGuardTest, HostMustNameTheServer) {
  const auto names = allowed_host_names("127.0.0.1", {"box.lan"});
  EXPECT_TRUE(host_allowed("127.0.0.1:8080", names, 8080));
  EXPECT_TRUE(host_allowed("localhost:8080", names, 8080));
  EXPECT_TRUE(host_allowed("[::1]:8080", names, 8080));
  EXPECT_TRUE(host_allowed("localhost", names, 8080));
  EXPECT_TRUE(host_allowed("box.lan:8080", names, 8080));
  EXPECT_FALSE(host_allowed("localhost:8081", names, 8080));
  EXPECT_FALSE(host_allowed("evil.com:8080", names, 8080));  // DNS rebinding
  EXPECT_FALSE(host_allowed("localhost.evil.com:8080", names, 8080));
  EXPECT_FALSE(host_allowed("", names, 8080));
  EXPECT_FALSE(host_allowed("127.0.0.1:8080x", names, 8080));
  const auto remote = allowed_host_names("10.1.2.3", {});
  EXPECT_TRUE(host_allowed("10.1.2.3:9000", remote, 9000));
  EXPECT_FALSE(host_allowed("localhost:9000", remote, 9000));
}

TEST(RequestGuardTest, OriginMustBeTheServersOwn) {
  const auto names = allowed_host_names("127.0.0.1", {});
  EXPECT_TRUE(origin_allowed("", names, 8080));  // not a browser
  EXPECT_TRUE(origin_allowed("http://127.0.0.1:8080", names, 8080));
  EXPECT_TRUE(origin_allowed("http://localhost:8080", names, 8080));
  EXPECT_FALSE(origin_allowed("http://evil.com", names, 8080));
  EXPECT_FALSE(origin_allowed("https://127.0.0.1:8080", names, 8080));
  EXPECT_FALSE(origin_allowed("null", names, 8080));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:9999", names, 8080));
}

}  // namespace
}  // namespace tensorscope::view
