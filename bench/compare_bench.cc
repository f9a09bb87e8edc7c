// compare_bench — throughput of `tensorscope compare` on two large float32 .npy files.
//
// Writes two float32 .npy files into /tmp (1 GiB each; 64 MiB with --quick): B holds
// random values, A the same values times (1 + 1e-7), so every element is compared and
// all are close. Then, in the same run and alternating, times (a) plainly reading both
// files with read() into a 4 MiB buffer and (b) compare_npy_files on the pair, from the
// files' mappings (the tool's way) and read into buffers (its fallback), best of
// --repeat runs each (files are in the page cache after the first pass). Prints GB/s of
// input (bytes of A + B) for both and the ratio compare / plain read.
// The same values are also written as two PyTorch-style files (.pt: a stored zip
// archive holding <prefix>/data.pkl, a pickled torch._utils._rebuild_tensor_v2 call, and
// <prefix>/data/0, one contiguous float32 storage, laid out like torch.save's but built
// here without libtorch and without the version record and CRCs torch.load wants), and
// compare_paths on that pair (zip + pickle listing, then the streamed comparison) is
// timed too, with its ratio to the .npy comparison.
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
#include <tuple>
#include <vector>

#include "compare/dump_compare.h"
#include "compare/tensor_compare.h"

namespace td = tensorscope::compare;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A format 1.0 '<f4' header for shape (n,), padded so the data starts at byte 128.
std::string npy_header(uint64_t n) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
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

void put_le(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// The start of a .pt file: the local header of "<prefix>/data/0" (stored, padded so the
// data starts at byte 64), to be followed by the storage's bytes.
std::string pt_head(const std::string& prefix, uint64_t data_bytes) {
  const std::string name = prefix + "/data/0";
  std::string h;
  put_le(h, 0x04034b50, 4);
  put_le(h, 20, 2);
  put_le(h, 0, 2);
  put_le(h, 0, 2);  // stored
  put_le(h, 0, 4);
  put_le(h, 0, 4);  // crc (not checked by the reader)
  put_le(h, data_bytes, 4);
  put_le(h, data_bytes, 4);
  put_le(h, name.size(), 2);
  const size_t extra = 64 - 30 - name.size();
  put_le(h, extra, 2);
  h += name;
  put_le(h, 0x5a46, 2);  // padding field, like PyTorch's
  put_le(h, extra - 4, 2);
  h.append(extra - 4, 'Z');
  return h;
}

// The rest of a .pt file after the storage: data.pkl (torch._utils._rebuild_tensor_v2
// of a FloatStorage of n elements, shape (n,)), the central directory and its end.
std::string pt_tail(const std::string& prefix, uint64_t n) {
  const uint64_t data_bytes = n * 4;
  auto integer = [](uint64_t v) {
    std::string out = "\x8a\x08";
    put_le(out, v, 8);
    return out;
  };
  auto text = [](const std::string& value) {  // BINUNICODE
    std::string out = "X";
    put_le(out, value.size(), 4);
    return out + value;
  };
  std::string pkl =
      "\x80\x02"
      "ctorch._utils\n_rebuild_tensor_v2\n((";
  pkl += text("storage") + "ctorch\nFloatStorage\n" + text("0") + text("cpu") + integer(n);
  pkl += "tQK";
  pkl += '\0';  // storage offset 0
  pkl += "(" + integer(n) +
      "t(K\x01t\x89"
      "ccollections\nOrderedDict\n)RtR.";
  const std::string head = pt_head(prefix, data_bytes);
  const uint64_t pkl_offset = head.size() + data_bytes;
  const std::string pkl_name = prefix + "/data.pkl";
  std::string out;
  put_le(out, 0x04034b50, 4);
  put_le(out, 20, 2);
  put_le(out, 0, 8);
  put_le(out, 0, 4);
  put_le(out, pkl.size(), 4);
  put_le(out, pkl.size(), 4);
  put_le(out, pkl_name.size(), 2);
  put_le(out, 0, 2);
  out += pkl_name + pkl;
  std::string cd;
  const std::vector<std::tuple<std::string, uint64_t, uint64_t>> entries = {{prefix + "/data/0", data_bytes, 0},
                                                                            {pkl_name, pkl.size(), pkl_offset}};
  for (const auto& [name, size, offset] : entries) {
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 20, 2);
    put_le(cd, 20, 2);
    put_le(cd, 0, 8);
    put_le(cd, 0, 4);
    put_le(cd, size, 4);
    put_le(cd, size, 4);
    put_le(cd, name.size(), 2);
    put_le(cd, 0, 2);  // extra
    put_le(cd, 0, 6);  // comment length, disk, internal attributes
    put_le(cd, 0, 4);  // external attributes
    put_le(cd, offset, 4);
    cd += name;
  }
  const uint64_t cd_offset = pkl_offset + out.size();
  out += cd;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, 2, 2);
  put_le(out, 2, 2);
  put_le(out, cd.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

// Writes A and B as .npy files and as .pt files with the same values.
bool write_pair(const std::string& path_a, const std::string& path_b, const std::string& pt_a, const std::string& pt_b,
                uint64_t n) {
  FILE* fa = std::fopen(path_a.c_str(), "wb");
  FILE* fb = std::fopen(path_b.c_str(), "wb");
  FILE* ta = std::fopen(pt_a.c_str(), "wb");
  FILE* tb = std::fopen(pt_b.c_str(), "wb");
  if (fa == nullptr || fb == nullptr || ta == nullptr || tb == nullptr) return false;
  const std::string header = npy_header(n);
  const std::string head_a = pt_head("a", n * 4), head_b = pt_head("b", n * 4);
  bool ok = std::fwrite(header.data(), 1, header.size(), fa) == header.size() &&
      std::fwrite(header.data(), 1, header.size(), fb) == header.size() &&
      std::fwrite(head_a.data(), 1, head_a.size(), ta) == head_a.size() &&
      std::fwrite(head_b.data(), 1, head_b.size(), tb) == head_b.size();
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
        std::fwrite(b.data(), sizeof(float), count, fb) == count &&
        std::fwrite(a.data(), sizeof(float), count, ta) == count &&
        std::fwrite(b.data(), sizeof(float), count, tb) == count;
    done += count;
  }
  const std::string tail_a = pt_tail("a", n), tail_b = pt_tail("b", n);
  ok = ok && std::fwrite(tail_a.data(), 1, tail_a.size(), ta) == tail_a.size() &&
      std::fwrite(tail_b.data(), 1, tail_b.size(), tb) == tail_b.size();
  for (FILE* f : {fa, fb, ta, tb}) ok = (std::fclose(f) == 0) && ok;
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
  const std::string pt_a = base + "_a.pt", pt_b = base + "_b.pt";
  std::printf(
      "compare_bench: two float32 .npy files of %llu elements (%.2f GiB each) in /tmp,\n"
      "  and two .pt files of the same values\n",
      static_cast<unsigned long long>(n), n * 4.0 / (1 << 30));
  const auto write_start = Clock::now();
  if (!write_pair(path_a, path_b, pt_a, pt_b, n)) {
    std::fprintf(stderr, "compare_bench: cannot write %s / %s / %s / %s\n", path_a.c_str(), path_b.c_str(),
                 pt_a.c_str(), pt_b.c_str());
    return 1;
  }
  std::printf("  wrote both in %.2f s\n", seconds_since(write_start));

  double best_read = 1e30, best_compare = 1e30, best_buffered = 1e30, best_pt = 1e30;
  uint64_t read_bytes = 0;
  td::TensorCompareResult last, last_pt;
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
    start = Clock::now();
    auto buffered = td::compare_npy_files(path_a, path_b, td::CompareTolerance{}, td::kCompareChunkBytes,
                                          td::CompareReads::kBuffered);
    best_buffered = std::min(best_buffered, seconds_since(start));
    if (!buffered || buffered->mismatches != last.mismatches || buffered->max_abs_error != last.max_abs_error) {
      std::fprintf(stderr, "compare_bench: the buffered comparison differs: %s\n",
                   buffered ? "other results" : buffered.message().c_str());
      return 1;
    }
    start = Clock::now();
    auto report = td::compare_paths(pt_a, pt_b, td::CompareTolerance{});
    const double t_pt = seconds_since(start);
    if (!report || report->entries.size() != 1 || report->entries[0].verdict != td::CompareVerdict::kMatch) {
      std::fprintf(stderr, "compare_bench: .pt compare failed: %s\n",
                   report ? td::format_entry(report->entries.at(0)).c_str() : report.message().c_str());
      return 1;
    }
    best_pt = std::min(best_pt, t_pt);
    last_pt = report->entries[0].result;
  }
  const double gb = read_bytes / 1e9;
  std::printf("  plain read() of both files: %.3f s  %.2f GB/s (best of %d)\n", best_read, gb / best_read, repeat);
  std::printf("  compare_npy_files (mapped):   %.3f s  %.2f GB/s (best of %d)\n", best_compare, gb / best_compare,
              repeat);
  std::printf("  compare_npy_files (buffered): %.3f s  %.2f GB/s (best of %d)\n", best_buffered, gb / best_buffered,
              repeat);
  std::printf("  compare_paths on the .pt pair: %.3f s  %.2f GB/s (best of %d)\n", best_pt, gb / best_pt, repeat);
  std::printf("  ratio compare / plain read throughput: %.2f (buffered: %.2f)\n", best_read / best_compare,
              best_read / best_buffered);
  std::printf("  ratio .pt compare / .npy compare throughput: %.2f\n", best_compare / best_pt);
  std::printf("  result: %llu/%llu mismatches, max_abs %.3g, max_rel %.3g, cosine %.9f\n",
              static_cast<unsigned long long>(last.mismatches), static_cast<unsigned long long>(last.total),
              last.max_abs_error, last.max_rel_error, last.cosine);
  if (last_pt.mismatches != last.mismatches || last_pt.total != last.total ||
      last_pt.max_abs_error != last.max_abs_error) {
    std::fprintf(stderr, "compare_bench: .pt and .npy results differ\n");
    return 1;
  }
  std::printf(
      "reproduce: cmake --build BUILD --target compare_bench && "
      "BUILD/bin/compare_bench%s\n",
      quick ? " --quick" : "");
  if (!keep) {
    for (const std::string* path : {&path_a, &path_b, &pt_a, &pt_b}) ::unlink(path->c_str());
  }
  return 0;
}
