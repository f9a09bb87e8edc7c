// core_gate_test.cc — ClientCore's gates without a daemon: a track's tensors have a
// max_hz gate of their own (admit_tracked), per stream, apart from push()'s call counts,
// and carry the stream's render hint; a call not admitted is counted as gated.
#include <gtest/gtest.h>

#include <string>

#include "client_core.h"
#include "temp_dir.h"

namespace tensorscope {
namespace {

CoreOptions options(const std::string& runtime_dir, double max_hz) {
  CoreOptions o;
  o.session = "gates";
  o.runtime_dir = runtime_dir;  // no daemon there
  o.connect_timeout_ms = 0;
  o.max_hz = max_hz;
  return o;
}

TEST(ClientCoreGate, TrackedTensorsHaveTheirOwnMaxHzGatePerStream) {
  testing::TempDir dir("ts-gates");
  ClientCore core(options(dir.path(), 0.01));  // one call per stream in 100 s
  core.set_render_hint("s", 3);
  const auto first = core.admit_tracked("s");
  EXPECT_TRUE(first.admitted);
  EXPECT_EQ(first.render_hint, 3);
  EXPECT_FALSE(core.admit_tracked("s").admitted);
  EXPECT_TRUE(core.admit_tracked("t").admitted) << "per stream";
  EXPECT_TRUE(core.admit("s").admitted) << "push()'s gate counts its own calls";
  EXPECT_FALSE(core.admit("s").admitted);
  EXPECT_EQ(core.stats().gated, 2u);
}

TEST(ClientCoreGate, WithoutMaxHzEveryTrackedCallIsAdmitted) {
  testing::TempDir dir("ts-gates");
  ClientCore core(options(dir.path(), 0));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(core.admit_tracked("s").admitted);
  EXPECT_EQ(core.stats().gated, 0u);
}

}  // namespace
}  // namespace tensorscope
