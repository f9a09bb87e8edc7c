// hdf5_compare_test.cc — compare_paths over HDF5 recordings written by the real
// Hdf5Sink: equal and different recordings (exact metrics), a stream on one side
// only, change-detection gaps, files of one side merged, bfloat16 recordings against
// a .npy dump directory, and corrupt files (an error naming the file, exit 2 from the
// real `tensorscope compare` binary), and the HDF5 reader process: a file that makes
// libhdf5 loop is an error after the timeout (fuzz/known_hangs/), a dead reader is
// replaced, reads through it equal reads in this process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compare/dump_compare.h"
#include "compare/hdf5_reader_process.h"
#include "compare/hdf5_source.h"
#include "tensorscope/recording/file_naming.h"
#include "tensorscope/recording/hdf5_sink.h"
#include "tensorscope/recording/npy_file.h"
#include "temp_dir.h"

namespace tensorscope::compare {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using wire::DType;
namespace fs = std::filesystem;

struct Value {
  std::string stream;
  int64_t step;
  std::vector<float> data;  // shape [2, 3] unless smaller
  int rank = 0;
};

// Writes `values` with one Hdf5Sink into `dir`/rank0_pid1.<n>.h5 (finalize after each
// index listed in `finalize_after`, so several files).
void record(const std::string& dir, const std::vector<Value>& values, bool change_detection,
            std::vector<size_t> finalize_after = {}) {
  recording::Hdf5SinkOptions options;
  options.change_detection = change_detection;
  auto sink = recording::Hdf5Sink::open(dir, "rank0_pid1", options);
  ASSERT_TRUE(sink) << sink.message();
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    recording::Hdf5Record r;
    r.stream = v.stream;
    r.kind = "activation";
    r.device = "cpu";
    r.rank = v.rank;
    r.step = v.step;
    r.dtype = DType::kFloat32;
    r.shape =
        v.data.size() == 6 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{static_cast<int64_t>(v.data.size())};
    r.data = v.data.data();
    r.bytes = v.data.size() * sizeof(float);
    Status appended = (*sink)->append(r);
    ASSERT_TRUE(appended) << appended.message();
    for (size_t f : finalize_after) {
      if (f == i) {
        ASSERT_TRUE((*sink)->finalize());
      }
    }
  }
  Status done = (*sink)->finalize();
  ASSERT_TRUE(done) << done.message();
}

std::vector<float> ramp(float base) { return {base, base + 1, base + 2, base + 3, base + 4, base + 5}; }

// Streams x and y at steps 1, 2, 3, every value different (change detection stores all).
std::vector<Value> run_values() {
  std::vector<Value> values;
  for (int64_t step = 1; step <= 3; ++step) {
    values.push_back({"x", step, ramp(10.0f * step)});
    values.push_back({"model/y", step, ramp(100.0f * step)});
  }
  return values;
}

// How the .npy sink names stream "model/y" in a dump directory (and so compare names it).
std::string y_file() { return recording::sanitize_stream_name("model/y"); }

const CompareEntry* find_entry(const CompareReport& r, const std::string& name) {
  for (const CompareEntry& e : r.entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST(Hdf5Compare, ListsRowsOfEveryGroup) {
  TempDir dir("h5list");
  record(dir.path(), run_values(), true);
  auto tensors = list_hdf5_tensors(dir.path() + "/rank0_pid1.0.h5");
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 6u);
  int x_rows = 0;
  for (const Hdf5Tensor& t : *tensors) {
    EXPECT_EQ(t.dtype, DType::kFloat32);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
    if (t.stream == "x") {
      EXPECT_EQ(t.step, static_cast<int64_t>(t.row) + 1);
      ++x_rows;
    }
  }
  EXPECT_EQ(x_rows, 3);
}

TEST(Hdf5Compare, EqualRecordingsMatch) {
  TempDir a("h5a"), b("h5b");
  record(a.path(), run_values(), true);
  record(b.path(), run_values(), false);
  for (const auto& [pa, pb] :
       {std::pair(a.path(), b.path()), std::pair(a.path() + "/rank0_pid1.0.h5", b.path() + "/rank0_pid1.0.h5")}) {
    auto r = compare_paths(pa, pb, CompareTolerance{});
    ASSERT_TRUE(r) << r.message();
    EXPECT_TRUE(r->directories);
    EXPECT_EQ(r->entries.size(), 6u);
    EXPECT_EQ(r->matched, 6u);
    EXPECT_EQ(r->exit_code(), 0);
    const CompareEntry* e = find_entry(*r, "step_2/" + y_file() + "_rank0");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->step, 2);
    EXPECT_EQ(e->stream, "model/y");
    EXPECT_EQ(e->result.total, 6u);
    EXPECT_DOUBLE_EQ(e->result.cosine, 1.0);
  }
}

TEST(Hdf5Compare, DifferentValuesGiveExactMetricsAndFirstDivergence) {
  TempDir a("h5a"), b("h5b");
  std::vector<Value> values = run_values();
  record(a.path(), values, true);
  values[3].data[4] = 250.0f;  // model/y at step 2: 204 -> 250
  values[4].data[0] = 31.0f;   // x at step 3: 30 -> 31
  record(b.path(), values, true);
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->matched, 4u);
  EXPECT_EQ(r->differed, 2u);
  EXPECT_EQ(r->exit_code(), 1);
  ASSERT_GE(r->first_divergence, 0);
  const CompareEntry& first = r->entries[static_cast<size_t>(r->first_divergence)];
  EXPECT_EQ(first.name, "step_2/" + y_file() + "_rank0");
  EXPECT_EQ(first.verdict, CompareVerdict::kDiffer);
  EXPECT_EQ(first.result.total, 6u);
  EXPECT_EQ(first.result.mismatches, 1u);
  EXPECT_DOUBLE_EQ(first.result.max_abs_error, 46.0);
  EXPECT_DOUBLE_EQ(first.result.max_rel_error, 46.0 / 250.0);
  EXPECT_EQ(first.result.first_mismatch, 4);
  EXPECT_DOUBLE_EQ(first.result.first_mismatch_a, 204.0);
  EXPECT_DOUBLE_EQ(first.result.first_mismatch_b, 250.0);
  EXPECT_THAT(format_summary(*r), HasSubstr("first divergence: step 2, stream model/y"));
  const CompareEntry* x3 = find_entry(*r, "step_3/x_rank0");
  ASSERT_NE(x3, nullptr);
  EXPECT_EQ(x3->verdict, CompareVerdict::kDiffer);
  EXPECT_DOUBLE_EQ(x3->result.max_abs_error, 1.0);
  EXPECT_EQ(x3->result.first_mismatch, 0);

  // Tiny chunks (one element at a time) give the same metrics.
  auto small = compare_paths(a.path(), b.path(), CompareTolerance{}, 8);
  ASSERT_TRUE(small) << small.message();
  const CompareEntry* y2 = find_entry(*small, "step_2/" + y_file() + "_rank0");
  ASSERT_NE(y2, nullptr);
  EXPECT_EQ(y2->result.mismatches, 1u);
  EXPECT_DOUBLE_EQ(y2->result.max_abs_error, 46.0);
  EXPECT_DOUBLE_EQ(y2->result.cosine, first.result.cosine);
}

TEST(Hdf5Compare, StreamOnOneSideOnlyIsADifference) {
  TempDir a("h5a"), b("h5b");
  std::vector<Value> values = run_values();
  record(a.path(), values, true);
  std::vector<Value> only_x;
  for (const Value& v : values) {
    if (v.stream == "x") only_x.push_back(v);
  }
  record(b.path(), only_x, true);
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->matched, 3u);
  EXPECT_EQ(r->only_in_a, 3u);
  EXPECT_EQ(r->only_in_b, 0u);
  EXPECT_EQ(r->exit_code(), 1);
  const CompareEntry& first = r->entries[static_cast<size_t>(r->first_divergence)];
  EXPECT_EQ(first.name, "step_1/" + y_file() + "_rank0");
  EXPECT_EQ(first.verdict, CompareVerdict::kOnlyInA);
  // And the other way round.
  auto back = compare_paths(b.path(), a.path(), CompareTolerance{});
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(back->only_in_b, 3u);
}

TEST(Hdf5Compare, ChangeDetectionGapsAreStepsOnOneSide) {
  TempDir a("h5a"), b("h5b");
  // x is unchanged at step 2: with change detection A stores steps 1 and 3 only.
  const std::vector<Value> values = {{"x", 1, ramp(1)}, {"x", 2, ramp(1)}, {"x", 3, ramp(5)}};
  record(a.path(), values, true);
  record(b.path(), values, false);
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->entries.size(), 3u);
  EXPECT_EQ(r->matched, 2u);
  EXPECT_EQ(r->only_in_b, 1u);
  const CompareEntry& first = r->entries[static_cast<size_t>(r->first_divergence)];
  EXPECT_EQ(first.name, "step_2/x_rank0");
  EXPECT_EQ(first.step, 2);
  EXPECT_EQ(first.verdict, CompareVerdict::kOnlyInB);
}

TEST(Hdf5Compare, FilesOfOneSideAreMerged) {
  TempDir a("h5a"), b("h5b");
  record(a.path(), run_values(), true, {1, 3});  // three files
  record(b.path(), run_values(), true);          // one file
  ASSERT_TRUE(fs::exists(a.path() + "/rank0_pid1.2.h5"));
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->matched, 6u);
  EXPECT_EQ(r->exit_code(), 0);
}

TEST(Hdf5Compare, BFloat16RecordingAgainstNpyDump) {
  TempDir a("h5a"), b("npyb");
  {
    auto sink = recording::Hdf5Sink::open(a.path(), "rank1_pid7", recording::Hdf5SinkOptions{});
    ASSERT_TRUE(sink) << sink.message();
    // bfloat16 bits of 1.0, -2.0, 0.5.
    const std::vector<uint16_t> bits = {0x3F80, 0xC000, 0x3F00};
    recording::Hdf5Record r;
    r.stream = "h";
    r.kind = "activation";
    r.device = "cpu";
    r.rank = 1;
    r.step = 4;
    r.dtype = DType::kBFloat16;
    r.shape = {3};
    r.data = bits.data();
    r.bytes = bits.size() * 2;
    ASSERT_TRUE((*sink)->append(r));
    ASSERT_TRUE((*sink)->finalize());
  }
  const std::vector<float> same = {1.0f, -2.0f, 0.5f};
  fs::create_directories(b.path() + "/step_4");
  ASSERT_TRUE(recording::write_npy(b.path() + "/step_4/h_rank1.npy", DType::kFloat32, {3}, same.data(), 12));
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].name, "step_4/h_rank1");
  EXPECT_EQ(r->entries[0].verdict, CompareVerdict::kMatch);
  EXPECT_EQ(r->entries[0].result.dtype_a, DType::kBFloat16);
  EXPECT_EQ(r->entries[0].result.dtype_b, DType::kFloat32);
  // The .h5 file itself against the dump directory works too.
  auto file_vs_dir = compare_paths(a.path() + "/rank1_pid7.0.h5", b.path(), CompareTolerance{});
  ASSERT_TRUE(file_vs_dir) << file_vs_dir.message();
  EXPECT_EQ(file_vs_dir->matched, 1u);
}

// A stream whose name holds '/' pairs with the file the .npy sink wrote for it, and the
// entry keeps the stream's own name.
TEST(Hdf5Compare, StreamNamesWithSlashesPairWithTheirNpyDumps) {
  TempDir a("h5a"), b("npyb");
  record(a.path(), run_values(), /*change_detection=*/true);
  for (const Value& v : run_values()) {
    const std::string dir = b.path() + "/step_" + std::to_string(v.step);
    fs::create_directories(dir);
    const std::string file = dir + "/" + recording::sanitize_stream_name(v.stream) + "_rank0.npy";
    ASSERT_TRUE(recording::write_npy(file, DType::kFloat32, {2, 3}, v.data.data(), 24));
  }
  EXPECT_NE(y_file(), "model_y");  // made unique: it is not the name of a stream "model_y"
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->matched, 6u) << format_summary(*r);
  EXPECT_TRUE(r->all_match());
  const CompareEntry* y = find_entry(*r, "step_3/" + y_file() + "_rank0");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->stream, "model/y");
  EXPECT_EQ(y->verdict, CompareVerdict::kMatch);
}

int run_cli(const std::string& a, const std::string& b, std::string* err) {
  TempDir out("h5cli");
  const std::string err_path = out.path() + "/err";
  const std::string command =
      std::string(TENSORSCOPE_CLI_PATH) + " compare '" + a + "' '" + b + "' > /dev/null 2> '" + err_path + "'";
  const int status = std::system(command.c_str());
  std::ifstream in(err_path);
  std::stringstream text;
  text << in.rdbuf();
  *err = text.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Hdf5Compare, CorruptFileIsAnErrorNamingIt) {
  TempDir a("h5a"), b("h5b");
  record(a.path(), run_values(), true);
  record(b.path(), run_values(), true);
  const std::string bad = b.path() + "/rank0_pid1.0.h5";
  {
    // Keep the signature, cut the rest: a truncated file.
    std::ifstream in(bad, std::ios::binary);
    std::string head(512, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << head;
  }
  auto r = compare_paths(a.path(), b.path(), CompareTolerance{});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr(bad));
  std::string err;
  EXPECT_EQ(run_cli(a.path(), b.path(), &err), 2);
  EXPECT_THAT(err, HasSubstr(bad));

  std::ofstream(bad, std::ios::binary | std::ios::trunc) << "not an hdf5 file";
  auto garbage = compare_paths(a.path() + "/rank0_pid1.0.h5", bad, CompareTolerance{});
  ASSERT_FALSE(garbage);
  EXPECT_THAT(garbage.message(), HasSubstr(bad));
  EXPECT_EQ(run_cli(a.path() + "/rank0_pid1.0.h5", bad, &err), 2);
  EXPECT_THAT(err, HasSubstr(bad));
  EXPECT_THAT(err, HasSubstr("HDF5"));
}

TEST(Hdf5Compare, CliExitCodes) {
  TempDir a("h5a"), b("h5b");
  std::vector<Value> values = run_values();
  record(a.path(), values, true);
  record(b.path(), values, true);
  std::string err;
  EXPECT_EQ(run_cli(a.path(), b.path(), &err), 0) << err;
  TempDir c("h5c");
  values[0].data[0] = -1.0f;
  record(c.path(), values, true);
  EXPECT_EQ(run_cli(a.path(), c.path(), &err), 1) << err;
}

// fuzz/known_hangs/: a corrupt global heap on which H5Aread never returns.
const std::string kHangingFile = std::string(TENSORSCOPE_SOURCE_DIR) + "/fuzz/known_hangs/hdf5_global_heap_loop.h5";

TEST(Hdf5ReaderProcess, AFileThatHangsLibhdf5IsAnErrorAfterTheTimeout) {
  TempDir dir("h5hang");
  record(dir.path(), run_values(), true);
  Hdf5ReaderProcess reader(std::chrono::milliseconds(1500));
  // Every file fuzzing found to hang libhdf5 (known_hangs/), not only the first.
  std::vector<std::string> hanging;
  for (const auto& e : fs::directory_iterator(std::string(TENSORSCOPE_SOURCE_DIR) + "/fuzz/known_hangs")) {
    hanging.push_back(e.path().string());
  }
  ASSERT_GE(hanging.size(), 2u);
  for (const std::string& file : hanging) {
    const auto begin = std::chrono::steady_clock::now();
    auto hung = reader.list(file);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    ASSERT_FALSE(hung) << file;
    EXPECT_THAT(hung.message(), HasSubstr("libhdf5 did not finish reading " + file + " in 1.5 s"));
    EXPECT_GE(seconds, 1.4) << file;
    EXPECT_LT(seconds, 10.0) << file;
    EXPECT_EQ(reader.child_pid(), 0);  // killed and reaped
    // The next request gets a new reader.
    auto listed = reader.list(dir.path() + "/rank0_pid1.0.h5");
    ASSERT_TRUE(listed) << listed.message();
    EXPECT_EQ(listed->size(), 6u);
    EXPECT_GT(reader.child_pid(), 0);
  }
}

TEST(Hdf5ReaderProcess, TheCommandLineToolStopsOnAHangingFile) {
  TempDir out("h5hangcli");
  const std::string command = "timeout 120 " + std::string(TENSORSCOPE_CLI_PATH) + " compare --hdf5-timeout 1 '" +
      kHangingFile + "' '" + kHangingFile + "' > /dev/null 2> '" + out.path() + "/err'";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);  // not 124: timeout(1) did not have to stop it
  std::ifstream in(out.path() + "/err");
  std::stringstream err;
  err << in.rdbuf();
  EXPECT_THAT(err.str(), HasSubstr("libhdf5 did not finish reading " + kHangingFile + " in 1 s"));
  EXPECT_EQ(std::system((std::string(TENSORSCOPE_CLI_PATH) + " compare --hdf5-timeout 0 a b 2>/dev/null").c_str()),
            2 << 8);
}

TEST(Hdf5ReaderProcess, AReaderThatDiedIsReplaced) {
  TempDir dir("h5dead");
  record(dir.path(), run_values(), true);
  const std::string file = dir.path() + "/rank0_pid1.0.h5";
  Hdf5ReaderProcess reader;
  ASSERT_TRUE(reader.list(file));
  const pid_t first = reader.child_pid();
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  // Reaped once it is gone; until then the request may see it die mid-way.
  for (int i = 0; i < 100 && ::kill(first, 0) == 0; ++i) {
    auto again = reader.list(file);
    if (again) break;
    EXPECT_THAT(again.message(), HasSubstr("killed by signal 9"));
  }
  auto listed = reader.list(file);
  ASSERT_TRUE(listed) << listed.message();
  EXPECT_EQ(listed->size(), 6u);
  EXPECT_NE(reader.child_pid(), first);
}

TEST(Hdf5ReaderProcess, ReadsEqualReadsInThisProcess) {
  TempDir dir("h5read");
  record(dir.path(), run_values(), true);
  const std::string file = dir.path() + "/rank0_pid1.0.h5";
  auto direct = list_recording(file);
  ASSERT_TRUE(direct) << direct.message();
  Hdf5ReaderProcess reader;
  auto listed = reader.list(file);
  ASSERT_TRUE(listed) << listed.message();
  ASSERT_EQ(listed->size(), direct->size());
  Hdf5RowReader here;
  for (size_t i = 0; i < direct->size(); ++i) {
    const Hdf5Tensor& d = (*direct)[i];
    const Hdf5Tensor& p = (*listed)[i];
    EXPECT_EQ(p.file, d.file);
    EXPECT_EQ(p.group, d.group);
    EXPECT_EQ(p.stream, d.stream);
    EXPECT_EQ(p.row, d.row);
    EXPECT_EQ(p.step, d.step);
    EXPECT_EQ(p.rank, d.rank);
    EXPECT_EQ(p.dtype, d.dtype);
    EXPECT_EQ(p.shape, d.shape);
    // Second slice of [2, 3]: 3 floats.
    std::vector<float> a(3, -1.0f), b(3, -2.0f);
    ASSERT_TRUE(here.read(d, 1, 1, reinterpret_cast<unsigned char*>(a.data())));
    ASSERT_TRUE(reader.read(p, 1, 1, reinterpret_cast<unsigned char*>(b.data()), 12));
    EXPECT_EQ(a, b);
    const float base = d.stream == "x" ? 10.0f * d.step : 100.0f * d.step;
    EXPECT_EQ(b, (std::vector<float>{base + 3, base + 4, base + 5}));
  }
  // Outside the tensor, or a size the caller did not expect: errors naming the file.
  std::vector<float> out(6);
  auto outside = reader.read((*listed)[0], 1, 2, reinterpret_cast<unsigned char*>(out.data()), 24);
  ASSERT_FALSE(outside);
  EXPECT_THAT(outside.message(), HasSubstr(file));
  EXPECT_THAT(outside.message(), HasSubstr("outside the tensor"));
  auto wrong_size = reader.read((*listed)[0], 0, 2, reinterpret_cast<unsigned char*>(out.data()), 20);
  ASSERT_FALSE(wrong_size);
  EXPECT_THAT(wrong_size.message(), HasSubstr("24 bytes, 20 were asked for"));
  // A file replaced between requests is read anew (libhdf5 would share the old one).
  TempDir other("h5other");
  std::vector<Value> changed = run_values();
  for (Value& v : changed) v.data[3] = -7.0f;
  record(other.path(), changed, true);
  fs::rename(other.path() + "/rank0_pid1.0.h5", file);
  auto relisted = reader.list(file);
  ASSERT_TRUE(relisted) << relisted.message();
  std::vector<float> slice(3);
  ASSERT_TRUE(reader.read((*relisted)[0], 1, 1, reinterpret_cast<unsigned char*>(slice.data()), 12));
  EXPECT_EQ(slice[0], -7.0f);
  auto missing = reader.list(dir.path() + "/nothing.h5");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.message(), HasSubstr("nothing.h5"));
}

}  // namespace
}  // namespace tensorscope::compare
