// compare_bench — throughput of `tensorscope compare` on two large float32 .npy files.
//
// Writes two float32 .npy files into /tmp (1 GiB each; 64 MiB with --quick): B holds
// random values, A the same values times (1 + 1e-7), so every element is compared and
// all are close. Then, in the same run and alternating, times (a) plainly reading both
// files with read() into a 4 MiB buffer and (b) compare_npy_files on the pair, best of
// --repeat runs each (files are in the page cache after the first pass). Prints GB/s of
// input (bytes of A + B) for both and the ratio compare / plain read.
// Usage: compare_bench [--quick] [--repeat N] [--keep]
// Reproduce: cmake --build BUILD --target compare_bench && BUILD/bin/compare_bench
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compare/tensor_compare.h"

namespace td = tensorscope::daemon;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A format 1.0 '<f4' header for shape (n,), padded so the data starts at byte 128.
std::string npy_header(uint64_t n) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) +
                     ",), }";
  const size_t total = 128;
  dict.resize(total - 10 - 1, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  const uint16_t len = static_cast<uint16_t>(dict.size());
  header += static_cast<char>(len & 0xff);
  header += static_cast<char>(len >> 8);
  return header + dict;
}

bool write_pair(const std::string& path_a, const std::string& path_b, uint64_t n) {
  FILE* fa = std::fopen(path_a.c_str(), "wb");
  FILE* fb = std::fopen(path_b.c_str(), "wb");
  if (fa == nullptr || fb == nullptr) return false;
  const std::string header = npy_header(n);
  bool ok = std::fwrite(header.data(), 1, header.size(), fa) == header.size() &&
            std::fwrite(header.data(), 1, header.size(), fb) == header.size();
  std::mt19937 rng(42);
  std::normal_distribution<float> dist;
  std::vector<float> a(1 << 20), b(1 << 20);
  for (uint64_t done = 0; ok && done < n;) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(b.size(), n - done));
    for (size_t i = 0; i < count; ++i) {
      b[i] = dist(rng);
      a[i] = b[i] * (1.0f + 1e-7f);
    }
    ok = std::fwrite(a.data(), sizeof(float), count, fa) == count &&
         std::fwrite(b.data(), sizeof(float), count, fb) == count;
    done += count;
  }
  ok = (std::fclose(fa) == 0) && ok;
  ok = (std::fclose(fb) == 0) && ok;
  return ok;
}

// Reads both files to the end with read() into one 4 MiB buffer; returns bytes read.
uint64_t plain_read(const std::string& path_a, const std::string& path_b) {
  static std::vector<char> buffer(td::kCompareChunkBytes);
  uint64_t total = 0;
  for (const std::string* path : {&path_a, &path_b}) {
    const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    for (;;) {
      const ssize_t got = ::read(fd, buffer.data(), buffer.size());
      if (got <= 0) break;
      total += static_cast<uint64_t>(got);
    }
    ::close(fd);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, keep = false;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--keep") {
      keep = true;
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: compare_bench [--quick] [--repeat N] [--keep]\n");
      return 2;
    }
  }
  const uint64_t n = quick ? (uint64_t{16} << 20) : (uint64_t{256} << 20);  // elements
  const std::string base = "/tmp/compare_bench_" + std::to_string(::getpid());
  const std::string path_a = base + "_a.npy", path_b = base + "_b.npy";
  std::printf("compare_bench: two float32 .npy files of %llu elements (%.2f GiB each) in /tmp\n",
              static_cast<unsigned long long>(n), n * 4.0 / (1 << 30));
  const auto write_start = Clock::now();
  if (!write_pair(path_a, path_b, n)) {
    std::fprintf(stderr, "compare_bench: cannot write %s / %s\n", path_a.c_str(), path_b.c_str());
    return 1;
  }
  std::printf("  wrote both in %.2f s\n", seconds_since(write_start));

  double best_read = 1e30, best_compare = 1e30;
  uint64_t read_bytes = 0;
  td::TensorCompareResult last;
  for (int r = 0; r < repeat; ++r) {
    auto start = Clock::now();
    read_bytes = plain_read(path_a, path_b);
    best_read = std::min(best_read, seconds_since(start));
    start = Clock::now();
    auto result = td::compare_npy_files(path_a, path_b, td::CompareTolerance{});
    const double t = seconds_since(start);
    if (!result) {
      std::fprintf(stderr, "compare_bench: %s\n", result.message().c_str());
      return 1;
    }
    best_compare = std::min(best_compare, t);
    last = *result;
  }
  const double gb = read_bytes / 1e9;
  std::printf("  plain read() of both files: %.3f s  %.2f GB/s (best of %d)\n", best_read,
              gb / best_read, repeat);
  std::printf("  compare_npy_files:          %.3f s  %.2f GB/s (best of %d)\n", best_compare,
              gb / best_compare, repeat);
  std::printf("  ratio compare / plain read throughput: %.2f\n", best_read / best_compare);
  std::printf("  result: %llu/%llu mismatches, max_abs %.3g, max_rel %.3g, cosine %.9f\n",
              static_cast<unsigned long long>(last.mismatches),
              static_cast<unsigned long long>(last.total), last.max_abs_error,
              last.max_rel_error, last.cosine);
  std::printf("reproduce: cmake --build BUILD --target compare_bench && "
              "BUILD/bin/compare_bench%s\n",
              quick ? " --quick" : "");
  if (!keep) {
    ::unlink(path_a.c_str());
    ::unlink(path_b.c_str());
  }
  return 0;
}
