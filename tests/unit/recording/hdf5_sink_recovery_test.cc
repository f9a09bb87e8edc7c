// hdf5_sink_recovery_test.cc — Hdf5Sink killed before finalize, the writer lock and
// recover_stale_partials(): live writers in this and other processes, readable, garbage
// and foreign files, two cleaners at once, a cleaner racing a writer.
#include "hdf5_sink_test_support.h"

namespace tensorscope::recording {
namespace {

using namespace sink_testing;  // NOLINT: the shared helpers of the Hdf5Sink tests

// ---- a writer killed before finalize ----

TEST(Hdf5Sink, KilledWriterLeavesOnlyCompleteFilesUnderFinalNames) {
  TempDir tmp("h5kill");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    Hdf5SinkOptions options = default_options();
    options.rotate_bytes = 8 << 10;
    auto sink = Hdf5Sink::open(tmp.path(), "killed", options);
    if (!sink.is_ok()) ::_exit(2);
    bool told = false;
    for (int64_t step = 0;; ++step) {
      const std::string bytes = make_bytes(DType::kFloat32, 256, static_cast<int>(step));
      for (const char* stream : {"a", "b/c"}) {
        if (!(*sink)->append(make_record(stream, DType::kFloat32, {16, 16}, bytes, step)).is_ok()) {
          ::_exit(3);
        }
      }
      if (!told && (*sink)->finished_files().size() >= 3) {
        told = ::write(fds[1], "r", 1) == 1;
      }
    }
  }
  ::close(fds[1]);
  pollfd p{fds[0], POLLIN, 0};
  const int ready = ::poll(&p, 1, 30000);
  char c = 0;
  const bool got = ready == 1 && ::read(fds[0], &c, 1) == 1;
  ::close(fds[0]);
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(got) << "the writer did not finish 3 files in time (status " << wstatus << ")";
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);

  const auto finals = final_files(tmp.path());
  ASSERT_GE(finals.size(), 3u);
  std::set<int64_t> steps_seen;
  for (const auto& name : finals) {
    SCOPED_TRACE(name);
    H5File f(tmp.path() + "/" + name);
    ASSERT_TRUE(f.ok());
    EXPECT_THAT(f.groups(), ElementsAre("a", "b%2Fc"));
    for (const char* g : {"/a", "/b%2Fc"}) {
      const auto steps = f.steps(g);
      ASSERT_FALSE(steps.empty());
      EXPECT_EQ(f.raw(std::string(g) + "/values").size(), steps.size() * 1024);
      EXPECT_EQ(f.ranks(g).size(), steps.size());
      EXPECT_EQ(f.devices(g).size(), steps.size());
      const std::string values = f.raw(std::string(g) + "/values");
      for (size_t r = 0; r < steps.size(); ++r) {
        EXPECT_EQ(values.substr(r * 1024, 1024), make_bytes(DType::kFloat32, 256, static_cast<int>(steps[r])));
        if (g[1] == 'a') steps_seen.insert(steps[r]);
      }
    }
  }
  // The finished files hold steps 0.. without holes.
  ASSERT_FALSE(steps_seen.empty());
  EXPECT_EQ(*steps_seen.begin(), 0);
  EXPECT_EQ(static_cast<size_t>(*steps_seen.rbegin() + 1), steps_seen.size());
  // Whatever was being written is under a hidden temporary name, never a final one.
  for (const auto& name : list_dir(tmp.path())) {
    EXPECT_TRUE(ends_with(name, ".h5") || (name[0] == '.' && ends_with(name, ".h5.partial"))) << name;
  }
  EXPECT_LE(count_partial(tmp.path()), 1u);
  // A new writer in the same directory never overwrites those files.
  auto sink = open_sink(tmp.path(), default_options(), "killed");
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kInt8, {1}, "\x07", 0)));
  ASSERT_OK(sink->finalize());
  EXPECT_EQ(final_files(tmp.path()).size(), finals.size() + 1);
  // The killed writer's partial is not locked any more: recovered when it reads whole
  // (with aligned datasets), removed otherwise; either way no partial is left.
  const size_t partials = count_partial(tmp.path());
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->recovered.size() + r->removed.size(), partials);
  EXPECT_EQ(r->in_use, 0u);
  EXPECT_TRUE(r->problems.empty());
  EXPECT_EQ(count_partial(tmp.path()), 0u);
  for (const auto& path : r->recovered) {
    H5File f(path);
    ASSERT_TRUE(f.ok()) << path;
    for (const auto& g : f.groups()) {
      const auto steps = f.steps("/" + g);
      EXPECT_EQ(f.raw("/" + g + "/values").size(), steps.size() * 1024) << path;
    }
  }
}

// ---- the writer lock and partial files of dead writers ----

TEST(Hdf5Sink, WriterHoldsAnOfdLockOnItsPartialBesidesHdf5sOwnFlock) {
  TempDir tmp("h5lock");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kOne, 0)));
  const std::string partial = sink->partial_path(0);
  ASSERT_TRUE(exists(partial));
  // Another open file description, in this process and in another one, cannot lock it.
  EXPECT_EQ(lock_errno(partial), EAGAIN);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(lock_errno(partial) == EAGAIN ? 0 : 1);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  // HDF5 still holds its own flock (unless turned off by the environment): the two
  // kinds of lock coexist on the file.
  if (std::getenv("HDF5_USE_FILE_LOCKING") == nullptr) {
    const int fd = ::open(partial.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    EXPECT_NE(::flock(fd, LOCK_SH | LOCK_NB), 0);
    ::close(fd);
  }
  // Appending and rotating with both locks held works; afterwards the lock is gone.
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kTwo, 1)));
  ASSERT_OK(sink->finalize());
  EXPECT_FALSE(exists(partial));
  EXPECT_EQ(lock_errno(sink->finished_files().at(0)), 0);
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.steps("/a"), ElementsAre(0, 1));
}

TEST(Hdf5Recovery, LeavesThePartialOfALiveWriterInThisProcessAlone) {
  TempDir tmp("h5reclive");
  auto sink = open_sink(tmp.path(), default_options(), "live");
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kOne, 0)));
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->in_use, 1u);
  EXPECT_TRUE(r->recovered.empty());
  EXPECT_TRUE(r->removed.empty());
  EXPECT_TRUE(r->problems.empty());
  EXPECT_TRUE(exists(sink->partial_path(0)));
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kTwo, 1)));
  ASSERT_OK(sink->finalize());
  H5File f(tmp.path() + "/live.0.h5");
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.steps("/a"), ElementsAre(0, 1));
}

TEST(Hdf5Recovery, LeavesAPartialLockedByAnotherProcessAloneUntilItDies) {
  TempDir tmp("h5recother");
  const std::string partial = make_readable_partial(tmp.path(), "held", 3);
  ASSERT_FALSE(partial.empty());
  int ready[2];
  int go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::close(go[1]);
    const int fd = ::open(partial.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 || try_ofd_lock(fd) != 0) ::_exit(2);
    if (::write(ready[1], "r", 1) != 1) ::_exit(3);
    char c = 0;
    (void)!::read(go[0], &c, 1);  // until the parent closes its end
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(go[0]);
  pollfd p{ready[0], POLLIN, 0};
  char c = 0;
  const bool locked = ::poll(&p, 1, 30000) == 1 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  if (locked) {
    auto r = recover_stale_partials(tmp.path());
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->in_use, 1u);
    EXPECT_TRUE(r->recovered.empty());
    EXPECT_TRUE(r->removed.empty());
    EXPECT_TRUE(exists(partial));
  }
  ::close(go[1]);  // the "writer" exits: its lock goes with it
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(locked) << "the child did not lock the file (status " << wstatus << ")";
  auto r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->in_use, 0u);
  EXPECT_THAT(r->recovered, ElementsAre(tmp.path() + "/held.0.recovered.h5"));
  EXPECT_FALSE(exists(partial));
}

TEST(Hdf5Recovery, RenamesReadablePartialsWithoutEverOverwriting) {
  TempDir tmp("h5recok");
  const std::string partial = make_readable_partial(tmp.path(), "r", 5);
  ASSERT_FALSE(partial.empty());
  const std::string original = read_file(partial);
  auto r = recover_stale_partials(tmp.path() + "/");
  ASSERT_TRUE(r.is_ok()) << r.message();
  const std::string recovered = tmp.path() + "/r.0.recovered.h5";
  EXPECT_THAT(r->recovered, ElementsAre(recovered));
  EXPECT_TRUE(r->removed.empty());
  EXPECT_TRUE(r->problems.empty());
  EXPECT_FALSE(exists(partial));
  EXPECT_EQ(read_file(recovered), original);
  {
    H5File f(recovered);
    ASSERT_TRUE(f.ok());
    EXPECT_THAT(f.steps("/a"), ElementsAre(0, 1, 2, 3, 4));
    EXPECT_EQ(f.string_attribute("/a", "stream"), "a");
  }
  // The same name again: the recovered file is kept, the new one gets ".1".
  ASSERT_FALSE(make_readable_partial(tmp.path(), "r", 2).empty());
  r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_THAT(r->recovered, ElementsAre(tmp.path() + "/r.0.recovered.1.h5"));
  EXPECT_EQ(read_file(recovered), original);
  // A new writer of the same base does not reuse number 0.
  auto sink = open_sink(tmp.path(), default_options(), "r");
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kOne, 0)));
  ASSERT_OK(sink->finalize());
  EXPECT_THAT(sink->finished_files(), ElementsAre(tmp.path() + "/r.1.h5"));
  // Nothing to do: nothing done; a missing directory is not an error.
  r = recover_stale_partials(tmp.path());
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->recovered.empty() && r->removed.empty() && r->problems.empty());
  r = recover_stale_partials(tmp.path() + "/missing");
  ASSERT_TRUE(r.is_ok()) << r.message();
}

TEST(Hdf5Recovery, RemovesUnreadablePartialsAndLeavesOtherNamesAlone) {
  TempDir tmp("h5recbad");
  const std::string dir = tmp.path();
  write_file(dir + "/.garbage.0.h5.partial", std::string(5000, 'x'));
  write_file(dir + "/.empty.0.h5.partial", "");
  {  // HDF5, but not a tensorscope recording
    const hid_t f = H5Fcreate((dir + "/.foreign.0.h5.partial").c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5Fclose(f);
  }
  {  // Layout and extents as the sink writes them, but the rows' data never written.
    const hid_t f = H5Fcreate((dir + "/.holes.0.h5.partial").c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(f, "format", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const char* format = "tensorscope-hdf5";
    ASSERT_GE(H5Awrite(attr, str, &format), 0);
    H5Aclose(attr);
    const hid_t g = H5Gcreate2(f, "a", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t device = H5Tcopy(H5T_C_S1);
    H5Tset_size(device, wire::kDeviceBytes);
    for (const auto& [name, type] : std::vector<std::pair<const char*, hid_t>>{
             {"values", H5T_STD_I32LE}, {"steps", H5T_STD_I64LE}, {"ranks", H5T_STD_I32LE}, {"devices", device}}) {
      const hsize_t rows = 10;
      const hsize_t chunk = 4;
      const hid_t space = H5Screate_simple(1, &rows, nullptr);
      const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
      H5Pset_chunk(dcpl, 1, &chunk);
      const hid_t d = H5Dcreate2(g, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
      ASSERT_GE(d, 0);
      H5Dclose(d);
      H5Pclose(dcpl);
      H5Sclose(space);
    }
    H5Tclose(device);
    H5Gclose(g);
    H5Sclose(scalar);
    H5Tclose(str);
    H5Fclose(f);
  }
  // A recording cut short (as a writer killed while HDF5 wrote would leave it).
  const std::string whole = make_readable_partial(dir, "cut", 2000);
  ASSERT_FALSE(whole.empty());
  const std::string bytes = read_file(whole);
  ASSERT_GT(bytes.size(), 4096u);
  write_file(whole, bytes.substr(0, bytes.size() / 2));
  // Not partial files of the sink: never touched.
  const std::vector<std::string> others = {"notes.partial", ".x.npy.partial", "y.h5", "z.h5.partial", ".h5.partial"};
  for (const auto& name : others) write_file(dir + "/" + name, "keep");
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/.dir.0.h5.partial"));

  ::testing::internal::CaptureStderr();
  auto r = recover_stale_partials(dir);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_TRUE(r->recovered.empty());
  std::vector<std::string> removed = r->removed;
  std::sort(removed.begin(), removed.end());
  EXPECT_THAT(removed,
              ElementsAre(dir + "/.cut.0.h5.partial", dir + "/.empty.0.h5.partial", dir + "/.foreign.0.h5.partial",
                          dir + "/.garbage.0.h5.partial", dir + "/.holes.0.h5.partial"));
  ASSERT_EQ(r->problems.size(), 1u);
  EXPECT_THAT(r->problems[0], HasSubstr(".dir.0.h5.partial"));
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("HDF5-DIAG")));  // no HDF5 error stacks
  std::vector<std::string> expected = others;
  expected.push_back(".dir.0.h5.partial");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(list_dir(dir), expected);
}

TEST(Hdf5Recovery, TwoCleanersAtOnceHandleEveryPartialOnce) {
  TempDir tmp("h5rectwo");
  const std::string dir = tmp.path();
  constexpr int kEach = 10;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::map<std::string, std::string> originals;  // recovered name -> bytes
    for (int i = 0; i < kEach; ++i) {
      const std::string base = "w" + std::to_string(round) + "_" + std::to_string(i);
      const std::string partial = make_readable_partial(dir, base, 3 + i);
      ASSERT_FALSE(partial.empty());
      originals[dir + "/" + base + ".0.recovered.h5"] = read_file(partial);
      write_file(dir + "/.g" + std::to_string(round) + "_" + std::to_string(i) + ".0.h5.partial",
                 std::string(100 + i, 'g'));
    }
    StatusOr<Hdf5PartialRecovery> results[2] = {Status::error("not run"), Status::error("not run")};
    std::thread other([&] { results[1] = recover_stale_partials(dir); });
    results[0] = recover_stale_partials(dir);
    other.join();
    std::vector<std::string> recovered;
    size_t removed = 0;
    for (const auto& r : results) {
      ASSERT_TRUE(r.is_ok()) << r.message();
      EXPECT_TRUE(r->problems.empty()) << r->problems.front();
      recovered.insert(recovered.end(), r->recovered.begin(), r->recovered.end());
      removed += r->removed.size();
    }
    std::sort(recovered.begin(), recovered.end());
    std::vector<std::string> expected;
    for (const auto& [name, bytes] : originals) expected.push_back(name);
    EXPECT_EQ(recovered, expected);  // each once, under its first name
    EXPECT_EQ(removed, static_cast<size_t>(kEach));
    EXPECT_EQ(count_partial(dir), 0u);
    for (const auto& [name, bytes] : originals) EXPECT_EQ(read_file(name), bytes) << name;
  }
}

TEST(Hdf5Recovery, ACleanerRacingAWriterNeverTakesItsFiles) {
  TempDir tmp("h5recrace");
  constexpr int kSteps = 400;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Hdf5SinkOptions options = default_options();
    options.rotate_bytes = 4 << 10;  // a new partial file every 4 records
    options.change_detection = false;
    auto sink = Hdf5Sink::open(tmp.path(), "race", options);
    if (!sink.is_ok()) ::_exit(2);
    for (int step = 0; step < kSteps; ++step) {
      const std::string bytes = make_bytes(DType::kFloat32, 256, step);
      if (!(*sink)->append(make_record("a", DType::kFloat32, {256}, bytes, step)).is_ok()) {
        ::_exit(3);
      }
    }
    ::_exit((*sink)->finalize().is_ok() ? 0 : 4);
  }
  size_t recovered = 0;
  size_t runs = 0;
  int wstatus = 0;
  for (;;) {
    auto r = recover_stale_partials(tmp.path());
    ++runs;
    ASSERT_TRUE(r.is_ok()) << r.message();
    recovered += r->recovered.size();
    const pid_t done = ::waitpid(child, &wstatus, WNOHANG);
    ASSERT_GE(done, 0);
    if (done == child) break;
  }
  // Only an empty file created a moment before its lock can be taken (and removed; the
  // writer then takes the next number): a live writer's data never is.
  EXPECT_EQ(recovered, 0u);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "writer status " << wstatus;
  EXPECT_EQ(count_partial(tmp.path()), 0u);
  std::vector<int64_t> steps;
  for (const auto& name : final_files(tmp.path())) {
    H5File f(tmp.path() + "/" + name);
    ASSERT_TRUE(f.ok()) << name;
    const auto s = f.steps("/a");
    steps.insert(steps.end(), s.begin(), s.end());
  }
  std::sort(steps.begin(), steps.end());
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps)) << runs << " cleaner runs";
  for (int i = 0; i < kSteps; ++i) EXPECT_EQ(steps[static_cast<size_t>(i)], i);
}

}  // namespace
}  // namespace tensorscope::recording
