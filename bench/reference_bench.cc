// reference_bench — what comparing with a reference run costs the daemon: a training
// process's summary records (every tensor, every step) go through a worker's summary
// intake (daemon/src/worker/summary_intake.h) once without a reference and once compared
// with a finished reference's table (daemon/src/worker/divergence_watch.h), and the
// program prints the time per step of each, their ratio, and the steps per second one
// worker thread keeps up with.
//
//   reference_bench [--tensors 1000] [--steps 1000]
//
// The training step itself does nothing more with a reference (the comparison is the
// daemon's); this is the whole of its cost. Prints figures of one run.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/summary_format.h"
#include "worker/summary_intake.h"

using namespace tensorscope;

namespace {

std::vector<TensorSummary> record(int64_t tensors, int64_t step) {
  std::vector<TensorSummary> out;
  for (int64_t t = 0; t < tensors; ++t) {
    TensorSummary s;
    s.name = "model.layers." + std::to_string(t / 8) + ".part" + std::to_string(t % 8);
    s.kind = t < tensors / 2 ? wire::TensorKind::kActivation : wire::TensorKind::kGradient;
    s.dtype = wire::DType::kFloat32;
    s.numel = 4096;
    s.l2 = 10 + static_cast<double>(t % 17) + 0.001 * static_cast<double>(step % 101);
    s.max_abs = 3;
    s.mean = 0.01;
    s.std = 0.2;
    s.zero_count = 7;
    out.push_back(std::move(s));
  }
  return out;
}

// Seconds taken by `intake` for every step's record (producer 1, rank 0, process `pid`).
double feed(daemon::SummaryIntake& intake, const std::vector<std::string>& payloads, int64_t pid, uint64_t* found) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t step = 0; step < payloads.size(); ++step) {
    RecordView view;
    std::strcpy(view.header.name, "model");
    view.header.rank = 0;
    view.header.step = static_cast<int64_t>(step);
    view.header.payload_bytes = payloads[step].size();
    view.payload = reinterpret_cast<const uint8_t*>(payloads[step].data());
    std::vector<TensorSummary> summaries;
    std::vector<daemon::Anomaly> anomalies;
    std::string why;
    if (!intake.take(1, pid, view, &summaries, &anomalies, &why)) {
      std::fprintf(stderr, "refused: %s\n", why.c_str());
      std::exit(1);
    }
    *found += anomalies.size();
  }
  *found += intake.finish_producer(1).size();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tensors = 1000, steps = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tensors") tensors = std::atoll(argv[i + 1]);
    if (a == "--steps") steps = std::atoll(argv[i + 1]);
  }
  testing::TempDir dir("ts-reference-bench");
  const std::string run_dir = dir.path() + "/run", plain_dir = dir.path() + "/plain", ref_dir = dir.path() + "/ref";
  for (const std::string& d : {run_dir, plain_dir, ref_dir, ref_dir + "/summaries"}) ::mkdir(d.c_str(), 0700);

  // The reference: the same run, finished (its process gone).
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  std::vector<std::string> payloads;
  {
    std::ofstream table(recording::summary_table_path(ref_dir, 0, gone), std::ios::binary);
    table << recording::kSummaryTableHeader << "\n";
    for (int64_t s = 0; s < steps; ++s) {
      const std::vector<TensorSummary> r = record(tensors, s);
      table << recording::summary_table_lines(s, 0, "model", r);
      payloads.push_back(encode_summaries(r));
    }
  }
  struct stat st {};
  ::stat(recording::summary_table_path(ref_dir, 0, gone).c_str(), &st);

  const int64_t big = int64_t{1} << 40;  // no compaction in either run
  uint64_t found_plain = 0, found_ref = 0;
  daemon::SummaryIntake plain(plain_dir, AnomaliesConfig{}, ReferenceConfig{}, big);
  const double without = feed(plain, payloads, 11, &found_plain);
  daemon::SummaryIntake compared(run_dir, AnomaliesConfig{}, ReferenceConfig{}, big);
  compared.set_reference(1, ref_dir);
  const double with = feed(compared, payloads, 12, &found_ref);

  const double per_step_without = without / static_cast<double>(steps) * 1e3;
  const double per_step_with = with / static_cast<double>(steps) * 1e3;
  std::printf("reference_bench: %lld tensors every step, %lld steps (reference table %.1f MB)\n",
              static_cast<long long>(tensors), static_cast<long long>(steps), static_cast<double>(st.st_size) / 1e6);
  std::printf("  summary intake without a reference:   %.3f ms per step\n", per_step_without);
  std::printf("  with the comparison to the reference: %.3f ms per step (%.2fx; the comparison %.3f ms)\n",
              per_step_with, per_step_with / per_step_without, per_step_with - per_step_without);
  std::printf("  one worker thread keeps up with %.0f steps/s of %lld tensors compared (%.2f M tensors/s)\n",
              1e3 / per_step_with, static_cast<long long>(tensors),
              static_cast<double>(tensors) / per_step_with * 1e3 / 1e6);
  std::printf("  divergences reported: %llu (identical runs: 0 expected)\n",
              static_cast<unsigned long long>(found_ref));
  return found_ref == 0 ? 0 : 1;
}
