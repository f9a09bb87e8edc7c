// summary_intake_test.cc — a worker's summary intake on a long run: the table passes its
// limit, is compacted on a thread of its own while records keep coming, and stays within
// bounds with every step accounted for, the first NaN a line of its own and the anomalies
// reported once.
#include "worker/summary_intake.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
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

TEST(SummaryIntake, ALongRunsTableIsCompactedWhileRecordsKeepComing) {
  testing::TempDir dir("ts-intake");
  const int64_t limit = 1 << 20;
  int64_t non_finite_reports = 0;
  const int64_t steps = 6000, bad_step = 1234;
  {
    SummaryIntake intake(dir.path(), AnomaliesConfig{}, limit);
    for (int64_t step = 0; step < steps; ++step) {
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
      ASSERT_TRUE(intake.take(1, 42, view, &summaries, &anomalies, &why)) << why;
      for (const Anomaly& a : anomalies) non_finite_reports += a.type == "non_finite" ? 1 : 0;
    }
    intake.finish_producer(1);
  }
  EXPECT_EQ(non_finite_reports, 1);
  const std::string path = recording::summary_table_path(dir.path(), 3, 42);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LT(st.st_size, 2 * limit) << "unbounded, 6000 steps of 20 tensors take about 12 MB";
  EXPECT_NE(::stat((path + ".compacting").c_str(), &st), 0) << "no copy left behind";
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

}  // namespace
}  // namespace tensorscope::daemon
