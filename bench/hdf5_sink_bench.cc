// hdf5_sink_bench — what periodic flushes (record.hdf5_flush_seconds) cost the HDF5 sink.
//
// Appends the same float32 rows (--mb MB in all, rows of --row-kib KiB spread over
// --streams streams, change detection off, values pseudo-random so gzip has work to do)
// through Hdf5Sink into one file under --dir, calling poll() after every append as the
// worker's sink thread does, in three modes alternated within one run (after one
// discarded warm-up run): flush_seconds 0 (flushed only before closing), flush_seconds
// 1, and a flush() every 100 ms (to show the cost per flush where a run is shorter than
// a second). Each mode runs --repeat times (best time kept), for gzip 0 and gzip 4 (or
// --gzip N alone). Prints, per mode: MB/s of payload (append + finalize,
// wall time) and its ratio to flush_seconds 0, the flushes done, the mean time of one
// flush (it includes compressing and writing the chunks waiting in HDF5's chunk caches,
// work that is only moved earlier), and the finished file's size (the space of
// partly filled chunks rewritten after a flush is leaked, see hdf5_sink.h).
// Usage: hdf5_sink_bench [--mb N] [--row-kib N] [--streams N] [--gzip N] [--repeat N]
//                        [--dir DIR] [--quick]
// Reproduce: cmake --build BUILD --target hdf5_sink_bench && BUILD/bin/hdf5_sink_bench
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tensorscope/recording/hdf5_sink.h"

namespace td = tensorscope::recording;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Options {
  uint64_t mb = 200;
  uint64_t row_kib = 16;
  int streams = 4;
  int gzip = -1;  // -1: 0 and 4
  int repeat = 3;
  std::string dir = "/tmp";
};

enum class Mode { kNever, kEverySecond, kEvery100ms };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kNever: return "flush_seconds 0 (at close only)";
    case Mode::kEverySecond: return "flush_seconds 1";
    case Mode::kEvery100ms: return "flush() every 100 ms";
  }
  return "?";
}

struct Result {
  double seconds = 1e30;
  uint64_t flushes = 0;
  double flush_seconds_total = 0;  // time spent in poll()/flush() calls that flushed
  uint64_t file_bytes = 0;
};

// One run: appends `total` bytes of rows and finalizes; the finished file is removed.
Result run_once(const Options& o, int gzip, Mode mode, const std::vector<std::vector<float>>& rows,
                uint64_t total_rows) {
  const std::string dir = o.dir + "/hdf5_sink_bench." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  td::Hdf5SinkOptions options;
  options.gzip_level = gzip;
  options.change_detection = false;
  options.rotate_bytes = 0;  // one file
  options.rotate_seconds = 0;
  options.flush_seconds = mode == Mode::kEverySecond ? 1 : 0;
  auto sink = td::Hdf5Sink::open(dir, "bench", options);
  if (!sink.is_ok()) {
    std::fprintf(stderr, "open: %s\n", sink.message().c_str());
    std::exit(1);
  }
  const int64_t numel = static_cast<int64_t>(rows[0].size());
  std::vector<std::string> names;
  for (int s = 0; s < o.streams; ++s) names.push_back("model.layer" + std::to_string(s) + ".out");
  Result r;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_manual = start;
  const auto manual = std::chrono::milliseconds(mode == Mode::kEvery100ms ? 100 : 0);  // between flush starts
  for (uint64_t i = 0; i < total_rows; ++i) {
    // Each stream gets a different row at each step.
    const std::vector<float>& row = rows[(i + i / names.size()) % rows.size()];
    td::Hdf5Record rec;
    rec.stream = names[i % names.size()];
    rec.kind = "activation";
    rec.device = "cpu";
    rec.step = static_cast<int64_t>(i / names.size());
    rec.dtype = tensorscope::wire::DType::kFloat32;
    rec.shape = {numel};
    rec.data = row.data();
    rec.bytes = row.size() * sizeof(float);
    tensorscope::Status st = (*sink)->append(rec);
    const uint64_t before = (*sink)->flushes();
    const Clock::time_point t0 = Clock::now();
    if (st.is_ok()) st = (*sink)->poll();
    if (st.is_ok() && manual.count() > 0 && t0 - last_manual >= manual) {
      st = (*sink)->flush();
      last_manual = t0;
    }
    if (!st.is_ok()) {
      std::fprintf(stderr, "append: %s\n", st.message().c_str());
      std::exit(1);
    }
    if ((*sink)->flushes() != before) r.flush_seconds_total += seconds_since(t0);
  }
  r.flushes = (*sink)->flushes();  // before the flush of finalize()
  const tensorscope::Status st = (*sink)->finalize();
  r.seconds = seconds_since(start);
  if (!st.is_ok()) {
    std::fprintf(stderr, "finalize: %s\n", st.message().c_str());
    std::exit(1);
  }
  r.file_bytes = std::filesystem::file_size((*sink)->finished_files().at(0));
  sink->reset();
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mb") {
      o.mb = std::strtoull(next(), nullptr, 10);
    } else if (a == "--row-kib") {
      o.row_kib = std::strtoull(next(), nullptr, 10);
    } else if (a == "--streams") {
      o.streams = std::atoi(next());
    } else if (a == "--gzip") {
      o.gzip = std::atoi(next());
    } else if (a == "--repeat") {
      o.repeat = std::atoi(next());
    } else if (a == "--dir") {
      o.dir = next();
    } else if (a == "--quick") {
      o.mb = 32;
      o.repeat = 1;
    } else {
      std::fprintf(stderr,
                   "usage: hdf5_sink_bench [--mb N] [--row-kib N] [--streams N] [--gzip N] "
                   "[--repeat N] [--dir DIR] [--quick]\n");
      return 2;
    }
  }
  if (o.mb == 0 || o.row_kib == 0 || o.streams < 1 || o.repeat < 1 || o.gzip > 9) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  // 64 distinct rows of smooth values with noise in the low mantissa bits (gzip keeps
  // about 80% of such floats).
  const size_t numel = o.row_kib * 1024 / sizeof(float);
  std::vector<std::vector<float>> rows(64, std::vector<float>(numel));
  uint64_t x = 88172645463325252ULL;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t j = 0; j < numel; ++j) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      rows[r][j] =
          static_cast<float>(r) * 0.01f + static_cast<float>(j % 97) * 0.1f + static_cast<float>(x % 1000) * 1e-5f;
    }
  }
  const uint64_t row_bytes = numel * sizeof(float);
  const uint64_t total_rows = o.mb * 1000 * 1000 / row_bytes;
  const double payload_mb = static_cast<double>(total_rows * row_bytes) / 1e6;
  std::printf("hdf5_sink_bench: %.0f MB of float32 rows of %llu KiB, %d streams, in %s, best of %d\n", payload_mb,
              static_cast<unsigned long long>(o.row_kib), o.streams, o.dir.c_str(), o.repeat);
  std::vector<int> levels = o.gzip >= 0 ? std::vector<int>{o.gzip} : std::vector<int>{0, 4};
  const Mode modes[] = {Mode::kNever, Mode::kEverySecond, Mode::kEvery100ms};
  constexpr int kModes = 3;
  for (const int gzip : levels) {
    Result best[kModes];
    (void)run_once(o, gzip, Mode::kNever, rows, total_rows);  // warm-up
    for (int rep = 0; rep < o.repeat; ++rep) {
      for (int m = 0; m < kModes; ++m) {
        const Result r = run_once(o, gzip, modes[m], rows, total_rows);
        if (r.seconds < best[m].seconds) best[m] = r;
      }
    }
    std::printf("\ngzip %d\n", gzip);
    std::printf("  %-32s %9s %8s %8s %11s %10s %9s\n", "mode", "MB/s", "vs never", "flushes", "ms / flush", "file MB",
                "vs never");
    for (int m = 0; m < kModes; ++m) {
      const Result& r = best[m];
      std::printf("  %-32s %9.1f %8.3f %8llu %11.2f %10.1f %9.3f\n", mode_name(modes[m]), payload_mb / r.seconds,
                  best[0].seconds / r.seconds, static_cast<unsigned long long>(r.flushes),
                  r.flushes > 0 ? 1e3 * r.flush_seconds_total / static_cast<double>(r.flushes) : 0.0,
                  static_cast<double>(r.file_bytes) / 1e6,
                  static_cast<double>(r.file_bytes) / static_cast<double>(best[0].file_bytes));
    }
  }
  return 0;
}
