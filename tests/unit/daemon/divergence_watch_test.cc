// divergence_watch_test.cc — a run compared with its reference as it trains: identical runs
// part nowhere; a layer changed at step 50 is named at step 50 and nowhere before; a
// low-precision layer's rounding is not a divergence of the layers after it, but a layer
// that breaks in low precision is; a reference still running is waited for; one that ended
// is not; tolerance rules, another shape, a module called twice, a report made before.
#include "worker/divergence_watch.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <functional>
#include <string>
#include <vector>

#include "file_text.h"
#include "temp_dir.h"
#include "tensorscope/recording/summary_table.h"

namespace tensorscope::daemon {
namespace {

using wire::DType;

constexpr int64_t kPid = 4242;

// Tensor `t` of a four-layer net at `step`, as a deterministic run summarises it.
TensorSummary tensor(int t, int64_t step, DType dtype = DType::kFloat32) {
  TensorSummary s;
  s.name = "net." + std::to_string(t);
  s.kind = wire::TensorKind::kActivation;
  s.dtype = dtype;
  s.numel = 1024;
  s.l2 = 10 + t + 0.01 * static_cast<double>(step % 13);
  s.max_abs = 2 + 0.1 * t;
  s.mean = 0.05 * t;
  s.std = 0.3;
  s.zero_count = 100;
  return s;
}

using Change = std::function<void(int t, int64_t step, TensorSummary& s)>;

std::vector<TensorSummary> record(int64_t step, const Change& change = nullptr) {
  std::vector<TensorSummary> out;
  for (int t = 0; t < 4; ++t) {
    out.push_back(tensor(t, step));
    if (change) change(t, step, out.back());
  }
  return out;
}

class Reference {
 public:
  Reference() : dir_("ts-divergence") {
    ::mkdir((dir_.path() + "/ref").c_str(), 0700);
    ::mkdir((dir_.path() + "/ref/summaries").c_str(), 0700);
    ::mkdir((dir_.path() + "/ref/run_info").c_str(), 0700);
    path_ = recording::summary_table_path(dir_.path() + "/ref", 0, pid_);
    testing::write_text_file(path_, std::string(recording::kSummaryTableHeader) + "\n");
  }
  // The reference's process: a finished one on this host (its pid is gone), or one that
  // still runs (ours).
  void ran_here_and_ended() {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);
    move_to(child);
  }
  void runs_here() { move_to(::getpid()); }

  void append_steps(int64_t from, int64_t to, const Change& change = nullptr) {
    std::string text;
    for (int64_t s = from; s < to; ++s) text += recording::summary_table_lines(s, 0, "net", record(s, change));
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND);
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  std::string dir() const { return dir_.path() + "/ref"; }

 private:
  void move_to(pid_t pid) {
    const std::string to = recording::summary_table_path(dir(), 0, pid);
    ASSERT_EQ(::rename(path_.c_str(), to.c_str()), 0);
    path_ = to;
    pid_ = pid;
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    testing::write_text_file(dir() + "/run_info/rank0_pid" + std::to_string(pid) + ".json",
                             std::string("{\"hostname\": \"") + host + "\"}");
  }

  testing::TempDir dir_;
  std::string path_;
  int64_t pid_ = 1;
};

struct TheRun {
  std::vector<Anomaly> found;
  void feed(DivergenceWatch& w, int64_t from, int64_t to, const Change& change = nullptr, int64_t now = 0) {
    for (int64_t s = from; s < to; ++s) {
      for (Anomaly& a : w.observe("net", s, record(s, change), now)) found.push_back(std::move(a));
    }
  }
};

TEST(DivergenceWatch, IdenticalRunsPartNowhere) {
  Reference ref;
  ref.append_steps(0, 200);
  ref.ran_here_and_ended();
  DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
  TheRun run;
  run.feed(watch, 0, 200);
  for (Anomaly& a : watch.finish(0)) run.found.push_back(std::move(a));
  EXPECT_TRUE(run.found.empty()) << run.found[0].message;
  const nlohmann::json s = watch.status();
  EXPECT_EQ(s["compared"], 200 * 4);
  EXPECT_EQ(s["out_of_tolerance"], 0);
  EXPECT_TRUE(s["first_divergence"].is_null());
  EXPECT_EQ(s["not_in_reference"], 0);
  EXPECT_EQ(s["waiting"], 0);
}

TEST(DivergenceWatch, ALayerChangedAtStep50IsNamedThereAndNowhereBefore) {
  Reference ref;
  ref.append_steps(0, 120);
  ref.ran_here_and_ended();
  DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
  TheRun run;
  // From step 50 on, layer 2 computes 1% more; what comes after it follows.
  run.feed(watch, 0, 120, [](int t, int64_t step, TensorSummary& s) {
    if (step >= 50 && t >= 2) s.l2 *= 1.01;
  });
  ASSERT_EQ(run.found.size(), 1u);
  const Anomaly& a = run.found[0];
  EXPECT_EQ(a.type, "divergence");
  EXPECT_EQ(a.step, 50);
  EXPECT_EQ(a.stream, "net.2");
  EXPECT_EQ(a.pid, kPid);
  EXPECT_EQ(a.details["order"], 2);
  EXPECT_EQ(a.details["metric"], "l2");
  EXPECT_DOUBLE_EQ(a.details["reference_value"].get<double>(), tensor(2, 50).l2);
  EXPECT_DOUBLE_EQ(a.details["value"].get<double>(), tensor(2, 50).l2 * 1.01);
  EXPECT_NEAR(a.details["relative"].get<double>(), 0.01 / 1.01, 1e-9);
  EXPECT_EQ(a.details["rtol"], 1e-5);
  EXPECT_EQ(a.details["later_out_of_tolerance"], 1);  // net.3 of that step
  EXPECT_EQ(a.details["reference"], ref.dir());
  EXPECT_NE(a.message.find("step 50"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("net.2"), std::string::npos) << a.message;
  EXPECT_EQ(watch.status()["first_divergence"], 50);
  EXPECT_EQ(watch.status()["out_of_tolerance"], 70 * 2);
}

TEST(DivergenceWatch, LowPrecisionRoundingIsNoDivergenceButALayerBrokenByItIs) {
  Reference ref;
  ref.append_steps(0, 30);
  ref.ran_here_and_ended();
  // Layer 1 in bfloat16 (its rounding: 0.3%), the float32 layers after it carry it.
  const Change rounding = [](int t, int64_t, TensorSummary& s) {
    if (t == 1) s.dtype = DType::kBFloat16;
    if (t >= 1) s.l2 *= 1.003;
  };
  {
    DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
    TheRun run;
    run.feed(watch, 0, 30, rounding);
    EXPECT_TRUE(run.found.empty()) << run.found[0].message;
    EXPECT_EQ(watch.status()["compared"], 30 * 4);
  }
  {
    // The same layer losing a fifth of its norm in bfloat16 (a cancellation) is named.
    DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
    TheRun run;
    run.feed(watch, 0, 30, [&](int t, int64_t step, TensorSummary& s) {
      rounding(t, step, s);
      if (t == 1 && step >= 3) s.std *= 0.8;
    });
    ASSERT_EQ(run.found.size(), 1u);
    EXPECT_EQ(run.found[0].stream, "net.1");
    EXPECT_EQ(run.found[0].step, 3);
    EXPECT_EQ(run.found[0].details["metric"], "std");
    EXPECT_EQ(run.found[0].details["dtype"], "bfloat16");
    EXPECT_EQ(run.found[0].details["reference_dtype"], "float32");
    EXPECT_EQ(run.found[0].details["rtol"], 5e-2);
  }
}

TEST(DivergenceWatch, ARunningReferenceIsWaitedForAndStepsItLacksAreNotCompared) {
  Reference ref;
  ref.runs_here();
  ref.append_steps(0, 10);
  ReferenceConfig config;
  DivergenceWatch watch(ref.dir(), 0, kPid, config, false);
  TheRun run;
  const Change changed = [](int t, int64_t step, TensorSummary& s) {
    if (step >= 15 && t == 0) s.mean += 0.5;
  };
  run.feed(watch, 0, 30, changed);
  EXPECT_TRUE(run.found.empty());
  EXPECT_GT(watch.status()["waiting"].get<int>(), 15);  // the steps the reference has not reached
  EXPECT_TRUE(watch.poll(100000).empty());              // still running: still waiting
  ref.append_steps(10, 40);
  for (Anomaly& a : watch.poll(100000)) run.found.push_back(std::move(a));
  ASSERT_EQ(run.found.size(), 1u);
  EXPECT_EQ(run.found[0].step, 15);
  EXPECT_EQ(run.found[0].stream, "net.0");
  EXPECT_EQ(run.found[0].details["metric"], "mean");
  EXPECT_EQ(watch.status()["waiting"], 0);
  EXPECT_EQ(watch.status()["compared"], 30 * 4);
}

TEST(DivergenceWatch, AnEndedReferenceIsNotWaitedForAndTheRestIsCounted) {
  Reference ref;
  ref.append_steps(0, 10);
  ref.ran_here_and_ended();
  DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
  TheRun run;
  run.feed(watch, 0, 25);
  EXPECT_TRUE(run.found.empty());
  const nlohmann::json s = watch.status();
  EXPECT_EQ(s["waiting"], 0);
  EXPECT_EQ(s["compared"], 10 * 4);
  EXPECT_EQ(s["not_in_reference"], 15 * 4);
  EXPECT_EQ(s["reference_step"], 9);
  // Steps at the ends of int64 (a producer may send any) are counted, nothing overflows.
  for (const int64_t step : {INT64_MAX, INT64_MIN, INT64_MAX - 3})
    EXPECT_TRUE(watch.observe("net", step, record(0), 0).empty());
  EXPECT_TRUE(watch.finish(0).empty());
  EXPECT_EQ(watch.status()["not_in_reference"], 18 * 4);
}

TEST(DivergenceWatch, WhatWaitsIsBoundedAndWhatNeverCameIsCountedAtTheEnd) {
  Reference ref;
  ref.runs_here();
  ref.append_steps(0, 5);
  ReferenceConfig config;
  config.pending_mb = 1;
  DivergenceWatch watch(ref.dir(), 0, kPid, config, false);
  TheRun run;
  run.feed(watch, 0, 3000);
  const nlohmann::json s = watch.status();
  EXPECT_GT(s["not_compared_full"].get<uint64_t>(), 0u);
  EXPECT_LT(s["waiting"].get<uint64_t>(), 3000u);
  EXPECT_TRUE(watch.finish(0).empty());
  const nlohmann::json end = watch.status();
  EXPECT_EQ(end["waiting"], 0);
  EXPECT_EQ(
      end["compared"].get<uint64_t>() + end["not_reached"].get<uint64_t>() + end["not_compared_full"].get<uint64_t>(),
      3000u * 4);
}

TEST(DivergenceWatch, ToleranceRulesShapesRepeatedCallsAndEarlierReports) {
  Reference ref;
  ref.append_steps(0, 20);
  ref.ran_here_and_ended();
  const Change changed = [](int t, int64_t step, TensorSummary& s) {
    if (t == 2 && step >= 5) s.l2 *= 1.01;
    if (t == 3 && step >= 8) s.numel = 2048;
  };
  ReferenceConfig loose;
  loose.tolerances = {{"^net\\.2$", 0.05, 0}};
  {
    DivergenceWatch watch(ref.dir(), 0, kPid, loose, false);
    TheRun run;
    run.feed(watch, 0, 20, changed);
    ASSERT_EQ(run.found.size(), 1u);  // net.2's change is within its rule; net.3's shape is not
    EXPECT_EQ(run.found[0].stream, "net.3");
    EXPECT_EQ(run.found[0].step, 8);
    EXPECT_EQ(run.found[0].details["metric"], "numel");
    EXPECT_NE(run.found[0].message.find("2048 values, the reference's 1024"), std::string::npos)
        << run.found[0].message;
  }
  {
    DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, /*reported=*/true);
    TheRun run;
    run.feed(watch, 0, 20, changed);
    EXPECT_TRUE(run.found.empty());
    EXPECT_EQ(watch.status()["first_divergence"], 5);  // counted, not reported again
  }
}

TEST(DivergenceWatch, AStepWhoseSummariesCameInTwoRecordsIsComparedWhole) {
  Reference ref;
  ref.runs_here();
  // The reference's step 10: net.0/net.1 at once, net.2/net.3 a step late (their GPU copy
  // was not in yet), after step 11's.
  const std::vector<TensorSummary> all = record(10);
  std::string text;
  for (int64_t s = 0; s < 10; ++s) text += recording::summary_table_lines(s, 0, "net", record(s));
  text += recording::summary_table_lines(10, 0, "net", {all[0], all[1]});
  text += recording::summary_table_lines(11, 0, "net", record(11));
  text += recording::summary_table_lines(10, 0, "net", {all[2], all[3]});
  testing::write_text_file(recording::summary_table_path(ref.dir(), 0, ::getpid()),
                           std::string(recording::kSummaryTableHeader) + "\n" + text);
  DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
  TheRun run;
  run.feed(watch, 0, 11);
  EXPECT_EQ(watch.status()["waiting"], 2);  // steps 9 and 10 wait: more of them may come
  ref.append_steps(12, 20);
  EXPECT_TRUE(watch.poll(0).empty());
  EXPECT_TRUE(run.found.empty());
  EXPECT_EQ(watch.status()["compared"], 11 * 4);
  EXPECT_EQ(watch.status()["only_in_run"], 0);
}

TEST(DivergenceWatch, AReferenceThatTrackedFewerTensorsComparesWhatItHas) {
  Reference ref;
  std::string text;
  for (int64_t s = 0; s < 20; ++s) {
    std::vector<TensorSummary> fewer = record(s);
    fewer.erase(fewer.begin() + 1);  // the reference did not track net.1
    text += recording::summary_table_lines(s, 0, "net", fewer);
  }
  testing::write_text_file(recording::summary_table_path(ref.dir(), 0, 1),
                           std::string(recording::kSummaryTableHeader) + "\n" + text);
  ref.ran_here_and_ended();
  DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
  TheRun run;
  run.feed(watch, 0, 20, [](int t, int64_t step, TensorSummary& s) {
    if (t == 3 && step == 9) s.max_abs *= 2;
  });
  ASSERT_EQ(run.found.size(), 1u);
  EXPECT_EQ(run.found[0].stream, "net.3");
  EXPECT_EQ(run.found[0].details["order"], 3);  // its place in the run's forward order
  EXPECT_EQ(watch.status()["only_in_run"], 20);
  EXPECT_EQ(watch.status()["compared"], 20 * 3);
}

TEST(DivergenceWatch, AModuleCalledTwiceIsComparedCallByCall) {
  Reference ref;
  // The reference: net.0 called twice a step (a siamese pair), the second call larger.
  std::string text;
  for (int64_t s = 0; s < 20; ++s) {
    TensorSummary second = tensor(0, s);
    second.l2 *= 3;
    text += recording::summary_table_lines(s, 0, "net", {tensor(0, s), second});
  }
  testing::write_text_file(recording::summary_table_path(ref.dir(), 0, 1),
                           std::string(recording::kSummaryTableHeader) + "\n" + text);
  ref.ran_here_and_ended();
  DivergenceWatch watch(ref.dir(), 0, kPid, ReferenceConfig{}, false);
  std::vector<Anomaly> found;
  for (int64_t s = 0; s < 20; ++s) {
    TensorSummary second = tensor(0, s);
    second.l2 *= 3;
    if (s == 12) second.l2 *= 1.5;  // the second call changes at step 12
    for (Anomaly& a : watch.observe("net", s, {tensor(0, s), second}, 0)) found.push_back(std::move(a));
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].step, 12);
  EXPECT_EQ(found[0].details["order"], 1);
  EXPECT_EQ(watch.status()["compared"], 40);
}

}  // namespace
}  // namespace tensorscope::daemon
