// output_budget_test.cc — the session's disk budget: the oldest videos go first, down to
// nine tenths of the budget; each stream's newest video and the videos around an anomaly
// stay; a session under its budget, or without one, loses nothing; the session measured
// by part.
#include "supervisor/output_budget.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

BudgetVideo video(const std::string& stream, int segment, int64_t first, int64_t last, uint64_t bytes, int rank = 0,
                  int64_t pid = 7) {
  BudgetVideo v;
  v.entry.path = stream + "__" + std::to_string(segment) + ".mp4";
  v.entry.stream = stream;
  v.entry.device = "cpu";
  v.entry.mode = "line";
  v.entry.rank = rank;
  v.entry.pid = pid;
  v.entry.first_step = first;
  v.entry.last_step = last;
  v.bytes = bytes;
  return v;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(OutputBudget, TheOldestVideosGoDownToNineTenthsOfTheBudget) {
  std::vector<BudgetVideo> videos;
  for (int s = 0; s < 10; ++s) {
    videos.push_back(video("a", s, s * 100, s * 100 + 99, 10));
    videos.push_back(video("b", s, s * 100, s * 100 + 99, 10));
  }
  // 200 used of a 150 budget: down to 135, so 7 videos (70) go, the oldest steps first.
  const BudgetPlan plan = plan_output_budget(videos, 200, 150, {}, 16);
  ASSERT_EQ(plan.remove.size(), 7u);
  EXPECT_EQ(plan.freed, 70u);
  EXPECT_FALSE(plan.still_over);
  for (const char* gone : {"a__0.mp4", "b__0.mp4", "a__1.mp4", "b__1.mp4", "a__2.mp4", "b__2.mp4"}) {
    EXPECT_TRUE(has(plan.remove, gone)) << gone;
  }
  EXPECT_FALSE(has(plan.remove, "a__9.mp4"));
}

TEST(OutputBudget, EachStreamsNewestAndTheAnomaliesEvidenceStay) {
  const std::vector<BudgetVideo> videos = {video("a", 0, 0, 99, 10),    video("a", 1, 100, 199, 10),
                                           video("a", 2, 200, 299, 10), video("a", 3, 300, 399, 10),  // a's newest
                                           video("b", 0, 0, 99, 10),  // b's only video: its newest
                                           video("c", 0, 0, 99, 10, 1), video("c", 1, 100, 199, 10, 1)};  // rank 1
  // An explosion of this process at step 150 (in a__1), one of another process at 250.
  const std::vector<AnomalyMark> anomalies = {{0, 7, 150}, {0, 99, 250}};
  const BudgetPlan plan = plan_output_budget(videos, 70, 10, anomalies, 16);
  EXPECT_EQ(plan.remove, (std::vector<std::string>{"a__0.mp4", "c__0.mp4", "a__2.mp4"})) << "oldest first";
  EXPECT_EQ(plan.freed, 30u);
  EXPECT_TRUE(plan.still_over) << "40 are left of a budget of 10: said";
  // Within evidence_steps of a video's end is evidence too: step 110 is 11 steps after
  // a__0's last.
  EXPECT_FALSE(has(plan_output_budget(videos, 70, 10, {{0, 7, 110}}, 16).remove, "a__0.mp4"));
  EXPECT_TRUE(has(plan_output_budget(videos, 70, 10, {{0, 7, 110}}, 0).remove, "a__0.mp4"));
}

TEST(OutputBudget, UnderItsBudgetOrWithoutOneNothingGoes) {
  const std::vector<BudgetVideo> videos = {video("a", 0, 0, 9, 10), video("a", 1, 10, 19, 10)};
  EXPECT_TRUE(plan_output_budget(videos, 20, 20, {}, 16).remove.empty());
  EXPECT_TRUE(plan_output_budget(videos, 2000, 0, {}, 16).remove.empty());
}

TEST(OutputBudget, TheSessionIsMeasuredByPart) {
  testing::TempDir dir("ts-budget");
  const std::string s = dir.path();
  for (const char* sub : {"/steps", "/summaries", "/dumps", "/dumps/step_1", "/hdf5"}) ::mkdir((s + sub).c_str(), 0700);
  auto write = [](const std::string& path, size_t bytes) { std::ofstream(path) << std::string(bytes, 'x'); };
  write(s + "/a__cpu__rank0__pid1__line__0000.mp4", 100000);
  write(s + "/steps/a__cpu__rank0__pid1__line__0000.mp4.steps", 5000);
  write(s + "/summaries/rank0_pid1.csv", 50000);
  write(s + "/dumps/step_1/x_rank0.npy", 20000);
  write(s + "/index.json", 100);
  const SessionUsage u = measure_session(s);
  EXPECT_EQ(u.files, 5u);
  EXPECT_GE(u.videos, 105000u);
  EXPECT_GE(u.summaries, 50000u);
  EXPECT_GE(u.recordings, 20000u);
  EXPECT_GT(u.other, 0u);
  EXPECT_EQ(u.total, u.videos + u.summaries + u.recordings + u.other);
  EXPECT_FALSE(u.cut_short);
}

}  // namespace
}  // namespace tensorscope::daemon
