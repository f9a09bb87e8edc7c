// The module tree log: the first logged step of a track in full, indented by nesting;
// identical steps as one line; changes marked against the previous logged step; each
// track compared with itself; malformed records refused without writing.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tensorscope/recording/tree_log.h"
#include "temp_dir.h"
#include "tensorscope/shared/module_tree_format.h"

namespace tensorscope::recording {
namespace {

ModuleTreeCall call(std::string path, std::string type, std::string in, std::string out, uint32_t n = 0,
                    uint32_t thread = 0) {
  ModuleTreeCall c;
  c.thread = thread;
  c.call = n;
  c.path = std::move(path);
  c.type = std::move(type);
  if (!in.empty()) c.inputs = {std::move(in)};
  c.output = std::move(out);
  return c;
}

ModuleTree step_tree(const std::string& batch) {
  ModuleTree t;
  t.calls = {call("features.0", "Conv2d", "float32[" + batch + ",1,8,8]@cpu", "float32[" + batch + ",4,6,6]@cpu"),
             call("features.1", "BatchNorm2d", "float32[" + batch + ",4,6,6]@cpu", "float32[" + batch + ",4,6,6]@cpu"),
             call("head", "Linear", "float32[" + batch + ",144]@cpu", "float32[" + batch + ",3]@cpu")};
  return t;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TreeLog, TheFirstStepIsListedInFullIndentedByNesting) {
  const std::string got = format_tree_step("net", 0, step_tree("8"), nullptr, 0);
  EXPECT_EQ(got,
            "== step 0 | net | 3 calls | first logged step\n"
            "    net\n"
            "      net.features\n"
            "        net.features.0  Conv2d       float32[8,1,8,8]@cpu -> float32[8,4,6,6]@cpu\n"
            "        net.features.1  BatchNorm2d  float32[8,4,6,6]@cpu -> float32[8,4,6,6]@cpu\n"
            "      net.head          Linear       float32[8,144]@cpu -> float32[8,3]@cpu\n");
}

TEST(TreeLog, AnIdenticalStepIsOneLine) {
  const ModuleTree t = step_tree("8");
  EXPECT_EQ(format_tree_step("net", 10, t, &t, 5), "== step 10 | net | 3 calls | same as step 5\n");
}

TEST(TreeLog, ChangesNewAndGoneCallsAreMarked) {
  const ModuleTree before = step_tree("8");
  ModuleTree now = step_tree("4");
  now.calls[1] = before.calls[1];                                                          // unchanged
  now.calls.erase(now.calls.begin());                                                      // features.0 gone ...
  now.calls.push_back(call("head", "Linear", "float32[4,3]@cpu", "float32[4,3]@cpu", 1));  // ... head#1 new
  const std::string got = format_tree_step("net", 20, now, &before, 10);
  // Only what changed is shown (under its parents).
  EXPECT_EQ(got,
            "== step 20 | net | 3 calls | changed since step 10: 1 changed, 1 new, 1 gone; "
            "1 unchanged call not shown\n"
            "    net\n"
            "*     net.head    Linear  float32[4,144]@cpu -> float32[4,3]@cpu"
            "  (was float32[8,144]@cpu -> float32[8,3]@cpu)\n"
            "+     net.head#1  Linear  float32[4,3]@cpu -> float32[4,3]@cpu\n"
            "-   net.features.0  (not called; was float32[8,1,8,8]@cpu -> float32[8,4,6,6]@cpu)\n");
}

ModuleTree with_values(ModuleTree t, std::initializer_list<const char*> values) {
  size_t i = 0;
  for (const char* v : values) t.calls[i++].value = v;
  return t;
}

// Version 2 payloads: the client says which outputs changed beyond its tolerance.
TEST(TreeLog, ValueChangesAreMarkedAndCounted) {
  const ModuleTree before = with_values(step_tree("8"), {"?", "?", "?"});
  EXPECT_EQ(format_tree_step("net", 1, with_values(step_tree("8"), {"=", "~", "="}), &before, 0),
            "== step 1 | net | 3 calls | changed since step 0: 1 value changed; 2 unchanged calls not shown\n"
            "    net\n"
            "      net.features\n"
            "~       net.features.1  BatchNorm2d  float32[8,4,6,6]@cpu -> float32[8,4,6,6]@cpu  (values changed)\n");
  EXPECT_EQ(format_tree_step("net", 1, with_values(step_tree("8"), {"=", "=", "="}), &before, 0),
            "== step 1 | net | 3 calls | same as step 0, values within tolerance\n");
  EXPECT_EQ(format_tree_step("net", 1, with_values(step_tree("8"), {"=", "?", "="}), &before, 0),
            "== step 1 | net | 3 calls | same as step 0, values within tolerance (1 not compared)\n");
  EXPECT_EQ(format_tree_step("net", 1, with_values(step_tree("8"), {"?", "?", "?"}), &before, 0),
            "== step 1 | net | 3 calls | same as step 0, values not compared\n");
  // Another shape is a change ('*'), whatever the value says; the first step marks nothing.
  const std::string shapes = format_tree_step("net", 2, with_values(step_tree("4"), {"~", "~", "~"}), &before, 0);
  EXPECT_EQ(shapes.find('~'), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("| changed since step 0: 3 changed\n"), std::string::npos) << shapes;
  const std::string first = format_tree_step("net", 0, with_values(step_tree("8"), {"~", "~", "~"}), nullptr, 0);
  EXPECT_EQ(first, format_tree_step("net", 0, step_tree("8"), nullptr, 0));
}

// A payload built to blow the log up (thousands of calls, each nested hundreds of levels
// deep, on alternating threads) gives a bounded block that says what it left out.
TEST(TreeLog, AHugeTreeGivesABoundedBlock) {
  ModuleTree t;
  std::string deep = "m";
  for (int i = 0; i < 250; ++i) deep += ".m";
  for (uint32_t i = 0; i < 2000; ++i)
    t.calls.push_back(call(deep, "Linear", "float32[1]@cpu", "float32[1]@cpu", i, i % 2));
  const std::string payload = format_module_tree(t);
  auto parsed = parse_module_tree(payload);
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  const std::string got = format_tree_step("net", 0, *parsed, nullptr, 0);
  EXPECT_LT(got.size(), size_t{3} << 20);
  EXPECT_NE(got.find("more calls not shown (block over 2 MiB)\n"), std::string::npos);
  // Indentation stops at 32 levels (after the mark column of 4).
  EXPECT_NE(got.find("\n" + std::string(4 + 2 * 32, ' ') + "net.m"), std::string::npos);
  EXPECT_EQ(got.find(std::string(4 + 2 * 32 + 1, ' ') + "net.m"), std::string::npos);
}

TEST(TreeLog, ReorderedCallsAndOtherThreadsAreShown) {
  ModuleTree before;
  before.calls = {call("a", "Linear", "", "float32[1]@cpu"), call("b", "Linear", "", "float32[1]@cpu")};
  ModuleTree now;
  now.calls = {before.calls[1], before.calls[0], call("a", "Linear", "", "float32[1]@cpu", 0, 1)};
  now.omitted = 2;
  const std::string got = format_tree_step("m", 3, now, &before, 2);
  EXPECT_NE(got.find("== step 3 | m | 3 calls (+2 not listed) | changed since step 2: 1 new, order changed, "
                     "not listed 0 -> 2\n"),
            std::string::npos)
      << got;
  EXPECT_NE(got.find("+     [thread 1] m.a  Linear  - -> float32[1]@cpu\n"), std::string::npos) << got;
}

TEST(TreeLog, TheWriterComparesEachTrackWithItsOwnPreviousStep) {
  testing::TempDir dir("ts-tree");
  const std::string path = dir.path() + "/tree/rank0_pid1.log";
  auto writer = TreeLogWriter::open(path);
  ASSERT_TRUE(writer.is_ok()) << writer.message();
  ASSERT_TRUE((*writer)->append("net", 0, format_module_tree(step_tree("8"))).is_ok());
  ModuleTree other;
  other.calls = {call("", "Linear", "float32[2,2]@cpu", "float32[2,2]@cpu")};
  ASSERT_TRUE((*writer)->append("aux", 0, format_module_tree(other)).is_ok());
  ASSERT_TRUE((*writer)->append("net", 1, format_module_tree(step_tree("8"))).is_ok());
  ASSERT_TRUE((*writer)->append("aux", 1, format_module_tree(other)).is_ok());
  // Malformed: refused, nothing written.
  const Status bad = (*writer)->append("net", 2, "garbage\n");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find(path), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("step 2"), std::string::npos) << bad.message();
  writer = Status::error("closed");

  const std::string log = read_all(path);
  EXPECT_EQ(log.rfind("# tensorscope module tree log\n== step 0 | net | 3 calls | first logged step\n", 0), 0u) << log;
  EXPECT_NE(
      log.find("== step 0 | aux | 1 call | first logged step\n    aux  Linear  float32[2,2]@cpu -> float32[2,2]@cpu\n"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("== step 1 | net | 3 calls | same as step 0\n== step 1 | aux | 1 call | same as step 0\n"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("step 2"), std::string::npos) << log;

  // Reopened (a restarted worker): appends after the existing blocks; another file is refused.
  auto again = TreeLogWriter::open(path);
  ASSERT_TRUE(again.is_ok()) << again.message();
  ASSERT_TRUE((*again)->append("net", 3, format_module_tree(step_tree("8"))).is_ok());
  EXPECT_NE(read_all(path).find("== step 3 | net | 3 calls | first logged step\n"), std::string::npos);
  std::ofstream(dir.path() + "/other.log") << "something else\n";
  auto refused = TreeLogWriter::open(dir.path() + "/other.log");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("not a module tree log"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace tensorscope::recording
