// hdf5_sink_flush_test.cc — Hdf5Sink's periodic flushes: writers SIGKILLed between
// flushes, at each stage of a flush and at random moments (recovered partials hold
// exactly the rows of a completed flush, cut back when needed); flush_seconds 0; appends
// never flush; a chunk rewritten at the end of the file; flush markers missing or damaged.
#include "hdf5_sink_test_support.h"

namespace tensorscope::recording {
namespace {

using namespace sink_testing;  // NOLINT: the shared helpers of the Hdf5Sink tests

// ---- periodic flushes: what a killed writer keeps ----

// The streams of the flush tests, one float32 row each per step (make_bytes(..., step)):
// many rows per chunk, four rows per chunk, scalars.
struct FlushStream {
  const char* name;
  std::vector<int64_t> shape;
  size_t numel;
};
const std::vector<FlushStream> kFlushStreams = {{"small", {8}, 8}, {"big", {64, 64}, 4096}, {"loss", {}, 1}};

// Appends one row of every stream at `step` (and of `extra`, shaped like "small", when
// given).
bool append_step(Hdf5Sink& sink, int64_t step, const char* extra = nullptr) {
  for (const FlushStream& s : kFlushStreams) {
    const std::string bytes = make_bytes(DType::kFloat32, s.numel, static_cast<int>(step));
    if (!sink.append(make_record(s.name, DType::kFloat32, s.shape, bytes, step)).is_ok()) {
      return false;
    }
  }
  if (extra == nullptr) return true;
  const std::string bytes = make_bytes(DType::kFloat32, 8, static_cast<int>(step));
  return sink.append(make_record(extra, DType::kFloat32, {8}, bytes, step)).is_ok();
}

// A stream appended from step `first` on by append_step(.., extra), shaped like "small".
struct ExtraStream {
  std::string name;
  int64_t first = 0;
};

// Expects `path` to hold exactly steps 0 .. rows-1 of kFlushStreams (and first .. rows-1
// of each of `extras`), every value as appended.
void expect_flushed_rows(const std::string& path, int64_t rows, const std::vector<ExtraStream>& extras = {}) {
  H5File f(path);
  ASSERT_TRUE(f.ok()) << path;
  struct Expected {
    std::string name;
    size_t numel;
    int64_t first;
  };
  std::vector<Expected> streams;
  for (const FlushStream& s : kFlushStreams) streams.push_back({s.name, s.numel, 0});
  for (const ExtraStream& e : extras) streams.push_back({e.name, 8, e.first});
  std::vector<std::string> names;
  for (const Expected& e : streams) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(f.groups(), names) << path;
  for (const Expected& e : streams) {
    SCOPED_TRACE(e.name);
    const std::string g = "/" + e.name;
    const auto steps = f.steps(g);
    const auto n = static_cast<size_t>(rows - e.first);
    ASSERT_EQ(steps.size(), n);
    std::string expected;
    for (size_t i = 0; i < n; ++i) {
      const int64_t step = e.first + static_cast<int64_t>(i);
      EXPECT_EQ(steps[i], step);
      expected += make_bytes(DType::kFloat32, e.numel, static_cast<int>(step));
    }
    EXPECT_TRUE(f.raw(g + "/values") == expected) << "values differ";
    EXPECT_EQ(f.ranks(g), std::vector<int32_t>(n, 0));
    EXPECT_EQ(f.devices(g), std::vector<std::string>(n, "cpu"));
  }
}

// With h5py (skipped without it): the same check as expect_flushed_rows.
void expect_flushed_rows_h5py(const std::string& path, int64_t rows, const std::vector<ExtraStream>& extras = {}) {
  if (!h5py_available()) return;
  std::string streams = "[('small', 8, 0), ('big', 4096, 0), ('loss', 1, 0)";
  for (const ExtraStream& e : extras) {
    streams += ", ('" + e.name + "', 8, " + std::to_string(e.first) + ")";
  }
  streams += "]";
  const std::string script = path + ".check.py";
  std::ofstream(script) << "import sys, h5py, numpy as np\n"
                           "f = h5py.File(sys.argv[1], 'r')\n"
                           "rows = int(sys.argv[2])\n"
                           "streams = "
                        << streams
                        << "\n"
                           "assert sorted(f.keys()) == sorted(s[0] for s in streams), list(f.keys())\n"
                           "for name, numel, first in streams:\n"
                           "    g = f[name]\n"
                           "    assert g['steps'][...].tolist() == list(range(first, rows)), name\n"
                           "    v = g['values'][...].reshape(rows - first, numel)\n"
                           "    j = np.arange(numel)\n"
                           "    want = np.array([(j * 3 + s * 7 - 5) * 0.25 for s in range(first, rows)], "
                           "np.float32).reshape(rows - first, numel)\n"
                           "    assert v.dtype == np.float32 and (v == want).all(), name\n"
                           "print('ok')\n";
  const std::string out_path = path + ".check.out";
  const std::string command =
      "/usr/bin/python3 '" + script + "' '" + path + "' " + std::to_string(rows) + " >'" + out_path + "' 2>&1";
  const int rc = std::system(command.c_str());
  const std::string out = read_file(out_path);
  std::filesystem::remove(script);
  std::filesystem::remove(out_path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

// A child process running `body(report_fd)`, which reports int64 values on a pipe.
// run_child() waits (at most `timeout`) until `want` values came or the child closed
// the pipe (it died), then waits `kill_delay`, SIGKILLs the child, reaps it and reads
// what it reported before.
struct ChildRun {
  std::vector<int64_t> reports;
  int wstatus = 0;
  bool killed_by_sigkill() const { return WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL; }
};

void report(int fd, int64_t value) {
  if (::write(fd, &value, sizeof(value)) != sizeof(value)) ::_exit(20);
}

ChildRun run_child(size_t want, const std::function<void(int)>& body,
                   std::chrono::microseconds kill_delay = std::chrono::microseconds(0)) {
  ChildRun run;
  int fds[2];
  if (::pipe(fds) != 0) return run;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  if (child < 0) {
    ::close(fds[0]);
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t value = 0;
  size_t have = 0;  // bytes of `value` read so far
  auto read_some = [&](int timeout_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return false;
    const ssize_t n = ::read(fds[0], reinterpret_cast<char*>(&value) + have, sizeof(value) - have);
    if (n <= 0) return false;  // the child is gone
    have += static_cast<size_t>(n);
    if (have == sizeof(value)) {
      run.reports.push_back(value);
      have = 0;
    }
    return true;
  };
  while (run.reports.size() < want) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !read_some(static_cast<int>(left.count()))) break;
  }
  if (kill_delay.count() > 0) std::this_thread::sleep_for(kill_delay);
  ::kill(child, SIGKILL);
  ::waitpid(child, &run.wstatus, 0);
  while (read_some(0)) {}
  ::close(fds[0]);
  return run;
}

class Hdf5FlushKill : public ::testing::TestWithParam<int> {};  // gzip level

TEST_P(Hdf5FlushKill, ARecoveredPartialHoldsEveryRowOfTheLastFlush) {
  TempDir tmp("h5flushkill");
  constexpr int64_t kFlushed = 300;  // steps before the flush
  constexpr int64_t kMore = 500;     // steps after it, lost with the kill
  const ChildRun run = run_child(2, [&](int fd) {
    Hdf5SinkOptions options = default_options();
    options.gzip_level = GetParam();
    options.change_detection = false;
    options.flush_seconds = 1;
    auto sink = Hdf5Sink::open(tmp.path(), "rank0_pid1", options);
    if (!sink.is_ok()) ::_exit(2);
    for (int64_t step = 0; step < kFlushed; ++step) {
      if (!append_step(**sink, step)) ::_exit(3);
    }
    // poll() flushes once a second passed since the file was created.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((*sink)->flushes() == 0) {
      if (!(*sink)->poll().is_ok() || std::chrono::steady_clock::now() > deadline) ::_exit(4);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    report(fd, static_cast<int64_t>((*sink)->flushes()));
    // More rows (and a new stream) after the flush: chunks are rewritten and evicted.
    for (int64_t step = kFlushed; step < kFlushed + kMore; ++step) {
      if (!append_step(**sink, step, "late")) ::_exit(5);
    }
    report(fd, static_cast<int64_t>((*sink)->flushes()));  // appends never flush
    for (;;) ::pause();                                    // until killed
  });
  ASSERT_EQ(run.reports, (std::vector<int64_t>{1, 1})) << "child status " << run.wstatus;
  ASSERT_TRUE(run.killed_by_sigkill()) << run.wstatus;
  ASSERT_EQ(count_partial(tmp.path()), 1u);

  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->removed.empty());
  EXPECT_TRUE(r->truncated.empty());
  EXPECT_TRUE(r->problems.empty());
  ASSERT_THAT(r->recovered, ElementsAre(tmp.path() + "/rank0_pid1.0.recovered.h5"));
  expect_flushed_rows(r->recovered[0], kFlushed);
  expect_flushed_rows_h5py(r->recovered[0], kFlushed);
  EXPECT_EQ(count_partial(tmp.path()), 0u);
}

INSTANTIATE_TEST_SUITE_P(Gzip, Hdf5FlushKill, ::testing::Values(0, 4));

// Where a writer dies during a flush (its test hook SIGKILLs it), and what recovery
// makes of its partial.
struct TornFlushCase {
  const char* label;
  uint64_t flush;        // 1: the first flush, 2: the second
  Hdf5FlushStage stage;  // killed when reaching this stage of that flush
  int64_t rows;          // rows recovered; -1: the partial is removed
  bool cut_back;
};

void PrintTo(const TornFlushCase& c, std::ostream* os) { *os << c.label; }

class Hdf5TornFlush : public ::testing::TestWithParam<TornFlushCase> {};

TEST_P(Hdf5TornFlush, RecoveryKeepsOnlyCompletedFlushes) {
  const TornFlushCase c = GetParam();
  TempDir tmp("h5torn");
  constexpr int64_t kFirst = 300;   // steps in the first flush
  constexpr int64_t kSecond = 500;  // more steps, and the stream "late", in the second
  const ChildRun run = run_child(1, [&](int) {
    Hdf5SinkOptions options = default_options();
    options.change_detection = false;
    options.flush_seconds = 0;  // flushes are called below
    auto sink = Hdf5Sink::open(tmp.path(), "rank0_pid1", options);
    if (!sink.is_ok()) ::_exit(2);
    uint64_t started = 0;
    (*sink)->set_flush_hook_for_testing([&](Hdf5FlushStage stage) {
      if (stage == Hdf5FlushStage::kMarkedFlushing) ++started;
      if (started == c.flush && stage == c.stage) ::kill(::getpid(), SIGKILL);
    });
    for (int64_t step = 0; step < kFirst; ++step) {
      if (!append_step(**sink, step)) ::_exit(3);
    }
    if (!(*sink)->flush().is_ok()) ::_exit(4);
    for (int64_t step = kFirst; step < kFirst + kSecond; ++step) {
      if (!append_step(**sink, step, "late")) ::_exit(5);
    }
    if (!(*sink)->flush().is_ok()) ::_exit(6);
    ::_exit(7);  // not killed: the hook failed
  });
  ASSERT_TRUE(run.killed_by_sigkill()) << "child status " << run.wstatus;
  ASSERT_EQ(count_partial(tmp.path()), 1u);

  ::testing::internal::CaptureStdout();  // spdlog's default logger
  ::testing::internal::CaptureStderr();
  auto r = recover_stale_partials(tmp.path());
  const std::string printed = ::testing::internal::GetCapturedStderr() + ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->problems.empty());
  EXPECT_EQ(count_partial(tmp.path()), 0u);
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("HDF5-DIAG")));
  if (c.rows < 0) {
    EXPECT_TRUE(r->recovered.empty());
    EXPECT_EQ(r->removed.size(), 1u);
    EXPECT_THAT(printed, HasSubstr("first flush"));
    return;
  }
  ASSERT_THAT(r->recovered, ElementsAre(tmp.path() + "/rank0_pid1.0.recovered.h5"));
  EXPECT_EQ(r->truncated, c.cut_back ? r->recovered : std::vector<std::string>{});
  const std::vector<ExtraStream> extras =
      c.rows > kFirst ? std::vector<ExtraStream>{{"late", kFirst}} : std::vector<ExtraStream>{};
  expect_flushed_rows(r->recovered[0], c.rows, extras);
  expect_flushed_rows_h5py(r->recovered[0], c.rows, extras);
}

INSTANTIATE_TEST_SUITE_P(Stages, Hdf5TornFlush,
                         ::testing::Values(
                             // The first flush never completed: nothing to keep.
                             TornFlushCase{"FirstMarked", 1, Hdf5FlushStage::kMarkedFlushing, -1, false},
                             TornFlushCase{"FirstWritten", 1, Hdf5FlushStage::kHdf5Flushed, -1, false},
                             // Marked "flushing", nothing written yet: the first flush as it is.
                             TornFlushCase{"SecondMarked", 2, Hdf5FlushStage::kMarkedFlushing, 300, false},
                             // HDF5 wrote the second flush, its markers did not say so: cut back to the first
                             // (the stream created since is deleted).
                             TornFlushCase{"SecondWritten", 2, Hdf5FlushStage::kHdf5Flushed, 300, true},
                             // The second flush completed.
                             TornFlushCase{"SecondDone", 2, Hdf5FlushStage::kMarkedFlushed, 800, false}),
                         [](const ::testing::TestParamInfo<TornFlushCase>& info) { return info.param.label; });

// After a flush, the last block of the file is a partly filled compressed chunk (of
// "devices": the stream's values are empty, so its index datasets are all it writes).
// Then 70000 more rows: that chunk is read back, filled, evicted from HDF5's chunk
// cache and written again, larger, elsewhere, with many more chunks: the flushed copy
// stays intact. (Freed space at the end of the file is where HDF5 would write next;
// the sink moves the end of allocated space past the file's end after each flush.
// Without that move this test failed while flushes kept the datasets open; with the
// datasets closed for each flush, HDF5's cache no longer evicts that chunk first.)
TEST(Hdf5Flush, AChunkRewrittenAtTheEndOfTheFileKeepsItsFlushedCopy) {
  TempDir tmp("h5flushend");
  constexpr int64_t kFlushed = 200;
  const ChildRun run = run_child(1, [&](int fd) {
    Hdf5SinkOptions options = default_options();
    options.change_detection = false;
    options.flush_seconds = 0;  // flushes are called below
    auto sink = Hdf5Sink::open(tmp.path(), "rank0_pid1", options);
    if (!sink.is_ok()) ::_exit(2);
    auto append = [&](int64_t step) {
      if (!(*sink)->append(make_record("e", DType::kFloat32, {0}, "", step)).is_ok()) ::_exit(3);
    };
    for (int64_t step = 0; step < kFlushed / 2; ++step) append(step);
    if (!(*sink)->flush().is_ok()) ::_exit(4);  // creates the chunk indexes
    for (int64_t step = kFlushed / 2; step < kFlushed; ++step) append(step);
    if (!(*sink)->flush().is_ok()) ::_exit(5);  // ends the file with a chunk of "devices"
    for (int64_t step = kFlushed; step < kFlushed + 70000; ++step) append(step);
    report(fd, static_cast<int64_t>((*sink)->flushes()));
    for (;;) ::pause();
  });
  ASSERT_EQ(run.reports, std::vector<int64_t>{2}) << "child status " << run.wstatus;
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(r->recovered.size(), 1u) << "removed " << r->removed.size();
  EXPECT_TRUE(r->truncated.empty());
  H5File f(r->recovered[0]);
  ASSERT_TRUE(f.ok());
  const auto steps = f.steps("/e");
  ASSERT_EQ(steps.size(), static_cast<size_t>(kFlushed));
  for (int64_t i = 0; i < kFlushed; ++i) EXPECT_EQ(steps[static_cast<size_t>(i)], i);
  EXPECT_EQ(f.devices("/e"), std::vector<std::string>(kFlushed, "cpu"));
}

// A flush whose chunks cannot be written (RLIMIT_FSIZE: the file may not grow) gives
// the file up under its partial name, and HDF5 writes nothing more to it (its close
// would write metadata naming the lost chunks): recovery finds its last completed flush.
TEST(Hdf5Flush, AFlushThatCannotWriteGivesTheFileUpAndRecoveryKeepsTheLastFlush) {
  TempDir tmp("h5flushfull");
  constexpr int64_t kFlushed = 300;
  const ChildRun run = run_child(1, [&](int fd) {
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
    Hdf5SinkOptions options = default_options();
    options.change_detection = false;
    options.flush_seconds = 0;  // flushes are called below
    auto sink = Hdf5Sink::open(tmp.path(), "rank0_pid1", options);
    if (!sink.is_ok()) ::_exit(2);
    for (int64_t step = 0; step < kFlushed; ++step) {
      if (!append_step(**sink, step)) ::_exit(3);
    }
    if (!(*sink)->flush().is_ok()) ::_exit(4);
    struct stat st {};
    if (::stat((*sink)->partial_path(0).c_str(), &st) != 0) ::_exit(5);
    const rlimit limit{static_cast<rlim_t>(st.st_size), static_cast<rlim_t>(st.st_size)};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(6);
    // Rows that stay in HDF5's chunk caches until the flush (fewer than evict a chunk).
    for (int64_t step = kFlushed; step < kFlushed + 20; ++step) {
      if (!append_step(**sink, step)) ::_exit(7);
    }
    const Status s = (*sink)->flush();
    if (s.is_ok() || s.message().find("given up") == std::string::npos) ::_exit(8);
    if ((*sink)->flushes() != 1 || !(*sink)->finalize().is_ok()) ::_exit(9);  // nothing open
    report(fd, 1);
    ::_exit(0);
  });
  ASSERT_EQ(run.reports, std::vector<int64_t>{1}) << "child status " << run.wstatus;
  ASSERT_EQ(count_partial(tmp.path()), 1u);
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_THAT(r->recovered, ElementsAre(tmp.path() + "/rank0_pid1.0.recovered.h5"));
  EXPECT_TRUE(r->truncated.empty());  // nothing of the failed flush reached the metadata
  expect_flushed_rows(r->recovered[0], kFlushed);
}

TEST(Hdf5Flush, IntervalZeroFlushesOnlyBeforeClosingAndAppendsNeverFlush) {
  TempDir tmp("h5flushzero");
  Hdf5SinkOptions zero_options = default_options();
  zero_options.flush_seconds = 0;
  Hdf5SinkOptions one_options = default_options();
  one_options.flush_seconds = 1;
  auto zero = open_sink(tmp.path(), zero_options, "zero");         // polled, never flushed
  auto unpolled = open_sink(tmp.path(), one_options, "unpolled");  // appended, not polled
  auto timer = open_sink(tmp.path(), one_options, "timer");        // polled: tells a second passed
  ASSERT_TRUE(zero && unpolled && timer);
  ASSERT_OK(zero->flush());  // no file: nothing to do
  EXPECT_EQ(zero->flushes(), 0u);
  ASSERT_TRUE(append_step(*zero, 0) && append_step(*unpolled, 0) && append_step(*timer, 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int64_t step = 1;
  while (timer->flushes() == 0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_OK(zero->poll());
    ASSERT_OK(timer->poll());
    ASSERT_TRUE(append_step(*zero, step) && append_step(*unpolled, step));
    ++step;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(timer->flushes(), 1u);
  EXPECT_EQ(zero->flushes(), 0u);
  EXPECT_EQ(unpolled->flushes(), 0u);
  // The timer's rows are all flushed: polling again does not flush.
  ASSERT_OK(timer->poll());
  ASSERT_OK(timer->flush());
  EXPECT_EQ(timer->flushes(), 1u);
  ASSERT_OK(unpolled->poll());
  EXPECT_EQ(unpolled->flushes(), 1u);
  // Finalizing flushes before closing, when rows were added since the last flush.
  for (Hdf5Sink* sink : {zero.get(), unpolled.get(), timer.get()}) {
    const uint64_t before = sink->flushes();
    ASSERT_OK(sink->finalize());
    EXPECT_EQ(sink->flushes(), before + (sink == zero.get() ? 1 : 0));
  }
  expect_flushed_rows(tmp.path() + "/zero.0.h5", step);
  expect_flushed_rows(tmp.path() + "/unpolled.0.h5", step);
  expect_flushed_rows(tmp.path() + "/timer.0.h5", 1);
  Hdf5SinkOptions negative = default_options();
  negative.flush_seconds = -1;
  EXPECT_THAT(Hdf5Sink::open(tmp.path(), "v", negative).message(), HasSubstr("flush_seconds"));
}

TEST(Hdf5Flush, IntervalZeroLosesTheFileOfAKilledWriterAsBefore) {
  TempDir tmp("h5flushzerokill");
  const ChildRun run = run_child(1, [&](int fd) {
    Hdf5SinkOptions options = default_options();
    options.flush_seconds = 0;
    options.change_detection = false;
    auto sink = Hdf5Sink::open(tmp.path(), "rank0_pid1", options);
    if (!sink.is_ok()) ::_exit(2);
    for (int64_t step = 0; step < 300; ++step) {
      if (!append_step(**sink, step) || !(*sink)->poll().is_ok()) ::_exit(3);
    }
    report(fd, static_cast<int64_t>((*sink)->flushes()));
    for (;;) ::pause();
  });
  ASSERT_EQ(run.reports, std::vector<int64_t>{0});
  ASSERT_TRUE(run.killed_by_sigkill()) << run.wstatus;
  ASSERT_EQ(count_partial(tmp.path()), 1u);
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->recovered.empty());
  EXPECT_THAT(r->removed, ElementsAre(tmp.path() + "/.rank0_pid1.0.h5.partial"));
}

// A partial whose markers say "flushed", as make_readable_partial() leaves it.
TEST(Hdf5Recovery, APartialChangedAfterItsLastFlushIsCutBackToIt) {
  TempDir tmp("h5reccut");
  const std::string partial = make_readable_partial(tmp.path(), "changed", 5);
  ASSERT_FALSE(partial.empty());
  {  // Two more rows of "a" and a group "b", written after the last flush.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const hid_t f = H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    for (const char* name : {"/a/values", "/a/steps", "/a/ranks", "/a/devices"}) {
      const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
      const hid_t space = H5Dget_space(d);
      std::vector<hsize_t> dims(static_cast<size_t>(H5Sget_simple_extent_ndims(space)));
      H5Sget_simple_extent_dims(space, dims.data(), nullptr);
      H5Sclose(space);
      dims[0] += 2;
      ASSERT_GE(H5Dset_extent(d, dims.data()), 0) << name;
      H5Dclose(d);
    }
    const hid_t g = H5Gcreate2(f, "b", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(g, 0);
    H5Gclose(g);
    ASSERT_GE(H5Fclose(f), 0);
  }
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_THAT(r->recovered, ElementsAre(tmp.path() + "/changed.0.recovered.h5"));
  EXPECT_EQ(r->truncated, r->recovered);
  H5File f(r->recovered[0]);
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.groups(), ElementsAre("a"));
  EXPECT_THAT(f.steps("/a"), ElementsAre(0, 1, 2, 3, 4));
  const std::vector<int32_t> values = f.read<int32_t>("/a/values", H5T_NATIVE_INT32);
  EXPECT_THAT(values, ElementsAre(0, 1, 2, 3, 4));
}

TEST(Hdf5Recovery, PartialsWithoutACompletedFlushOrWithDamagedMarkersAreRemoved) {
  TempDir tmp("h5recmarks");
  const std::string dir = tmp.path();
  // A writer that never flushed: a copy of its partial is left behind.
  Hdf5SinkOptions options = default_options();
  options.flush_seconds = 0;
  auto sink = open_sink(dir + "/live", options);
  ASSERT_NE(sink, nullptr);
  ASSERT_TRUE(append_step(*sink, 0));
  std::filesystem::copy_file(sink->partial_path(0), dir + "/.unflushed.0.h5.partial");
  // A readable partial whose header, or record, was damaged.
  const std::string header = make_readable_partial(dir, "header", 3);
  const std::string record = make_readable_partial(dir, "record", 3);
  ASSERT_FALSE(header.empty() || record.empty());
  for (const auto& [path, offset] : {std::pair{header, 20}, std::pair{record, 512 + 30}}) {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(offset);
    const char c = static_cast<char>(io.get() ^ 0x40);
    io.seekp(offset);
    io.put(c);
  }
  ::testing::internal::CaptureStdout();  // spdlog's default logger
  ::testing::internal::CaptureStderr();
  auto r = recover_stale_partials(dir);
  const std::string printed = ::testing::internal::GetCapturedStderr() + ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->recovered.empty());
  std::vector<std::string> removed = r->removed;
  std::sort(removed.begin(), removed.end());
  EXPECT_THAT(
      removed,
      ElementsAre(dir + "/.header.0.h5.partial", dir + "/.record.0.h5.partial", dir + "/.unflushed.0.h5.partial"));
  EXPECT_THAT(printed, HasSubstr("before its first flush"));
  EXPECT_THAT(printed, HasSubstr("flush marker is damaged"));
  EXPECT_THAT(printed, HasSubstr("record of its last flush is damaged"));
  ASSERT_OK(sink->finalize());
}

// Kills at random moments of a writer that flushes every 7 steps (gzip 0 and 4): half
// of the rounds anywhere (1 to 30 ms after its first flush), half while it flushes (0
// to 0.4 ms after it marked its k-th flush "flushing", k = 2..6). A recovered partial
// holds the rows of a completed flush, at least those of the last flush reported
// complete before the kill, every value as appended. A partial may be removed only
// when the kill hit the few hundred microseconds in which HDF5 writes a flush's
// metadata and left an index that cannot be read back (the previous flush's metadata
// is overwritten in place); that is rare (about 1 in 300 rounds aimed at flushes, see
// hdf5_sink.h), so a handful of removals fails the test. TS_HDF5_KILL_ROUNDS sets the
// number of rounds (default 16).
TEST(Hdf5Flush, RandomKillsNeverRecoverWrongRows) {
  const char* env = std::getenv("TS_HDF5_KILL_ROUNDS");
  const int rounds = env != nullptr ? std::max(1, std::atoi(env)) : 16;
  std::mt19937 random(20240611);
  int cut_back = 0;
  int removed = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(round);
    TempDir tmp("h5randkill");
    const bool in_flush = round % 2 == 1;
    const int gzip = round / 2 % 2 == 0 ? 4 : 0;
    const int64_t kill_flush = std::uniform_int_distribution<int>(2, 6)(random);
    const auto delay = std::chrono::microseconds(in_flush ? std::uniform_int_distribution<int>(0, 400)(random)
                                                          : std::uniform_int_distribution<int>(1000, 30000)(random));
    // Reports: the rows of each completed flush; -k when flush k is marked "flushing".
    const ChildRun run = run_child(
        in_flush ? static_cast<size_t>(kill_flush) : 1,
        [&](int fd) {
          Hdf5SinkOptions options = default_options();
          options.change_detection = false;
          options.gzip_level = gzip;
          options.flush_seconds = 0;  // flushes are called below
          auto sink = Hdf5Sink::open(tmp.path(), "rank0_pid1", options);
          if (!sink.is_ok()) ::_exit(2);
          int64_t started = 0;
          (*sink)->set_flush_hook_for_testing([&](Hdf5FlushStage stage) {
            if (stage != Hdf5FlushStage::kMarkedFlushing) return;
            if (++started == kill_flush && in_flush) report(fd, -started);
          });
          for (int64_t step = 0;; ++step) {
            if (!append_step(**sink, step)) ::_exit(3);
            if (step % 7 == 6) {
              if (!(*sink)->flush().is_ok()) ::_exit(4);
              report(fd, step + 1);
            }
          }
        },
        delay);
    ASSERT_TRUE(run.killed_by_sigkill()) << "child status " << run.wstatus;
    ASSERT_FALSE(run.reports.empty());
    const int64_t reported = *std::max_element(run.reports.begin(), run.reports.end());
    ASSERT_GT(reported, 0);
    auto r = recover_stale_partials(tmp.path());
    ASSERT_TRUE(r.is_ok()) << r.message();
    ASSERT_TRUE(r->problems.empty());
    ASSERT_EQ(r->recovered.size() + r->removed.size(), 1u);
    removed += static_cast<int>(r->removed.size());
    if (r->recovered.empty()) continue;
    cut_back += static_cast<int>(r->truncated.size());
    H5File f(r->recovered[0]);
    ASSERT_TRUE(f.ok());
    const auto rows = static_cast<int64_t>(f.steps("/small").size());
    EXPECT_GE(rows, reported);
    EXPECT_EQ(rows % 7, 0);
    expect_flushed_rows(r->recovered[0], rows);
  }
  std::printf(
      "[          ] %d rounds: %d recovered (%d cut back to their previous flush), "
      "%d removed\n",
      rounds, rounds - removed, cut_back, removed);
  EXPECT_LE(removed, std::max(1, rounds / 20));
}

}  // namespace
}  // namespace tensorscope::recording
