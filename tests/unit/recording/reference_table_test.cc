// reference_table_test.cc — a reference run's summary table read as it grows: the rows of
// the steps wanted, grouped by (step, track) with each stream's occurrences in order; a
// line still being written waits; a read stops past the step asked for; a compacted
// (replaced) file goes on where the old one ended; merged rows and stray lines are counted;
// the table of a rank is found in a session folder or below a folder of several.
#include "tensorscope/recording/reference_table.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensorscope/recording/summary_table.h"
#include "file_text.h"
#include "temp_dir.h"

namespace tensorscope::recording {
namespace {

TensorSummary tensor(const std::string& name, double l2) {
  TensorSummary s;
  s.name = name;
  s.numel = 100;
  s.l2 = l2;
  s.max_abs = l2 / 2;
  s.mean = l2 / 10;
  s.std = l2 / 5;
  s.dtype = wire::DType::kFloat32;
  return s;
}

// One record of track "net" at `step`: layer "a" called twice, then "b".
std::string record(int64_t step) {
  return summary_table_lines(
      step, 0, "net",
      {tensor("a", 1.0 + static_cast<double>(step)), tensor("b", 2), tensor("a", 100.0 + static_cast<double>(step))});
}

void append(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

TEST(ReferenceTableTest, ReadsGroupsByStepAndTrackWithEachCallInOrder) {
  testing::TempDir dir("reftable");
  const std::string path = dir.path() + "/t.csv";
  std::string text = std::string(kSummaryTableHeader) + "\n";
  for (int64_t s = 0; s < 5; ++s) text += record(s);
  text += summary_table_lines(3, 0, "grads", {tensor("a.grad", 7)});
  testing::write_text_file(path, text);

  ReferenceTable table(path);
  ASSERT_TRUE(table.read(2, 100));
  EXPECT_TRUE(table.at_end());
  EXPECT_EQ(table.last_step(), 4);
  EXPECT_EQ(table.last_step("grads"), 3);
  EXPECT_EQ(table.last_step("elsewhere"), ReferenceTable::kNoStep);
  EXPECT_EQ(table.group(1, "net"), nullptr);  // before keep_from: never kept
  const ReferenceTable::Group* g = table.group(3, "net");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->at("a").size(), 2u);
  EXPECT_EQ(g->at("a")[0].l2, 4);
  EXPECT_EQ(g->at("a")[1].l2, 103);
  EXPECT_EQ(g->at("a")[0].dtype, wire::DType::kFloat32);
  EXPECT_EQ(g->at("b").size(), 1u);
  ASSERT_NE(table.group(3, "grads"), nullptr);
  EXPECT_EQ(table.rows_kept(), 3u * 3 + 1);
  table.forget_before(4);
  EXPECT_EQ(table.group(3, "net"), nullptr);
  EXPECT_NE(table.group(4, "net"), nullptr);
  EXPECT_EQ(table.rows_kept(), 3u);
  EXPECT_EQ(table.bad_lines(), 0u);
}

TEST(ReferenceTableTest, FollowsAGrowingFileAndWaitsForALineBeingWritten) {
  testing::TempDir dir("reftable");
  const std::string path = dir.path() + "/t.csv";
  ReferenceTable table(path);
  EXPECT_FALSE(table.read(0, 100));  // not there yet: an error, tried again later
  testing::write_text_file(path, std::string(kSummaryTableHeader) + "\n" + record(0));
  ASSERT_TRUE(table.read(0, 100));
  EXPECT_EQ(table.last_step(), 0);
  const std::string next = record(1);
  const size_t half = next.size() / 2;
  append(path, next.substr(0, half));  // the writer's record, cut in the middle of a line
  ASSERT_TRUE(table.read(0, 100));
  EXPECT_TRUE(table.at_end());
  const ReferenceTable::Group* g = table.group(1, "net");
  const size_t seen = g == nullptr ? 0 : g->count("a") + g->count("b");
  append(path, next.substr(half));
  ASSERT_TRUE(table.read(0, 100));
  g = table.group(1, "net");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->at("a").size(), 2u);
  EXPECT_EQ(g->at("b").size(), 1u);
  EXPECT_LE(seen, 2u);  // the cut line was not taken half
  EXPECT_EQ(table.bad_lines(), 0u);
  EXPECT_EQ(table.rows_kept(), 6u);
}

TEST(ReferenceTableTest, StopsOnceItReadPastTheStepAskedForAndGoesOnLater) {
  testing::TempDir dir("reftable");
  const std::string path = dir.path() + "/t.csv";
  std::string text = std::string(kSummaryTableHeader) + "\n";
  for (int64_t s = 0; s < 100; ++s) text += record(s);
  testing::write_text_file(path, text);
  ReferenceTable table(path);
  ASSERT_TRUE(table.read(0, 10));
  EXPECT_FALSE(table.at_end());
  EXPECT_EQ(table.last_step(), 11);  // the first row after step 10 ends the read
  EXPECT_LE(table.rows_kept(), 12u * 3);
  table.forget_before(9);
  ASSERT_TRUE(table.read(50, 60));  // steps 12..49 are read past, not kept
  EXPECT_EQ(table.last_step(), 61);
  EXPECT_EQ(table.group(30, "net"), nullptr);
  ASSERT_NE(table.group(55, "net"), nullptr);
  EXPECT_EQ(table.group(55, "net")->at("a")[0].l2, 56);
  EXPECT_EQ(table.rows_kept(), 3u * 2 + 1 + 3u * 11 + 1);  // 9, 10, a row of 11; 50..60, a row of 61
}

TEST(ReferenceTableTest, AReplacedFileGoesOnAfterWhatWasReadAndMergedRowsAreCounted) {
  testing::TempDir dir("reftable");
  const std::string path = dir.path() + "/t.csv";
  std::string text = std::string(kSummaryTableHeader) + "\n";
  for (int64_t s = 0; s < 4; ++s) text += record(s);
  testing::write_text_file(path, text);
  ReferenceTable table(path);
  ASSERT_TRUE(table.read(0, 100));
  EXPECT_EQ(table.last_step(), 3);
  table.forget_before(4);

  // A compaction: the older steps merged (steps 2), the newest kept, more appended.
  SummaryTableRow merged;
  merged.step = 0;
  merged.track = "net";
  merged.summary = tensor("a", 9);
  merged.steps = 2;
  std::string compacted = std::string(kSummaryTableHeader) + "\n" + summary_table_line(merged) + record(2) + record(3) +
      record(4) + "not,a,row\n";
  testing::write_text_file(path + ".new", compacted);
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);
  ASSERT_TRUE(table.read(0, 100));
  EXPECT_EQ(table.reopened(), 1u);
  EXPECT_EQ(table.compacted_rows(), 1u);
  EXPECT_EQ(table.bad_lines(), 1u);
  EXPECT_EQ(table.group(3, "net"), nullptr);  // read before: not taken twice
  ASSERT_NE(table.group(4, "net"), nullptr);
  EXPECT_EQ(table.group(4, "net")->at("a").size(), 2u);
  EXPECT_EQ(table.last_step(), 4);
}

TEST(ReferenceTableTest, FindsTheTableOfARankInASessionOrBelowAFolderOfNodes) {
  testing::TempDir dir("reftable");
  const std::string job = dir.path() + "/job";
  for (const char* node : {"/job", "/job/node0", "/job/node1", "/job/node0/summaries", "/job/node1/summaries"}) {
    ASSERT_EQ(::mkdir((dir.path() + node).c_str(), 0700), 0);
  }
  testing::write_text_file(job + "/node0/summaries/rank0_pid10.csv", kSummaryTableHeader);
  testing::write_text_file(job + "/node1/summaries/rank1_pid20.csv", kSummaryTableHeader);
  testing::write_text_file(job + "/node1/summaries/rank1_pid30.csv", kSummaryTableHeader);
  testing::write_text_file(job + "/node1/summaries/rank1_pid30.csv.compacting-1-1", kSummaryTableHeader);
  // pid 20 is the later run of rank 1 (a restart): written last.
  const struct utimbuf old_times { 1000, 1000 };
  ASSERT_EQ(::utime((job + "/node1/summaries/rank1_pid30.csv").c_str(), &old_times), 0);
  EXPECT_EQ(reference_table_for_rank(job, 0), job + "/node0/summaries/rank0_pid10.csv");
  EXPECT_EQ(reference_table_for_rank(job, 1), job + "/node1/summaries/rank1_pid20.csv");
  EXPECT_EQ(reference_table_for_rank(job + "/node1", 1), job + "/node1/summaries/rank1_pid20.csv");
  EXPECT_EQ(reference_table_for_rank(job, 2), "");
  EXPECT_EQ(reference_table_for_rank(dir.path() + "/absent", 0), "");
}

}  // namespace
}  // namespace tensorscope::recording
