// summary_week_bench — a week-long run's summary table, simulated: a training process's
// summary records go through a worker's summary intake (daemon/src/worker/summary_intake.h)
// with its compaction, and the program prints what is on disk against what an unbounded
// table would take, how many steps the oldest and newest lines stand for, and the cost.
//
//   summary_week_bench [--tensors 200] [--steps-per-second 10] [--days 7]
//                      [--limit-mb 1024] [--scale 256]
//
// A week at 10 steps/s with 200 tensors writes about 160 GB of lines; the bench keeps the
// same ratio of volume to limit at 1/scale of both (limit/scale, steps/scale), which is
// what decides the table's shape (compaction is self-similar), and says so. Prints ratios
// and figures of one run.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_format.h"
#include "worker/summary_intake.h"

using namespace tensorscope;

int main(int argc, char** argv) {
  int64_t tensors = 200, days = 7, limit_mb = 1024, scale = 256;
  double steps_per_second = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (a == "--tensors")
      tensors = static_cast<int64_t>(v);
    else if (a == "--steps-per-second")
      steps_per_second = v;
    else if (a == "--days")
      days = static_cast<int64_t>(v);
    else if (a == "--limit-mb")
      limit_mb = static_cast<int64_t>(v);
    else if (a == "--scale")
      scale = static_cast<int64_t>(v);
  }
  const int64_t week_steps = static_cast<int64_t>(steps_per_second * 86400.0 * static_cast<double>(days));
  const int64_t steps = week_steps / scale, limit = (limit_mb << 20) / scale;
  const int64_t bad_step = steps * 3 / 10;  // a NaN three tenths of the way in
  testing::TempDir dir("ts-week");
  uint64_t unbounded = 0;
  int64_t reports = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    daemon::SummaryIntake intake(dir.path(), AnomaliesConfig{}, ReferenceConfig{}, limit);
    std::vector<TensorSummary> entries(static_cast<size_t>(tensors));
    for (int64_t t = 0; t < tensors; ++t) {
      entries[static_cast<size_t>(t)].name = "model.layers." + std::to_string(t / 4) + ".block" + std::to_string(t % 4);
      entries[static_cast<size_t>(t)].kind = t % 2 == 0 ? wire::TensorKind::kActivation : wire::TensorKind::kGradient;
      entries[static_cast<size_t>(t)].numel = 1 << 20;
    }
    for (int64_t step = 0; step < steps; ++step) {
      for (int64_t t = 0; t < tensors; ++t) {
        TensorSummary& s = entries[static_cast<size_t>(t)];
        s.l2 = 10.0 + static_cast<double>((step * 7919 + t * 104729) % 1000) / 100.0;
        s.max_abs = s.l2 / 30;
        s.mean = 1e-3 * static_cast<double>(step % 13);
        s.std = s.l2 / 1024;
        s.zero_count = static_cast<uint64_t>(t % 5) << 16;
        s.nan_count = step == bad_step && t == tensors / 2 ? 7 : 0;
      }
      const std::string bytes = encode_summaries(entries);
      unbounded += recording::summary_table_lines(step, 0, "model", entries).size();
      RecordView view;
      std::strcpy(view.header.name, "model");
      view.header.step = step;
      view.header.payload_bytes = bytes.size();
      view.payload = reinterpret_cast<const uint8_t*>(bytes.data());
      std::vector<TensorSummary> out;
      std::vector<daemon::Anomaly> anomalies;
      std::string why;
      if (!intake.take(1, 7, view, &out, &anomalies, &why)) {
        std::fprintf(stderr, "refused: %s\n", why.c_str());
        return 1;
      }
      reports += static_cast<int64_t>(anomalies.size());
    }
    intake.finish_producer(1);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string path = recording::summary_table_path(dir.path(), 0, 7);
  struct stat st {};
  ::stat(path.c_str(), &st);
  int64_t lines = 0, oldest_steps = 0, newest_full_from = steps, widest = 0;
  bool nan_whole = false;
  (void)recording::read_summary_table(path, 1ull << 40, [&](const recording::SummaryTableRow& r) {
    ++lines;
    if (r.step == 0) oldest_steps = std::max(oldest_steps, r.steps);
    widest = std::max(widest, r.steps);
    if (r.steps > 1) newest_full_from = steps;
    if (r.step == bad_step && r.summary.nan_count > 0) nan_whole = r.steps == 1;
  });
  // Where full resolution begins: after the last merged line.
  int64_t last_merged = -1;
  (void)recording::read_summary_table(path, 1ull << 40, [&](const recording::SummaryTableRow& r) {
    if (r.steps > 1) last_merged = std::max(last_merged, r.step + r.steps);
  });
  newest_full_from = last_merged < 0 ? 0 : last_merged;
  const double full_days =
      static_cast<double>(steps - newest_full_from) * static_cast<double>(scale) / steps_per_second / 86400.0;
  std::printf("simulated: %lld days at %.0f steps/s, %lld tensors (1/%lld: %lld steps, limit %.1f MiB)\n",
              static_cast<long long>(days), steps_per_second, static_cast<long long>(tensors),
              static_cast<long long>(scale), static_cast<long long>(steps), static_cast<double>(limit) / 1048576.0);
  std::printf("unbounded table:   %.1f GB at full scale\n", static_cast<double>(unbounded) * scale / 1e9);
  std::printf("compacted table:   %.2f GB at full scale (%.3f of unbounded, limit %lld MiB)\n",
              static_cast<double>(st.st_size) * scale / 1e9, static_cast<double>(st.st_size) / unbounded,
              static_cast<long long>(limit_mb));
  std::printf("lines:             %lld (oldest line: %lld steps; widest: %lld steps)\n", static_cast<long long>(lines),
              static_cast<long long>(oldest_steps), static_cast<long long>(widest));
  std::printf("full resolution:   the last %.2f days\n", full_days);
  std::printf("first NaN (step %lld): %s; anomaly reports: %lld\n", static_cast<long long>(bad_step),
              nan_whole ? "a line of its own" : "MERGED", static_cast<long long>(reports));
  std::printf("cost:              %.1f s for %lld records (%.1f us a record, compactions included)\n", seconds,
              static_cast<long long>(steps), seconds * 1e6 / static_cast<double>(steps));
  return nan_whole ? 0 : 1;
}
