// core_option_table_test.cc — the one table of client options (core_option_table.h): the
// defaults are within their bounds, each bound is said in the Python package's words, and
// a client made with an option out of bounds refuses every push and says why in stats().
#include "core_option_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "temp_dir.h"

namespace tensorscope {
namespace {

using ::testing::HasSubstr;

// The names of the table, in order.
struct NameCollector {
  std::vector<std::string> names;
  template <typename T, typename Rule>
  void option(const char* n, const T&, Rule) {
    names.emplace_back(n);
  }
};

TEST(CoreOptionTable, DefaultsAreWithinTheirBoundsAndNamesAreUnique) {
  EXPECT_EQ(core_options_problem(CoreOptions{}), "");
  NameCollector names;
  const CoreOptions defaults;
  visit_core_options(names, defaults);
  EXPECT_GE(names.names.size(), 20u);
  EXPECT_EQ(std::set<std::string>(names.names.begin(), names.names.end()).size(), names.names.size());
}

TEST(CoreOptionTable, EachBoundIsSaidInThePythonPackagesWords) {
  auto problem = [](auto change) {
    CoreOptions o;
    change(o);
    return core_options_problem(o);
  };
  EXPECT_EQ(problem([](CoreOptions& o) { o.every_n = 0; }), "every_n must be at least 1, not 0");
  EXPECT_EQ(problem([](CoreOptions& o) { o.ring_slots = 0; }), "ring_slots must be between 1 and 1048576, not 0");
  EXPECT_EQ(problem([](CoreOptions& o) { o.shm_budget = 1; }),
            "shm_budget must be between 65536 and 1099511627776, not 1");
  EXPECT_EQ(problem([](CoreOptions& o) { o.shm_budget = ~uint64_t{0}; }),
            "shm_budget must be between 65536 and 1099511627776, not 18446744073709551615");
  EXPECT_EQ(problem([](CoreOptions& o) { o.reconnect_interval_ms = 5; }),
            "reconnect_interval_ms must be between 10 and 3600000, not 5");
  EXPECT_EQ(problem([](CoreOptions& o) { o.rank = -1; }), "rank must be between 0 and 1073741824, not -1");
  EXPECT_EQ(problem([](CoreOptions& o) { o.rank = std::nullopt; }), "");
  EXPECT_EQ(problem([](CoreOptions& o) { o.max_hz = -1; }), "max_hz must be at least 0, not -1.0");
  EXPECT_EQ(problem([](CoreOptions& o) { o.max_hz = NAN; }), "max_hz must be at least 0, not nan");
  EXPECT_EQ(problem([](CoreOptions& o) { o.max_hz = INFINITY; }), "");  // no limit
  EXPECT_EQ(problem([](CoreOptions& o) { o.runtime_dir = std::string("a\0b", 3); }),
            "runtime_dir contains a NUL character");
  EXPECT_THAT(problem([](CoreOptions& o) { o.session = "bad name"; }), HasSubstr("invalid session name"));
  EXPECT_EQ(problem([](CoreOptions& o) { o.anomaly_capture_steps = -1; }),
            "anomaly_capture_steps must be between 0 and 1048576, not -1");
}

TEST(CoreOptionTable, AClientWithAnOptionOutOfBoundsRefusesEveryPushAndSaysWhy) {
  testing::TempDir dir("ts-options");
  CoreOptions o;
  o.session = "options";
  o.runtime_dir = dir.path();
  o.connect_timeout_ms = 0;
  o.every_n = 0;
  ClientCore core(o);
  EXPECT_EQ(core.ready(), PushResult::kRefused);
  const ClientStats s = core.stats();
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.connection_note, "every_n must be at least 1, not 0: every push is refused");
}

}  // namespace
}  // namespace tensorscope
