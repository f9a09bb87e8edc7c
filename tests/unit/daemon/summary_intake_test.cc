// summary_intake_test.cc — a worker's summary intake on a long run: the table passes its
// limit, is compacted on a thread of its own while records keep coming, and stays within
// bounds with every step accounted for, the first NaN a line of its own and the anomalies
// reported once.
#include "worker/summary_intake.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::daemon {
namespace {

// A summary record of step `step`: 20 tensors, "net.7" NaN from `bad_step` on.
std::string payload(int64_t step, int64_t bad_step) {
  std::vector<TensorSummary> entries;
  for (int t = 0; t < 20; ++t) {
    TensorSummary s;
    s.name = "net." + std::to_string(t);
    s.kind = wire::TensorKind::kActivation;
    s.numel = 1000;
    s.l2 = 1 + 0.001 * static_cast<double>(step % 97);
    s.max_abs = 0.5;
    s.std = 0.1;
    s.nan_count = t == 7 && step >= bad_step ? 3 : 0;
    entries.push_back(s);
  }
  return encode_summaries(entries);
}

// A summary record of `step` for `intake` (producer 1 of process 42, rank 3).
void feed(SummaryIntake& intake, uint64_t producer, int64_t step, int64_t bad_step, int64_t* non_finite_reports) {
  const std::string bytes = payload(step, bad_step);
  RecordView view;
  std::strcpy(view.header.name, "net");
  view.header.rank = 3;
  view.header.step = step;
  view.header.payload_bytes = bytes.size();
  view.payload = reinterpret_cast<const uint8_t*>(bytes.data());
  std::vector<TensorSummary> summaries;
  std::vector<Anomaly> anomalies;
  std::string why;
  ASSERT_TRUE(intake.take(producer, 42, view, &summaries, &anomalies, &why)) << why;
  for (const Anomaly& a : anomalies) *non_finite_reports += a.type == "non_finite" ? 1 : 0;
}

TEST(SummaryIntake, ALongRunsTableIsCompactedWhileRecordsKeepComing) {
  testing::TempDir dir("ts-intake");
  const int64_t limit = 1 << 20;
  int64_t non_finite_reports = 0;
  const int64_t steps = 6000, bad_step = 1234;
  {
    SummaryIntake intake(dir.path(), AnomaliesConfig{}, ReferenceConfig{}, limit);
    for (int64_t step = 0; step < steps; ++step) feed(intake, 1, step, bad_step, &non_finite_reports);
    intake.finish_producer(1);
  }
  EXPECT_EQ(non_finite_reports, 1);
  const std::string path = recording::summary_table_path(dir.path(), 3, 42);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 2 * limit) << "unbounded, 6000 steps of 20 tensors take about 12 MB";
  size_t left_behind = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/summaries")) {
    left_behind += e.path().filename().string().find(".compacting") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(left_behind, 0u) << "no copy left behind";
  std::map<std::string, int64_t> covered;
  bool first_nan_whole = false;
  int64_t newest = -1;
  auto read = recording::read_summary_table(path, 1ull << 30, [&](const recording::SummaryTableRow& r) {
    covered[r.summary.name] += r.steps;
    if (r.summary.name == "net.7" && r.step == bad_step) first_nan_whole = r.steps == 1 && r.summary.nan_count == 3;
    newest = std::max(newest, r.step);
  });
  ASSERT_TRUE(read.is_ok()) << read.message();
  EXPECT_EQ(*read, 0u) << "every line is the table's";
  EXPECT_EQ(covered.size(), 20u);
  for (const auto& [name, n] : covered) EXPECT_EQ(n, steps) << name << ": every step accounted for";
  EXPECT_TRUE(first_nan_whole);
  EXPECT_EQ(newest, steps - 1);
}

// The same process as two producers on two workers (a second client after the first
// closed, its table still being drained): both append to one table, each compacts it, and
// neither loses the other's lines for good nor reads past a file's end.
TEST(SummaryIntake, TwoWorkersOnOneTableKeepItWhole) {
  testing::TempDir dir("ts-intake");
  const int64_t limit = 1 << 20;
  int64_t reports = 0;
  {
    SummaryIntake a(dir.path(), AnomaliesConfig{}, ReferenceConfig{}, limit),
        b(dir.path(), AnomaliesConfig{}, ReferenceConfig{}, limit);
    for (int64_t step = 0; step < 6000; ++step) feed(step % 2 == 0 ? a : b, 1, step, 1000000, &reports);
    a.finish_producer(1);
    b.finish_producer(1);
  }
  const std::string path = recording::summary_table_path(dir.path(), 3, 42);
  int64_t covered = 0;
  auto read = recording::read_summary_table(path, 1ull << 30, [&](const recording::SummaryTableRow& r) {
    if (r.summary.name == "net.0") covered += r.steps;
  });
  ASSERT_TRUE(read.is_ok()) << read.message();
  EXPECT_EQ(*read, 0u) << "every line is the table's";
  EXPECT_GE(covered, 6000 * 95 / 100) << "at most a record lost to each replacement";
  EXPECT_LE(covered, 6000);
}

}  // namespace
}  // namespace tensorscope::daemon
