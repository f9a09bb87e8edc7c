// replay_main.cc — runs a fuzz target without libFuzzer: every file of the corpus
// directories given, then `--mutations N` seeded mutations of them (bit flips, byte
// changes, cuts, splices, repeated chunks). A crash, a sanitizer report or an exception
// escaping the target fails the run. The test suite runs each target this way.
//   fuzz_<name> [--mutations N] [--seed S] [--keep-input PATH] CORPUS_DIR...
// --keep-input writes each input to PATH before running it: after a hang or a crash,
// PATH holds the input that caused it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {

std::string mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  std::string s = corpus.empty() ? std::string() : corpus[rng() % corpus.size()];
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:
        if (!s.empty()) s[rng() % s.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (!s.empty()) s[rng() % s.size()] = static_cast<char>(rng());
        break;
      case 2:
        if (!s.empty()) s.resize(rng() % s.size());
        break;
      case 3: {
        const std::string& other = corpus.empty() ? s : corpus[rng() % corpus.size()];
        if (!other.empty()) s.insert(rng() % (s.size() + 1), other.substr(rng() % other.size(), 1 + rng() % 64));
        break;
      }
      case 4:
        if (!s.empty()) {
          const size_t at = rng() % s.size();
          s.insert(at, s.substr(at, 1 + rng() % 16));
        }
        break;
      default: {
        static const char* kInteresting[] = {"\xff\xff\xff\xff",
                                             "\0\0\0\0",
                                             "\x7f\xff\xff\xff",
                                             "\x80\0\0\0",
                                             "-1",
                                             "99999999999999999999",
                                             "\n",
                                             "{",
                                             "[",
                                             "\"",
                                             "nan"};
        const std::string word = kInteresting[rng() % (sizeof(kInteresting) / sizeof(kInteresting[0]))];
        if (!s.empty()) s.replace(rng() % s.size(), std::min<size_t>(word.size(), s.size()), word);
        break;
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  unsigned long long seed = 1;
  std::string keep;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::atol(argv[++i]);
    } else if (arg == "--keep-input" && i + 1 < argc) {
      keep = argv[++i];
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(arg, ec)) {
        std::ifstream in(e.path(), std::ios::binary);
        corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    }
  }
  for (const std::string& input : corpus) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::mt19937_64 rng(seed);
  for (long i = 0; i < mutations; ++i) {
    const std::string input = mutate(corpus, rng);
    if (!keep.empty()) std::ofstream(keep, std::ios::binary | std::ios::trunc) << input;
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::printf("%zu corpus inputs and %ld mutations ran\n", corpus.size(), mutations);
  return 0;
}
