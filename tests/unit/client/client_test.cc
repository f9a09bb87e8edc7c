// Client behaviour that needs no daemon: gating (every_n, max_hz, set_enabled), counters,
// options, and never blocking or throwing when nobody listens.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include <torch/torch.h>

#include <tensorscope/tensorscope.h>

#include "client_impl.h"
#include "core_option_table.h"

#include "temp_dir.h"

namespace tensorscope {
namespace {

ClientOptions isolated(const testing::TempDir& dir) {
  return ClientOptions().session("unit").runtime_dir(dir.path() + "/run").shm_budget(4 << 20);
}

TEST(Client, EveryNPushesTheFirstAndEveryNthCallPerStream) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir).every_n(3));
  const torch::Tensor t = torch::ones({4});
  std::vector<PushResult> a, b;
  for (int i = 0; i < 7; ++i) a.push_back(client.push("a", t));
  for (int i = 0; i < 4; ++i) b.push_back(client.push("b", t));
  // No daemon: admitted calls report kNotConnected, the others kGated.
  const std::vector<PushResult> expected_a = {PushResult::kNotConnected, PushResult::kGated, PushResult::kGated,
                                              PushResult::kNotConnected, PushResult::kGated, PushResult::kGated,
                                              PushResult::kNotConnected};
  const std::vector<PushResult> expected_b = {PushResult::kNotConnected, PushResult::kGated, PushResult::kGated,
                                              PushResult::kNotConnected};
  EXPECT_EQ(a, expected_a);
  EXPECT_EQ(b, expected_b);
  const ClientStats s = client.stats();
  EXPECT_EQ(s.not_connected, 5u);
  EXPECT_EQ(s.gated, 6u);
  EXPECT_EQ(s.pushed, 0u);
  EXPECT_FALSE(s.connected);
}

TEST(Client, MaxHzLimitsEachStream) {
  testing::TempDir dir("ts-client");
  // At most one push per second per stream: wide enough that a busy machine does not
  // let the second call through.
  Client client(isolated(dir).max_hz(1));
  const torch::Tensor t = torch::ones({1});
  EXPECT_EQ(client.push("x", t), PushResult::kNotConnected);
  EXPECT_EQ(client.push("x", t), PushResult::kGated);
  EXPECT_EQ(client.push("y", t), PushResult::kNotConnected);  // streams are independent
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(client.push("x", t), PushResult::kNotConnected);
}

TEST(Client, DisabledClientGatesEverything) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir).enabled(false));
  EXPECT_FALSE(client.enabled());
  EXPECT_EQ(client.push("x", torch::ones({2})), PushResult::kGated);
  client.set_enabled(true);
  EXPECT_EQ(client.push("x", torch::ones({2})), PushResult::kNotConnected);
  EXPECT_EQ(client.stats().gated, 1u);
}

TEST(Client, StepAndRank) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir).rank(5));
  EXPECT_EQ(client.rank(), 5);
  EXPECT_EQ(client.step(), 0);
  client.set_step(41);
  EXPECT_EQ(client.next_step(), 42);
  EXPECT_EQ(client.step(), 42);
  ::setenv("RANK", "3", 1);
  Client from_env(isolated(dir));
  EXPECT_EQ(from_env.rank(), 3);
  ::setenv("RANK", "not-a-number", 1);
  Client bad_env(isolated(dir));
  EXPECT_EQ(bad_env.rank(), 0);
  ::unsetenv("RANK");
}

// Every option of the list (client_option_list.h) comes from ClientOptions with its
// default, through core_options().
struct OptionValues {
  std::map<std::string, std::string> values;
  void option(const char* n, const std::string& v, option_rules::Text) { values[n] = v; }
  template <typename T>
  void option(const char* n, const T& v, option_rules::Integer) {
    values[n] = std::to_string(v);
  }
  void option(const char* n, const double& v, option_rules::Number) { values[n] = std::to_string(v); }
  void option(const char* n, const bool& v, option_rules::Flag) { values[n] = v ? "true" : "false"; }
  void option(const char* n, const std::optional<int>& v, option_rules::Rank) {
    values[n] = v ? std::to_string(*v) : "unset";
  }
};

TEST(Client, OptionsDefaultToTheTableOfOptions) {
  OptionValues from_client, from_table;
  const CoreOptions core = core_options(ClientOptions());
  const CoreOptions defaults;
  visit_core_options(from_client, core);
  visit_core_options(from_table, defaults);
  EXPECT_EQ(from_client.values, from_table.values);
  EXPECT_GE(from_table.values.size(), 20u);
  // And each setter reaches its field.
  const CoreOptions set = core_options(ClientOptions().every_n(7).anomaly_capture_steps(9).ring_slots(64));
  EXPECT_EQ(set.every_n, 7);
  EXPECT_EQ(set.anomaly_capture_steps, 9);
  EXPECT_EQ(set.ring_slots, 64u);
}

TEST(Client, AnOptionOutOfBoundsRefusesEveryPushAndSaysWhy) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir).ring_slots(0));
  EXPECT_EQ(client.push("x", torch::ones({1})), PushResult::kRefused);
  EXPECT_EQ(client.stats().connection_note, "ring_slots must be between 1 and 1048576, not 0: every push is refused");
}

TEST(Client, BadSessionNameRefusesEveryPushWithoutThrowing) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir).session("../etc"));
  EXPECT_EQ(client.push("x", torch::ones({1})), PushResult::kRefused);
  EXPECT_EQ(client.stats().refused, 1u);
}

TEST(Client, UndefinedAndOddTensorsNeverThrow) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir));
  EXPECT_NO_THROW(client.push("undefined", torch::Tensor()));
  EXPECT_NO_THROW(client.push("complex", torch::randn({2}, torch::kComplexFloat)));
  EXPECT_NO_THROW(client.push("", torch::ones({1})));
  const ClientStats s = client.stats();
  EXPECT_EQ(s.not_connected + s.refused + s.gated, 3u);
}

TEST(Client, EveryCallWithoutADaemonIsCountedAsNotConnected) {
  testing::TempDir dir("ts-client");
  Client client(isolated(dir));
  const torch::Tensor t = torch::randn({256});
  for (int i = 0; i < 100000; ++i) client.push("fast", t);
  EXPECT_EQ(client.stats().not_connected, 100000u);
  EXPECT_EQ(client.stats().bytes, 0u);
}

}  // namespace
}  // namespace tensorscope
