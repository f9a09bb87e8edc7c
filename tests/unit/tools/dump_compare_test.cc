// dump_compare_test.cc — compare_paths over files and dump directories (pairing by
// relative path, files on one side only, step ordering and the first divergence,
// unreadable files), the report formatting, and the exit codes and output of the real
// `tensorscope compare` binary run as a child process (with a deadline).
#include "compare/dump_compare.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/recording/npy_file.h"
#include "cli_run.h"
#include "temp_dir.h"

namespace tensorscope::compare {
namespace {

using testing::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
using wire::DType;
namespace fs = std::filesystem;

void put(const std::string& root, const std::string& rel, const std::vector<float>& values) {
  const fs::path path = fs::path(root) / rel;
  fs::create_directories(path.parent_path());
  Status written = recording::write_npy(path.string(), DType::kFloat32, {static_cast<int64_t>(values.size())},
                                        values.data(), values.size() * sizeof(float));
  ASSERT_TRUE(written) << written.message();
}

void put_text(const std::string& root, const std::string& rel, const std::string& text) {
  const fs::path path = fs::path(root) / rel;
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// Two dump directories, equal at steps 1, 2 and 10 for streams x and y.
struct Dumps {
  TempDir a{"cmpa"}, b{"cmpb"};
  Dumps() {
    for (const char* step : {"step_1", "step_2", "step_10"}) {
      for (const char* stream : {"x_rank0", "y_rank0"}) {
        const std::string rel = std::string(step) + "/" + stream + ".npy";
        put(a.path(), rel, {1, 2, 3});
        put(b.path(), rel, {1, 2, 3});
      }
    }
  }
};

CompareReport compare_ok(const std::string& a, const std::string& b, CompareTolerance tolerance = {}) {
  auto report = compare_paths(a, b, tolerance);
  EXPECT_TRUE(report) << report.message();
  return report ? *report : CompareReport{};
}

TEST(DumpCompareTest, ParseStep) {
  EXPECT_EQ(parse_step("step_12/x_rank0.npy"), 12);
  EXPECT_EQ(parse_step("run/step_3/sub/step_40/x.npy"), 40);
  EXPECT_EQ(parse_step("x.npy"), -1);
  EXPECT_EQ(parse_step("step_/x.npy"), -1);
  EXPECT_EQ(parse_step("step_1a/x.npy"), -1);
  EXPECT_EQ(parse_step("mystep_4/x.npy"), -1);
  EXPECT_EQ(parse_step("step_99999999999999999999999/x.npy"), -1);  // too long: ignored
}

TEST(DumpCompareTest, EqualDirectoriesMatch) {
  Dumps d;
  put_text(d.a.path(), "index.json", "{}");  // not .npy: ignored
  put_text(d.b.path(), std::string("step_1/") + recording::kTempNpyPrefix + "1-2-x.npy", "partial");
  const CompareReport r = compare_ok(d.a.path(), d.b.path());
  EXPECT_TRUE(r.directories);
  EXPECT_EQ(r.entries.size(), 6u);
  EXPECT_EQ(r.matched, 6u);
  EXPECT_TRUE(r.all_match());
  EXPECT_EQ(r.exit_code(), 0);
  // Ordered by step number, not by text: step_10 last.
  EXPECT_EQ(r.entries.front().name, "step_1/x_rank0.npy");
  EXPECT_EQ(r.entries.back().name, "step_10/y_rank0.npy");
  EXPECT_EQ(r.entries.back().step, 10);
  EXPECT_EQ(r.entries.back().stream, "y_rank0");
  EXPECT_THAT(format_summary(r), HasSubstr("6 match"));
  EXPECT_THAT(format_summary(r), HasSubstr("all match"));
}

TEST(DumpCompareTest, FirstDivergenceIsOrderedByStepNumberThenName) {
  Dumps d;
  put(d.b.path(), "step_10/x_rank0.npy", {1, 2, 4});  // "step_10" sorts before "step_2" as text
  put(d.b.path(), "step_2/y_rank0.npy", {1, 2, 3.5});
  put(d.b.path(), "step_2/z_rank0.npy", {0});  // later name in the same step
  const CompareReport r = compare_ok(d.a.path(), d.b.path());
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(r.differed, 2u);
  EXPECT_EQ(r.only_in_b, 1u);
  ASSERT_GE(r.first_divergence, 0);
  const CompareEntry& first = r.entries[static_cast<size_t>(r.first_divergence)];
  EXPECT_EQ(first.step, 2);
  EXPECT_EQ(first.stream, "y_rank0");
  EXPECT_EQ(first.verdict, CompareVerdict::kDiffer);
  EXPECT_DOUBLE_EQ(first.result.max_abs_error, 0.5);
  EXPECT_THAT(format_summary(r), HasSubstr("first divergence: step 2, stream y_rank0"));
  EXPECT_THAT(format_entry(first), HasSubstr("DIFFER step_2/y_rank0.npy"));
  EXPECT_THAT(format_entry(first), HasSubstr("mismatches 1/3"));
}

TEST(DumpCompareTest, FilesOnOneSideOnlyAreListedAsDifferences) {
  Dumps d;
  fs::remove(fs::path(d.a.path()) / "step_10/x_rank0.npy");
  fs::remove(fs::path(d.b.path()) / "step_2/x_rank0.npy");
  put(d.a.path(), "extra/deep/w.npy", {1});
  const CompareReport r = compare_ok(d.a.path(), d.b.path());
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(r.only_in_a, 2u);
  EXPECT_EQ(r.only_in_b, 1u);
  EXPECT_EQ(r.matched, 4u);
  std::vector<std::string> lines;
  for (const auto& e : r.entries) lines.push_back(format_entry(e));
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr("ONLY_B step_10/x_rank0.npy  (missing in A)")));
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr("ONLY_A step_2/x_rank0.npy  (missing in B)")));
  // No step component: sorted first, so it is the first divergence.
  EXPECT_EQ(r.entries.front().name, "extra/deep/w.npy");
  EXPECT_EQ(r.first_divergence, 0);
  EXPECT_THAT(format_summary(r), HasSubstr("stream w (extra/deep/w.npy, ONLY_A)"));
}

TEST(DumpCompareTest, UnreadableFileInADirectoryIsReportedAndCompareGoesOn) {
  Dumps d;
  put_text(d.b.path(), "step_2/x_rank0.npy", "garbage");
  put(d.b.path(), "step_10/y_rank0.npy", {9, 9, 9});
  const CompareReport r = compare_ok(d.a.path(), d.b.path());
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.differed, 1u);
  EXPECT_EQ(r.matched, 4u);
  EXPECT_EQ(r.exit_code(), 2);
  const CompareEntry& bad = r.entries[static_cast<size_t>(r.first_divergence)];
  EXPECT_EQ(bad.verdict, CompareVerdict::kError);
  EXPECT_THAT(bad.error, HasSubstr("x_rank0.npy"));
  EXPECT_THAT(format_entry(bad), HasSubstr("ERROR  step_2/x_rank0.npy  error: "));
}

TEST(DumpCompareTest, ShapeMismatchInsideDirectories) {
  Dumps d;
  put(d.b.path(), "step_1/x_rank0.npy", {1, 2});
  const CompareReport r = compare_ok(d.a.path(), d.b.path());
  ASSERT_EQ(r.first_divergence, 0);
  EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kShapeMismatch);
  EXPECT_THAT(format_entry(r.entries[0]), HasSubstr("shape mismatch: float32[3] vs float32[2]"));
}

TEST(DumpCompareTest, BadInputIsAnError) {
  Dumps d;
  const std::string file = d.a.path() + "/step_1/x_rank0.npy";
  auto r = compare_paths(d.a.path() + "/nope", d.b.path(), {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("nope: no such file or directory"));
  r = compare_paths(d.a.path(), d.b.path() + "/nope", {});
  ASSERT_FALSE(r);
  r = compare_paths(file, d.b.path(), {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("cannot compare a file"));
  r = compare_paths(d.a.path(), file, {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("cannot compare a directory"));
  // Two files: a read error is an error, naming the file.
  put_text(d.b.path(), "bad.npy", "\x93NUMPY\x01");
  r = compare_paths(file, d.b.path() + "/bad.npy", {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("bad.npy"));
  put_text(d.b.path(), "t.h5", "x");
  r = compare_paths(d.b.path() + "/t.h5", d.b.path() + "/t.h5", {});
  ASSERT_FALSE(r);
  // An .h5 file that is not HDF5: an error naming it (recordings: hdf5_compare_test.cc).
  EXPECT_THAT(r.message(), HasSubstr(d.b.path() + "/t.h5"));
}

TEST(DumpCompareTest, EmptyDirectoriesMatch) {
  TempDir a("cmpa"), b("cmpb");
  const CompareReport r = compare_ok(a.path(), b.path());
  EXPECT_TRUE(r.entries.empty());
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_THAT(format_summary(r), HasSubstr("no .npy files found"));
}

TEST(DumpCompareTest, JsonReport) {
  Dumps d;
  put(d.b.path(), "step_2/y_rank0.npy", {1, 2, 3.5});
  const auto doc = nlohmann::json::parse(format_json(compare_ok(d.a.path(), d.b.path()), {}));
  EXPECT_EQ(doc["first_divergence"], "step_2/y_rank0.npy");
  EXPECT_EQ(doc["exit_code"], 1);
  EXPECT_EQ(doc["entries"].size(), 6u);
  EXPECT_EQ(doc["entries"][3]["verdict"], "DIFFER");
  EXPECT_EQ(doc["entries"][3]["mismatches"], 1);
  EXPECT_EQ(doc["entries"][3]["step"], 2);
}

// ---- The real binary -------------------------------------------------------------

// The tensorscope tool with `args` (testing::run_program: 60 s deadline).
CliRun run_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TENSORSCOPE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_program(argv);
}

TEST(CompareCliTest, ExitCodesForFiles) {
  Dumps d;
  const std::string x = d.a.path() + "/step_1/x_rank0.npy";
  const std::string same = d.b.path() + "/step_1/x_rank0.npy";
  put(d.b.path(), "near.npy", {1, 2, 3.001f});
  const std::string near = d.b.path() + "/near.npy";

  CliRun r = run_cli({"compare", x, same});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("MATCH"));
  EXPECT_THAT(r.out, HasSubstr("summary: 1 tensor: 1 match, 0 differ"));

  r = run_cli({"compare", x, near});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("DIFFER"));
  EXPECT_THAT(r.out, HasSubstr("mismatches 1/3"));

  r = run_cli({"compare", x, near, "--atol", "0.01"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli({"compare", "--rtol=1e-3", x, near});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  r = run_cli({"compare", x, near, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["entries"][0]["mismatches"], 1);
}

TEST(CompareCliTest, ExitCodesForDirectories) {
  Dumps d;
  CliRun r = run_cli({"compare", d.a.path(), d.b.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("6 match"));

  put(d.b.path(), "step_10/x_rank0.npy", {1, 2, 4});
  put(d.b.path(), "step_2/y_rank0.npy", {1, 2, 3.5});
  r = run_cli({"compare", d.a.path(), d.b.path()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("first divergence: step 2, stream y_rank0"));
  EXPECT_TRUE(r.err.empty()) << r.err;

  put_text(d.a.path(), "step_10/y_rank0.npy", "\x93NUMPY garbage");
  r = run_cli({"compare", d.a.path(), d.b.path()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ERROR  step_10/y_rank0.npy  error: "));
  EXPECT_THAT(r.out, HasSubstr("1 unreadable"));
  EXPECT_THAT(r.err, HasSubstr("could not be read"));
}

TEST(CompareCliTest, BadInputExitsTwoWithAMessage) {
  Dumps d;
  const std::string x = d.a.path() + "/step_1/x_rank0.npy";
  put_text(d.a.path(), "corrupt.npy", "not numpy");
  const std::string truncated = d.a.path() + "/step_2/x_rank0.npy";
  ASSERT_EQ(::truncate(truncated.c_str(), 100), 0);

  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"compare", x, d.a.path() + "/missing.npy"}, "missing.npy: no such file or directory"},
      {{"compare", x, d.b.path()}, "cannot compare a file"},
      {{"compare", x, d.a.path() + "/corrupt.npy"}, "corrupt.npy"},
      {{"compare", truncated, x}, "step_2/x_rank0.npy"},
      {{"compare", x, x, "--atol", "abc"}, "bad --atol value 'abc'"},
      {{"compare", x, x, "--atol", "-1"}, "bad --atol value '-1'"},
      {{"compare", x, x, "--rtol=nan"}, "bad --rtol value 'nan'"},
      {{"compare", x, x, "--atol"}, "--atol needs a value"},
      {{"compare", x, x, "--frobnicate"}, "unknown option '--frobnicate'"},
      {{"compare", x}, "need exactly two paths"},
      {{"compare", x, x, x}, "need exactly two paths"},
  };
  for (const Case& c : cases) {
    const CliRun r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_THAT(r.err, Not(HasSubstr("CHECK failed")));
  }
}

TEST(CompareCliTest, UsageMentionsCompareAndStatusStillWorks) {
  CliRun r = run_cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("tensorscope status"));
  EXPECT_THAT(r.out, HasSubstr("tensorscope compare A B"));
  EXPECT_THAT(r.out, HasSubstr("PyTorch files"));
  r = run_cli({"compare", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("HDF5 recordings"));
  EXPECT_THAT(r.out, HasSubstr("PyTorch files (.pt/.pth"));
  r = run_cli({});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli({"status", "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tensorscope status: unknown or incomplete argument '--bogus'"));
  TempDir runtime("cmprt");
  r = run_cli({"status", "--session", "nobody-here", "--runtime-dir", runtime.path()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("no daemon runs for session 'nobody-here'"));
}

}  // namespace
}  // namespace tensorscope::compare
