// torch_compare_test.cc — `tensorscope compare` on PyTorch files: round trips of files
// written by libtorch (torch::save of a tensor and of a vector, torch::pickle_save, every
// dtype, views, a 0-d tensor; by tests/support/make_torch_files) and by Python's
// torch.save (state_dict, dict, lone and transposed tensors, bfloat16), checked for exact
// equality against .npy files written by write_npy with the same values and for a
// difference when one value changes; the pairing of .pt files with .npy files and
// directories (names repeated on one side included); and the real command-line tool's
// exit codes and messages on .pt input, hostile files (under a memory limit) included.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/dump_compare.h"
#include "compare/torch_file_source.h"
#include "tensorscope/recording/npy_file.h"
#include "cli_run.h"
#include "temp_dir.h"
#include "torch_file_builder.h"
#include "torch_test_values.h"

namespace tensorscope::compare {
namespace {

using testing::CliRun;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PickleBytes;
using testing::slurp;
using testing::TempDir;
using testing::torch_test_base;
using testing::torch_test_bytes;
using testing::view_values;
using wire::DType;
namespace fs = std::filesystem;

constexpr CompareTolerance kExact{0.0, 0.0};

DType dtype_of(const std::string& name) {
  for (uint8_t i = 1; i <= wire::kMaxDType; ++i) {
    if (name == wire::dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
  }
  return DType::kInvalid;
}

// Writes `values` (exact in `dtype`) as <root>/<rel> with the project's npy writer.
void put_npy(const std::string& root, const std::string& rel, const std::string& dtype,
             const std::vector<int64_t>& shape, const std::vector<double>& values) {
  const fs::path path = fs::path(root) / rel;
  fs::create_directories(path.parent_path());
  const std::string bytes = torch_test_bytes(dtype, values);
  Status written = recording::write_npy(path.string(), dtype_of(dtype), shape, bytes.data(), bytes.size());
  ASSERT_TRUE(written) << written.message();
}

// One value changed, in a way every dtype can hold.
std::vector<double> changed(std::vector<double> values, size_t at, const std::string& dtype) {
  values[at] = dtype == "bool" ? 1.0 - values[at] : (values[at] > 0 ? values[at] - 1 : values[at] + 1);
  return values;
}

CompareReport compare_ok(const std::string& a, const std::string& b, CompareTolerance tolerance = kExact) {
  auto report = compare_paths(a, b, tolerance);
  EXPECT_TRUE(report) << report.message();
  return report ? *report : CompareReport{};
}

// Runs `command` with a shell; its exit status (-1 when it did not exit).
int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ---- files written by libtorch ---------------------------------------------------------

// The generator's output directory, made once for the whole test program; "" when there
// is no generator (built without Torch) or it failed (*why says so).
const std::string& generated_dir(std::string* why) {
  static std::unique_ptr<TempDir> dir;
  static std::string failure;
#ifdef TENSORSCOPE_MAKE_TORCH_FILES
  if (!dir && failure.empty()) {
    dir = std::make_unique<TempDir>("ptgen");
    const int rc = shell(std::string(TENSORSCOPE_MAKE_TORCH_FILES) + " '" + dir->path() + "'");
    if (rc != 0) failure = "make_torch_files exited with " + std::to_string(rc);
  }
#else
  failure = "built without libtorch: no make_torch_files generator";
#endif
  static const std::string empty;
  *why = failure;
  return failure.empty() ? dir->path() : empty;
}

#define REQUIRE_GENERATED(dir)                                     \
  std::string why_;                                                \
  const std::string& dir = generated_dir(&why_);                   \
  if (dir.empty()) {                                               \
    if (why_.rfind("built without", 0) == 0) GTEST_SKIP() << why_; \
    FAIL() << why_;                                                \
  }

TEST(TorchRoundTrip, EveryDtypeSavedByLibtorchMatchesNpyExactly) {
  REQUIRE_GENERATED(gen);
  TempDir npy("ptnpy");
  for (const std::string& dtype : testing::torch_test_dtypes()) {
    SCOPED_TRACE(dtype);
    const std::vector<double> base = torch_test_base(dtype);
    const std::vector<double> transposed = view_values(base, 0, {5, 3}, {1, 5});
    put_npy(npy.path(), "base_" + dtype + ".npy", dtype, {3, 5}, base);
    put_npy(npy.path(), "t_" + dtype + ".npy", dtype, {5, 3}, transposed);
    put_npy(npy.path(), "changed_" + dtype + ".npy", dtype, {3, 5}, changed(base, 4, dtype));
    const std::string base_npy = npy.path() + "/base_" + dtype + ".npy";
    for (const char* pt : {"save_", "pickle_"}) {
      const CompareReport r = compare_ok(gen + "/" + pt + dtype + ".pt", base_npy);
      ASSERT_EQ(r.entries.size(), 1u);
      EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kMatch) << format_entry(r.entries[0]);
      EXPECT_EQ(r.entries[0].result.dtype_a, dtype_of(dtype));
      EXPECT_EQ(r.entries[0].result.dtype_b, dtype_of(dtype));
      EXPECT_EQ(r.entries[0].result.total, 15u);
      EXPECT_EQ(r.exit_code(), 0);
    }
    CompareReport r = compare_ok(gen + "/save_t_" + dtype + ".pt", npy.path() + "/t_" + dtype + ".npy");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kMatch) << format_entry(r.entries[0]);
    EXPECT_THAT(r.entries[0].result.shape_a, ElementsAre(5, 3));
    // One value changed: exactly that element differs.
    r = compare_ok(gen + "/save_" + dtype + ".pt", npy.path() + "/changed_" + dtype + ".npy");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kDiffer);
    EXPECT_EQ(r.entries[0].result.mismatches, 1u);
    EXPECT_EQ(r.entries[0].result.first_mismatch, 4);
    EXPECT_EQ(r.exit_code(), 1);
    // The untransposed file against the transposed one: a shape difference.
    r = compare_ok(gen + "/save_" + dtype + ".pt", gen + "/save_t_" + dtype + ".pt");
    ASSERT_EQ(r.entries.size(), 1u);
    EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kShapeMismatch);
    // torch::save against torch::pickle_save of the same tensor (names "0" and "").
    r = compare_ok(gen + "/save_" + dtype + ".pt", gen + "/pickle_" + dtype + ".pt");
    EXPECT_EQ(r.exit_code(), 0) << format_summary(r);
  }
}

TEST(TorchRoundTrip, VectorOfViewsAndScalarSavedByLibtorch) {
  REQUIRE_GENERATED(gen);
  auto tensors = list_torch_tensors(gen + "/views.pt");
  ASSERT_TRUE(tensors) << tensors.message();
  std::vector<std::string> names;
  for (const TorchTensor& t : *tensors) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("0", "1", "2", "3", "4"));
  EXPECT_FALSE((*tensors)[0].contiguous());
  EXPECT_TRUE((*tensors)[4].shape.empty());

  // A dump directory holding the views' values, named like the tensors.
  TempDir npy("ptnpy");
  const std::vector<double> f = torch_test_base("float32");
  put_npy(npy.path(), "0.npy", "float32", {5, 3}, view_values(f, 0, {5, 3}, {1, 5}));
  put_npy(npy.path(), "1.npy", "float32", {3, 3}, view_values(f, 0, {3, 3}, {5, 2}));
  put_npy(npy.path(), "2.npy", "float32", {5}, view_values(f, 5, {5}, {1}));
  put_npy(npy.path(), "3.npy", "float32", {4, 5}, view_values(f, 0, {4, 5}, {0, 1}));
  put_npy(npy.path(), "4.npy", "float32", {}, {f[13]});
  CompareReport r = compare_ok(gen + "/views.pt", npy.path());
  ASSERT_EQ(r.entries.size(), 5u);
  for (const CompareEntry& e : r.entries) {
    EXPECT_EQ(e.verdict, CompareVerdict::kMatch) << format_entry(e);
  }
  EXPECT_EQ(r.exit_code(), 0);
  put_npy(npy.path(), "3.npy", "float32", {4, 5}, changed(view_values(f, 0, {4, 5}, {0, 1}), 17, "float32"));
  r = compare_ok(gen + "/views.pt", npy.path());
  EXPECT_EQ(r.matched, 4u);
  EXPECT_EQ(r.differed, 1u);
  ASSERT_GE(r.first_divergence, 0);
  EXPECT_EQ(r.entries[static_cast<size_t>(r.first_divergence)].name, "3");
  EXPECT_EQ(r.entries[static_cast<size_t>(r.first_divergence)].result.first_mismatch, 17);
  // A tensor on one side only.
  fs::remove(npy.path() + "/2.npy");
  r = compare_ok(gen + "/views.pt", npy.path());
  EXPECT_EQ(r.only_in_a, 1u);

  put_npy(npy.path(), "scalar.npy", "float64", {}, {testing::torch_test_value("float64", 7)});
  r = compare_ok(gen + "/scalar.pt", npy.path() + "/scalar.npy");
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kMatch) << format_entry(r.entries[0]);
  EXPECT_TRUE(r.entries[0].result.shape_a.empty());
}

TEST(TorchRoundTrip, PickleSaveOfDictAndList) {
  REQUIRE_GENERATED(gen);
  TempDir dict_dir("ptnpy"), list_dir("ptnpy");
  put_npy(dict_dir.path(), "w.npy", "float32", {3, 5}, torch_test_base("float32"));
  put_npy(dict_dir.path(), "b.npy", "int64", {5}, view_values(torch_test_base("int64"), 5, {5}, {1}));
  CompareReport r = compare_ok(gen + "/pickle_dict.pt", dict_dir.path());
  EXPECT_EQ(r.matched, 2u) << format_summary(r);
  EXPECT_EQ(r.exit_code(), 0);
  put_npy(list_dir.path(), "0.npy", "float64", {3, 5}, torch_test_base("float64"));
  put_npy(list_dir.path(), "1.npy", "int32", {5, 3}, view_values(torch_test_base("int32"), 0, {5, 3}, {1, 5}));
  r = compare_ok(gen + "/pickle_list.pt", list_dir.path());
  EXPECT_EQ(r.matched, 2u) << format_summary(r);
  // Two multi-tensor files are paired by name: nothing in common here.
  r = compare_ok(gen + "/pickle_list.pt", gen + "/pickle_dict.pt");
  EXPECT_EQ(r.only_in_a, 2u);
  EXPECT_EQ(r.only_in_b, 2u);
}

// Directories of .pt files: "<relative path without .pt>/<tensor name>".
TEST(TorchRoundTrip, DirectoriesOfPtFilesAgainstNpyDumps) {
  REQUIRE_GENERATED(gen);
  TempDir a("pta"), b("ptb");
  fs::create_directories(a.path() + "/step_3");
  fs::copy_file(gen + "/pickle_dict.pt", a.path() + "/step_3/model.pt");
  fs::copy_file(gen + "/save_float32.pt", a.path() + "/step_3/x.pt");
  fs::copy_file(gen + "/pickle_float64.pt", a.path() + "/step_3/lone.pth");
  put_npy(a.path(), "step_3/plain.npy", "int8", {3, 5}, torch_test_base("int8"));
  put_npy(b.path(), "step_3/model/w.npy", "float32", {3, 5}, torch_test_base("float32"));
  put_npy(b.path(), "step_3/model/b.npy", "int64", {5}, view_values(torch_test_base("int64"), 5, {5}, {1}));
  put_npy(b.path(), "step_3/x/0.npy", "float32", {3, 5}, torch_test_base("float32"));
  put_npy(b.path(), "step_3/lone.npy", "float64", {3, 5}, torch_test_base("float64"));
  put_npy(b.path(), "step_3/plain.npy", "int8", {3, 5}, torch_test_base("int8"));
  CompareReport r = compare_ok(a.path(), b.path());
  std::vector<std::string> names;
  for (const CompareEntry& e : r.entries) {
    names.push_back(e.name);
    EXPECT_EQ(e.verdict, CompareVerdict::kMatch) << format_entry(e);
    EXPECT_EQ(e.step, 3);
  }
  EXPECT_THAT(names, ElementsAre("step_3/lone", "step_3/model/b", "step_3/model/w", "step_3/plain", "step_3/x/0"));
  // A corrupt .pt inside a directory: an ERROR entry naming it, the rest still compared.
  testing::write_bytes(a.path() + "/step_3/x.pt", "garbage");
  r = compare_ok(a.path(), b.path());
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_EQ(r.matched, 4u);
  EXPECT_EQ(r.only_in_b, 1u);  // step_3/x/0 has no partner now
  bool found = false;
  for (const CompareEntry& e : r.entries) {
    if (e.name == "step_3/x") {
      found = true;
      EXPECT_EQ(e.verdict, CompareVerdict::kError);
      EXPECT_THAT(e.error, HasSubstr(a.path() + "/step_3/x.pt"));
    }
  }
  EXPECT_TRUE(found);
}

// ---- files written by Python's torch.save -----------------------------------------------

bool python_has_torch() {
  static const int rc = shell("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1");
  return rc == 0;
}

TEST(TorchRoundTrip, FilesSavedByPython) {
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  TempDir dir("ptpy");
  const std::string script = dir.path() + "/save.py";
  std::ofstream(script) << R"PY(
import sys, torch
out = sys.argv[1]
def base(dtype):
    i = torch.arange(15, dtype=torch.int64)
    k = (i * 7) % 23 - 11
    if dtype == torch.int64:
        v = k * 800000000000
    else:
        v = k.double() * 0.5 + 0.25
    return v.reshape(3, 5).to(dtype)
f = base(torch.float32)
torch.save(f, out + "/single.pt")
torch.save(f.t(), out + "/transposed.pt")
torch.save(base(torch.bfloat16), out + "/bf16.pt")
torch.save({"a": f, "b": {"c": base(torch.int64)[:, ::2]}, "l": [base(torch.float64)[1]]},
           out + "/dict.pt")
lin = torch.nn.Linear(5, 3)
with torch.no_grad():
    lin.weight.copy_(f)
    lin.bias.copy_(f[0, :3])
torch.save(lin.state_dict(), out + "/state_dict.pt")
torch.save(f, out + "/legacy.pt", _use_new_zipfile_serialization=False)
)PY";
  ASSERT_EQ(shell("/usr/bin/python3 '" + script + "' '" + dir.path() + "'"), 0);
  TempDir npy("ptnpy");
  const std::vector<double> f = torch_test_base("float32");
  put_npy(npy.path(), "single.npy", "float32", {3, 5}, f);
  put_npy(npy.path(), "transposed.npy", "float32", {5, 3}, view_values(f, 0, {5, 3}, {1, 5}));
  put_npy(npy.path(), "bf16.npy", "bfloat16", {3, 5}, torch_test_base("bfloat16"));
  for (const std::string name : {"single", "transposed", "bf16"}) {
    const CompareReport r = compare_ok(dir.path() + "/" + name + ".pt", npy.path() + "/" + name + ".npy");
    ASSERT_EQ(r.entries.size(), 1u) << name;
    EXPECT_EQ(r.entries[0].verdict, CompareVerdict::kMatch) << format_entry(r.entries[0]);
    EXPECT_EQ(r.entries[0].result.dtype_a, r.entries[0].result.dtype_b) << name;
  }
  auto bf16 = list_torch_tensors(dir.path() + "/bf16.pt");
  ASSERT_TRUE(bf16) << bf16.message();
  EXPECT_EQ((*bf16)[0].dtype, DType::kBFloat16);
  EXPECT_EQ((*bf16)[0].name, "");

  TempDir dict_npy("ptnpy"), sd_npy("ptnpy");
  put_npy(dict_npy.path(), "a.npy", "float32", {3, 5}, f);
  put_npy(dict_npy.path(), "b.c.npy", "int64", {3, 3}, view_values(torch_test_base("int64"), 0, {3, 3}, {5, 2}));
  put_npy(dict_npy.path(), "l.0.npy", "float64", {5}, view_values(torch_test_base("float64"), 5, {5}, {1}));
  CompareReport r = compare_ok(dir.path() + "/dict.pt", dict_npy.path());
  EXPECT_EQ(r.matched, 3u) << format_summary(r);
  EXPECT_EQ(r.exit_code(), 0);
  put_npy(sd_npy.path(), "weight.npy", "float32", {3, 5}, f);
  put_npy(sd_npy.path(), "bias.npy", "float32", {3}, view_values(f, 0, {3}, {1}));
  r = compare_ok(dir.path() + "/state_dict.pt", sd_npy.path());
  EXPECT_EQ(r.matched, 2u) << format_summary(r);
  put_npy(sd_npy.path(), "bias.npy", "float32", {3}, changed(view_values(f, 0, {3}, {1}), 1, "float32"));
  r = compare_ok(dir.path() + "/state_dict.pt", sd_npy.path());
  EXPECT_EQ(r.differed, 1u);
  EXPECT_EQ(r.exit_code(), 1);
  ASSERT_GE(r.first_divergence, 0);
  EXPECT_EQ(r.entries[static_cast<size_t>(r.first_divergence)].name, "bias");

  auto legacy = compare_paths(dir.path() + "/legacy.pt", npy.path() + "/single.npy", kExact);
  ASSERT_FALSE(legacy);
  EXPECT_THAT(legacy.message(), HasSubstr(dir.path() + "/legacy.pt"));
  EXPECT_THAT(legacy.message(), HasSubstr("legacy"));
}

// ---- pairing rules and the command-line tool (hand-built files: no libtorch needed) ------

// A .pt holding {"w": float32 [2, 3], "b": int64 [3]} and one holding a lone tensor.
struct PtFiles {
  TempDir dir{"ptcli"};
  std::string multi, lone, npy_w, npy_b, npy_near;
  PtFiles() {
    const std::vector<float> w = {1, 2, 3, 4, 5, 6};
    const std::vector<int64_t> b = {7, 8, 9};
    PickleBytes p;
    p.proto().empty_dict().mark();
    p.str("w").tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
    p.str("b").tensor("LongStorage", "1", 3, 0, {3}, {1});
    p.setitems().stop();
    multi = dir.path() + "/multi.pt";
    testing::write_zip_file(
        multi, testing::torch_zip_spec("multi", p.bytes(), {{"0", testing::bytes_of(w)}, {"1", testing::bytes_of(b)}}));
    PickleBytes q;
    q.proto().tensor("FloatStorage", "0", 6, 0, {3, 2}, {1, 3}).stop();  // w transposed
    lone = dir.path() + "/lone.pt";
    testing::write_zip_file(lone, testing::torch_zip_spec("archive", q.bytes(), {{"0", testing::bytes_of(w)}}));
    fs::create_directories(dir.path() + "/npy");
    npy_w = dir.path() + "/npy/w.npy";
    npy_b = dir.path() + "/npy/b.npy";
    EXPECT_TRUE(recording::write_npy(npy_w, DType::kFloat32, {2, 3}, w.data(), 24));
    EXPECT_TRUE(recording::write_npy(npy_b, DType::kInt64, {3}, b.data(), 24));
    const std::vector<float> wt = {1, 4, 2, 5, 3, 6.5f};
    npy_near = dir.path() + "/wt.npy";
    EXPECT_TRUE(recording::write_npy(npy_near, DType::kFloat32, {3, 2}, wt.data(), 24));
  }
};

TEST(TorchComparePairing, FilesAndDirectories) {
  PtFiles f;
  // A multi-tensor file against a directory of .npy files named like its tensors.
  CompareReport r = compare_ok(f.multi, f.dir.path() + "/npy");
  EXPECT_EQ(r.matched, 2u);
  EXPECT_TRUE(r.directories);
  // A lone tensor against a .npy file, either way round.
  r = compare_ok(f.lone, f.npy_near);
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].name, f.lone + " vs " + f.npy_near);
  EXPECT_EQ(r.entries[0].result.mismatches, 1u);
  EXPECT_EQ(r.entries[0].result.first_mismatch, 5);
  r = compare_ok(f.npy_near, f.lone);
  EXPECT_EQ(r.entries[0].result.mismatches, 1u);
  // The same multi-tensor file twice.
  r = compare_ok(f.multi, f.multi);
  EXPECT_EQ(r.matched, 2u);
  EXPECT_EQ(r.exit_code(), 0);
  // A .npy file has no name to pair with one of several tensors.
  auto bad = compare_paths(f.npy_w, f.multi, kExact);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.message(), HasSubstr("cannot compare a single .npy file (" + f.npy_w + ")"));
  EXPECT_THAT(bad.message(), HasSubstr("which holds 2 tensors"));
  bad = compare_paths(f.npy_w, f.dir.path() + "/npy", kExact);
  ASSERT_FALSE(bad);  // the plain .npy rule: a file against a directory
  // A lone tensor against a directory: nothing pairs with the unnamed tensor.
  r = compare_ok(f.lone, f.dir.path() + "/npy");
  EXPECT_EQ(r.only_in_a, 1u);
  EXPECT_EQ(r.only_in_b, 2u);
  EXPECT_THAT(format_summary(r), HasSubstr("(unnamed tensor)"));
}

// Several files of a directory giving one name (x.npy and lone tensors in x.pt, x.PT,
// x.pth, x.Pth: all "x"), beside a file named "x#3": kept as x, x#2, x#4, ...
TEST(TorchComparePairing, RepeatedNamesOnOneSideAreKeptApart) {
  PtFiles f;
  TempDir a("ptrep"), b("ptrepb");
  for (const char* name : {"x.pt", "x.PT", "x.pth", "x.Pth"}) fs::copy_file(f.lone, a.path() + "/" + name);
  fs::copy_file(f.npy_near, a.path() + "/x.npy");
  fs::copy_file(f.npy_near, a.path() + "/x#3.npy");
  CompareReport r = compare_ok(a.path(), b.path());
  std::vector<std::string> names;
  for (const CompareEntry& e : r.entries) names.push_back(e.name);
  EXPECT_THAT(names, ElementsAre("x", "x#2", "x#3", "x#4", "x#5", "x#6"));
  EXPECT_EQ(r.only_in_a, 6u);
}

// The tensorscope tool with `args` (testing::run_program: 60 s deadline); `memory_mib` > 0
// limits its address space to that many MiB.
CliRun run_cli(const std::vector<std::string>& args, size_t memory_mib = 0) {
  std::vector<std::string> argv = {TENSORSCOPE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  if (memory_mib == 0) return testing::run_program(argv);
  return testing::run_program(argv, [memory_mib] { return testing::limit_total_address_space(memory_mib); });
}

TEST(TorchCompareCli, ExitCodesOnPtInput) {
  PtFiles f;
  CliRun r = run_cli({"compare", f.multi, f.dir.path() + "/npy"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("MATCH  w  float32[2,3]"));
  EXPECT_THAT(r.out, HasSubstr("MATCH  b  int64[3]"));

  r = run_cli({"compare", f.lone, f.npy_near});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("DIFFER"));
  EXPECT_THAT(r.out, HasSubstr("mismatches 1/6"));
  r = run_cli({"compare", f.lone, f.npy_near, "--atol", "0.6"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  r = run_cli({"compare", f.multi, f.multi, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["matched"], 2);

  // Bad input: exit 2, a message naming the file, never a crash.
  const std::string truncated = f.dir.path() + "/truncated.pt";
  const std::string whole = slurp(f.multi);
  testing::write_bytes(truncated, whole.substr(0, whole.size() / 2));
  const std::string legacy = f.dir.path() + "/legacy.pt";
  testing::write_bytes(legacy, std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14) + "rest");
  const std::string text = f.dir.path() + "/text.pth";
  testing::write_bytes(text, "just text");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"compare", truncated, f.multi}, truncated + ": not a zip archive"},
      {{"compare", f.multi, legacy}, legacy + ": PyTorch's legacy"},
      {{"compare", text, f.npy_w}, text + ": not a zip archive"},
      {{"compare", f.npy_w, f.multi}, "cannot compare a single .npy file"},
  };
  for (const Case& c : cases) {
    const CliRun run = run_cli(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.message << "\n" << run.out << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_THAT(run.err, Not(HasSubstr("CHECK failed")));
  }

  // Inside directories: reported as an ERROR line, then exit 2.
  TempDir a("ptclia"), b("ptclib");
  fs::copy_file(f.multi, a.path() + "/m.pt");
  fs::copy_file(truncated, a.path() + "/broken.pt");
  fs::copy_file(f.multi, b.path() + "/m.pt");
  r = run_cli({"compare", a.path(), b.path()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("ERROR  broken  error: " + a.path() + "/broken.pt"));
  EXPECT_THAT(r.out, HasSubstr("MATCH  m/w"));
  EXPECT_THAT(r.err, HasSubstr("could not be read"));

  r = run_cli({"compare", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr(".pt"));
  EXPECT_THAT(r.out, Not(HasSubstr("Not yet supported")));
}

// Hostile files, read by the tool under a 192 MiB limit on its address space: exit 2
// with a message naming the file, never an abort ("terminate called ... bad_alloc").
TEST(TorchCompareCli, HostileFilesExitTwoWithAMessage) {
  PtFiles f;
  // 20 levels of {A: prev, B: prev} with 4 KiB keys: 2^20 tensors with 80 KiB names.
  PickleBytes dag;
  dag.proto().str(std::string(4096, 'a')).put(0).pop().str(std::string(4096, 'b')).put(1).pop();
  dag.tensor("FloatStorage", "0", 6, 0, {6}, {1}).put(2);
  for (uint8_t level = 0; level < 20; ++level) {
    dag.mark().get(0).get(2 + level).get(1).get(2 + level).dict().put(3 + level);
  }
  const std::string dag_pt = f.dir.path() + "/dag.pt";
  ASSERT_TRUE(testing::write_zip_file(dag_pt, testing::torch_zip_spec("archive", dag.stop().bytes(), {})));
  // 2M empty lists (a 4 MB data.pkl): the unpickler needs more than the limit allows.
  std::string lists = "\x80\x02";
  for (int i = 0; i < 2000000; ++i) lists += "]0";
  lists += "N.";
  const std::string lists_pt = f.dir.path() + "/lists.pt";
  ASSERT_TRUE(testing::write_zip_file(lists_pt, testing::torch_zip_spec("archive", lists, {})));
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"compare", dag_pt, f.multi}, dag_pt + ": a tensor name longer than 4096 bytes"},
      {{"compare", f.multi, dag_pt}, dag_pt + ": a tensor name longer than 4096 bytes"},
  };
  if (!testing::kSanitizedBuild) {  // no address-space limit there
    cases.push_back({{"compare", lists_pt, f.multi}, lists_pt + ": archive/data.pkl: out of memory"});
  }
  for (const Case& c : cases) {
    const CliRun run = run_cli(c.args, 192);
    EXPECT_EQ(run.exit_code, 2) << c.message << "\n" << run.out << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_THAT(run.err, Not(HasSubstr("terminate called")));
  }
  // Inside a directory: that file's ERROR line, the others compared, exit 2.
  TempDir a("pthosta"), b("pthostb");
  fs::copy_file(dag_pt, a.path() + "/dag.pt");
  fs::copy_file(f.multi, a.path() + "/m.pt");
  fs::copy_file(f.multi, b.path() + "/m.pt");
  const CliRun run = run_cli({"compare", a.path(), b.path()}, 192);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("ERROR  dag  error: " + a.path() + "/dag.pt: a tensor name longer"));
  EXPECT_THAT(run.out, HasSubstr("MATCH  m/w"));
}

}  // namespace
}  // namespace tensorscope::compare
