// hdf5_sink_test.cc — Hdf5Sink: byte-exact round trips of every dtype read back with the
// HDF5 C API, change detection and its memory cap (also through RecordSinks' counters:
// tests/unit/daemon/record_sinks_test.cc), rotation by bytes and by time, dtype
// conversion, shape changes, bad records and HDF5 errors as Status. The writer killed
// before finalize and recovery: hdf5_sink_recovery_test.cc; periodic flushes:
// hdf5_sink_flush_test.cc; h5py reading the files: hdf5_sink_h5py_test.cc.
#include "hdf5_sink_test_support.h"

namespace tensorscope::recording {
namespace {

using namespace sink_testing;  // NOLINT: the shared helpers of the Hdf5Sink tests

// ---- round trips ----

class Hdf5RoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(Hdf5RoundTrip, EveryDTypeByteExact) {
  TempDir tmp("h5rt");
  Hdf5SinkOptions options = default_options();
  options.gzip_level = GetParam();
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  std::map<DType, std::vector<std::string>> written;
  for (const DType dtype : kAllDTypes) {
    const std::string stream = std::string("s.") + wire::dtype_name(dtype);
    for (int i = 0; i < 3; ++i) {
      written[dtype].push_back(make_bytes(dtype, 6, i));
      const Status s = sink->append(
          make_record(stream, dtype, {2, 3}, written[dtype].back(), 10 * i + 1, i, "cuda" + std::to_string(i)));
      ASSERT_TRUE(s.is_ok()) << s.message();
    }
  }
  EXPECT_EQ(sink->appended(), 3 * kAllDTypes.size());
  EXPECT_EQ(sink->skipped_unchanged(), 0u);
  ASSERT_OK(sink->finalize());
  ASSERT_EQ(sink->finished_files().size(), 1u);
  const std::string path = sink->finished_files()[0];
  EXPECT_EQ(path, tmp.path() + "/values.0.h5");
  EXPECT_THAT(list_dir(tmp.path()), ElementsAre("values.0.h5"));

  H5File f(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.string_attribute("/", "format"), "tensorscope-hdf5");
  for (const DType dtype : kAllDTypes) {
    SCOPED_TRACE(wire::dtype_name(dtype));
    const std::string g = std::string("/s.") + wire::dtype_name(dtype);
    ASSERT_TRUE(f.has(g));
    EXPECT_EQ(f.string_attribute(g, "stream"), g.substr(1));
    EXPECT_EQ(f.string_attribute(g, "kind"), "activation");
    EXPECT_EQ(f.string_attribute(g, "dtype"), wire::dtype_name(dtype));
    EXPECT_THAT(f.shape_attribute(g), ElementsAre(2, 3));
    EXPECT_THAT(f.dims(g + "/values"), ElementsAre(3u, 2u, 3u));
    const std::string expected = written[dtype][0] + written[dtype][1] + written[dtype][2];
    EXPECT_EQ(f.raw(g + "/values"), expected);
    EXPECT_EQ(f.type_of(g + "/values").second, wire::dtype_size(dtype));
    EXPECT_THAT(f.steps(g), ElementsAre(1, 11, 21));
    EXPECT_THAT(f.ranks(g), ElementsAre(0, 1, 2));
    EXPECT_THAT(f.devices(g), ElementsAre("cuda0", "cuda1", "cuda2"));
    EXPECT_EQ(f.type_of(g + "/devices"), std::make_pair(H5T_STRING, wire::kDeviceBytes));
  }
  EXPECT_EQ(f.type_of("/s.float16/values").first, H5T_FLOAT);
  EXPECT_EQ(f.type_of("/s.bool/values").first, H5T_ENUM);
  EXPECT_EQ(f.type_of("/s.bfloat16/values").first, H5T_INTEGER);
  EXPECT_EQ(f.string_attribute("/s.bfloat16/values", "encoding"), "bfloat16-bits");
}

INSTANTIATE_TEST_SUITE_P(Gzip, Hdf5RoundTrip, ::testing::Values(0, 4, 9));

TEST(Hdf5Sink, ScalarsAndEmptyTensors) {
  TempDir tmp("h5scalar");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  for (int i = 0; i < 5; ++i) {
    const std::string loss = make_bytes(DType::kFloat32, 1, i);
    ASSERT_OK(sink->append(make_record("loss", DType::kFloat32, {}, loss, i)));
    ASSERT_OK(sink->append(make_record("empty", DType::kInt32, {3, 0}, "", i)));
  }
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.dims("/loss/values"), ElementsAre(5u));
  EXPECT_TRUE(f.shape_attribute("/loss").empty());
  std::string all;
  for (int i = 0; i < 5; ++i) all += make_bytes(DType::kFloat32, 1, i);
  EXPECT_EQ(f.raw("/loss/values"), all);
  // An empty tensor never changes: change detection keeps the first one only.
  EXPECT_THAT(f.dims("/empty/values"), ElementsAre(1u, 3u, 0u));
  EXPECT_THAT(f.steps("/empty"), ElementsAre(0));
  EXPECT_EQ(sink->skipped_unchanged(), 4u);

  Hdf5SinkOptions keep_all = default_options();
  keep_all.change_detection = false;
  auto every = open_sink(tmp.path(), keep_all, "every");
  ASSERT_NE(every, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(every->append(make_record("empty", DType::kInt32, {0}, "", i)));
  }
  ASSERT_OK(every->finalize());
  H5File g(every->finished_files().at(0));
  ASSERT_TRUE(g.ok());
  EXPECT_THAT(g.dims("/empty/values"), ElementsAre(5u, 0u));
  EXPECT_THAT(g.steps("/empty"), ElementsAre(0, 1, 2, 3, 4));
}

TEST(Hdf5Sink, LargeTensorIsSplitIntoChunks) {
  TempDir tmp("h5large");
  Hdf5SinkOptions options = default_options();
  options.gzip_level = 1;
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  // 24 MiB per tensor: more than one chunk's limit.
  std::string bytes(size_t{24} << 20, '\0');
  for (size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<char>(i / 4096);
  ASSERT_OK(sink->append(make_record("big", DType::kFloat32, {3, 1024, 2048}, bytes, 0)));
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.dims("/big/values"), ElementsAre(1u, 3u, 1024u, 2048u));
  EXPECT_TRUE(f.raw("/big/values") == bytes);
}

// ---- change detection ----

TEST(Hdf5Sink, ChangeDetectionSkipsExactlyTheRepeatedValues) {
  TempDir tmp("h5change");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  std::string expected;
  for (int step = 0; step < 10; ++step) {
    // Steps 3 and 4 repeat the value of step 2.
    const int seed = (step == 3 || step == 4) ? 2 : step;
    const std::string bytes = make_bytes(DType::kFloat32, 16, seed);
    if (step != 3 && step != 4) expected += bytes;
    ASSERT_OK(sink->append(make_record("w", DType::kFloat32, {16}, bytes, step)));
  }
  EXPECT_EQ(sink->appended(), 8u);
  EXPECT_EQ(sink->skipped_unchanged(), 2u);
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.steps("/w"), ElementsAre(0, 1, 2, 5, 6, 7, 8, 9));
  EXPECT_EQ(f.raw("/w/values"), expected);
}

TEST(Hdf5Sink, ChangeDetectionIsPerStreamDeviceAndRankAndComparesShapeAndDType) {
  TempDir tmp("h5change2");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  const std::string v = make_bytes(DType::kInt32, 4, 1);
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {4}, v, 0, 0, "cpu")));
  ASSERT_OK(sink->append(make_record("b", DType::kInt32, {4}, v, 0, 0, "cpu")));
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {4}, v, 0, 1, "cpu")));
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {4}, v, 0, 0, "cuda0")));
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {2, 2}, v, 1, 0, "cpu")));
  ASSERT_OK(sink->append(make_record("a", DType::kFloat32, {2, 2}, v, 2, 0, "cpu")));
  EXPECT_EQ(sink->appended(), 6u);
  EXPECT_EQ(sink->skipped_unchanged(), 0u);
  ASSERT_OK(sink->append(make_record("a", DType::kFloat32, {2, 2}, v, 3, 0, "cpu")));
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {4}, v, 3, 1, "cpu")));
  EXPECT_EQ(sink->skipped_unchanged(), 2u);
}

TEST(Hdf5Sink, ChangeDetectionOffStoresEverything) {
  TempDir tmp("h5nochange");
  Hdf5SinkOptions options = default_options();
  options.change_detection = false;
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  const std::string v = make_bytes(DType::kInt8, 4, 1);
  for (int step = 0; step < 4; ++step) {
    ASSERT_OK(sink->append(make_record("a", DType::kInt8, {4}, v, step)));
  }
  EXPECT_EQ(sink->appended(), 4u);
  EXPECT_EQ(sink->skipped_unchanged(), 0u);
}

TEST(Hdf5Sink, ChangeDetectionSurvivesRotation) {
  TempDir tmp("h5changerot");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  const std::string v = make_bytes(DType::kFloat64, 8, 1);
  const std::string w = make_bytes(DType::kFloat64, 8, 2);
  ASSERT_OK(sink->append(make_record("a", DType::kFloat64, {8}, v, 0)));
  ASSERT_OK(sink->finalize());
  // Unchanged since the previous file: skipped, and no new file is created for it.
  ASSERT_OK(sink->append(make_record("a", DType::kFloat64, {8}, v, 1)));
  EXPECT_EQ(sink->skipped_unchanged(), 1u);
  EXPECT_EQ(count_partial(tmp.path()), 0u);
  ASSERT_OK(sink->append(make_record("a", DType::kFloat64, {8}, w, 2)));
  ASSERT_OK(sink->finalize());
  ASSERT_EQ(sink->finished_files().size(), 2u);
  H5File f(sink->finished_files()[1]);
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.steps("/a"), ElementsAre(2));
  EXPECT_EQ(f.raw("/a/values"), w);
}

// ---- change detection's memory cap ----

TEST(Hdf5ChangeBudget, ReservesUpToTheCapAndReportsTheFirstRefusalOnce) {
  Hdf5ChangeBudget budget(100);
  bool first = true;
  EXPECT_TRUE(budget.try_reserve(60, &first));
  EXPECT_FALSE(first);
  EXPECT_TRUE(budget.try_reserve(40));  // exactly the cap
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_TRUE(budget.try_reserve(0));
  EXPECT_FALSE(budget.try_reserve(1, &first));
  EXPECT_TRUE(first);
  EXPECT_FALSE(budget.try_reserve(1, &first));
  EXPECT_FALSE(first);
  EXPECT_FALSE(budget.try_reserve(UINT64_MAX, &first));  // no overflow
  budget.release(60);
  EXPECT_EQ(budget.used(), 40u);
  EXPECT_TRUE(budget.try_reserve(60));
  Hdf5ChangeBudget none(0);
  EXPECT_TRUE(none.try_reserve(0));
  EXPECT_FALSE(none.try_reserve(1));
}

TEST(Hdf5Sink, ChangeDetectionCapStoresRepeatsOfStreamsWhoseCopyDoesNotFit) {
  TempDir tmp("h5cap");
  Hdf5SinkOptions options = default_options();
  options.change_detection_bytes = 100;
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  const std::string small = make_bytes(DType::kInt32, 4, 1);   // 16 bytes: fits
  const std::string big = make_bytes(DType::kFloat32, 64, 2);  // 256 bytes: does not
  const std::string big2 = make_bytes(DType::kFloat32, 64, 3);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  for (int step = 0; step < 4; ++step) {
    ASSERT_OK(sink->append(make_record("small", DType::kInt32, {4}, small, step)));
    ASSERT_OK(sink->append(make_record("big", DType::kFloat32, {64}, big, step)));
  }
  // A changed value is stored as usual: not counted as over the cap.
  ASSERT_OK(sink->append(make_record("big", DType::kFloat32, {64}, big2, 4)));
  const std::string logged = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(sink->skipped_unchanged(), 3u);  // the small stream's repeats
  EXPECT_EQ(sink->stored_over_cap(), 3u);    // the big stream's repeats
  EXPECT_EQ(sink->appended(), 1u + 5u);
  EXPECT_EQ(sink->kept_copy_bytes(), 16u);
  // Logged once, however many copies were refused.
  size_t mentions = 0;
  for (size_t at = logged.find("hdf5_change_detection_bytes"); at != std::string::npos;
       at = logged.find("hdf5_change_detection_bytes", at + 1)) {
    ++mentions;
  }
  EXPECT_EQ(mentions, 1u) << logged;
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.steps("/small"), ElementsAre(0));
  EXPECT_THAT(f.steps("/big"), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(f.raw("/big/values"), big + big + big + big + big2);
}

TEST(Hdf5Sink, ChangeDetectionBudgetIsSharedAndReleasedOnReplaceAndDestruction) {
  TempDir tmp("h5budget");
  auto budget = std::make_shared<Hdf5ChangeBudget>(64);
  Hdf5SinkOptions options = default_options();
  options.change_detection_bytes = 1 << 20;  // ignored: the shared budget counts
  options.change_budget = budget;
  auto a = open_sink(tmp.path(), options, "a");
  auto b = open_sink(tmp.path(), options, "b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::string a48 = make_bytes(DType::kInt8, 48, 1);
  const std::string a16 = make_bytes(DType::kInt8, 16, 2);
  const std::string b32 = make_bytes(DType::kInt8, 32, 3);
  ASSERT_OK(a->append(make_record("x", DType::kInt8, {48}, a48, 0)));
  EXPECT_EQ(budget->used(), 48u);
  ASSERT_OK(b->append(make_record("y", DType::kInt8, {32}, b32, 0)));  // 48 + 32 > 64
  EXPECT_EQ(budget->used(), 48u);
  ASSERT_OK(b->append(make_record("y", DType::kInt8, {32}, b32, 1)));
  EXPECT_EQ(b->stored_over_cap(), 1u);
  EXPECT_EQ(b->skipped_unchanged(), 0u);
  // a's copy is replaced by a smaller one: 16 in use; b's next copy fits again.
  ASSERT_OK(a->append(make_record("x", DType::kInt8, {16}, a16, 1)));
  EXPECT_EQ(budget->used(), 16u);
  ASSERT_OK(b->append(make_record("y", DType::kInt8, {32}, b32, 2)));  // stored, copy kept
  EXPECT_EQ(b->stored_over_cap(), 2u);
  EXPECT_EQ(budget->used(), 48u);
  ASSERT_OK(b->append(make_record("y", DType::kInt8, {32}, b32, 3)));  // compared: skipped
  EXPECT_EQ(b->skipped_unchanged(), 1u);
  EXPECT_EQ(b->stored_over_cap(), 2u);
  EXPECT_EQ(a->kept_copy_bytes() + b->kept_copy_bytes(), budget->used());
  a.reset();  // the producer finished: its copies go
  EXPECT_EQ(budget->used(), 32u);
  b.reset();
  EXPECT_EQ(budget->used(), 0u);
}

TEST(Hdf5Sink, ChangeDetectionCapZeroKeepsNoCopyAndStoresEveryNonEmptyValue) {
  TempDir tmp("h5cap0");
  Hdf5SinkOptions options = default_options();
  options.change_detection_bytes = 0;
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  for (int step = 0; step < 3; ++step) {
    ASSERT_OK(sink->append(make_record("v", DType::kInt32, {1}, kOne, step)));
    ASSERT_OK(sink->append(make_record("e", DType::kInt32, {0}, "", step)));
  }
  EXPECT_EQ(sink->stored_over_cap(), 2u);
  EXPECT_EQ(sink->skipped_unchanged(), 2u);  // empty values need no copy
  EXPECT_EQ(sink->kept_copy_bytes(), 0u);
}

// ---- rotation ----

TEST(Hdf5Sink, RotationByBytesSplitsIntoCompleteFiles) {
  TempDir tmp("h5rotbytes");
  Hdf5SinkOptions options = default_options();
  options.rotate_bytes = 1000;
  auto sink = open_sink(tmp.path(), options, "run");
  ASSERT_NE(sink, nullptr);
  std::map<std::string, std::map<int64_t, std::string>> written;
  for (int step = 0; step < 20; ++step) {
    for (const std::string stream : {"x", "y/z"}) {
      const std::string bytes = make_bytes(DType::kFloat32, 64, step + (stream == "x" ? 0 : 100));
      written[stream][step] = bytes;
      ASSERT_OK(sink->append(make_record(stream, DType::kFloat32, {8, 8}, bytes, step)));
    }
  }
  ASSERT_OK(sink->finalize());
  const auto files = sink->finished_files();
  // 256 bytes per value, rotation after 1000 bytes: 4 values per file.
  EXPECT_EQ(files.size(), 10u);
  EXPECT_EQ(count_partial(tmp.path()), 0u);
  EXPECT_EQ(final_files(tmp.path()).size(), files.size());
  std::map<std::string, std::map<int64_t, std::string>> read_back;
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(files[i], tmp.path() + "/run." + std::to_string(i) + ".h5");
    H5File f(files[i]);
    ASSERT_TRUE(f.ok()) << files[i];
    for (const auto& g : f.groups()) {
      const std::string stream = f.string_attribute("/" + g, "stream");
      const auto steps = f.steps("/" + g);
      const std::string values = f.raw("/" + g + "/values");
      ASSERT_EQ(values.size(), steps.size() * 256);
      for (size_t r = 0; r < steps.size(); ++r) {
        EXPECT_TRUE(read_back[stream].emplace(steps[r], values.substr(r * 256, 256)).second);
      }
    }
  }
  EXPECT_EQ(read_back, written);
}

TEST(Hdf5Sink, RotationByTimeFromPoll) {
  TempDir tmp("h5rottime");
  Hdf5SinkOptions options = default_options();
  options.rotate_seconds = 1;
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kInt16, {2}, make_bytes(DType::kInt16, 2, 0), 0)));
  ASSERT_OK(sink->poll());
  EXPECT_TRUE(sink->finished_files().empty());  // not a second yet
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sink->finished_files().empty() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_OK(sink->poll());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(sink->finished_files().size(), 1u);
  EXPECT_EQ(count_partial(tmp.path()), 0u);
  // The next append opens the next file; rotation is also checked by append.
  ASSERT_OK(sink->append(make_record("a", DType::kInt16, {2}, make_bytes(DType::kInt16, 2, 1), 1)));
  EXPECT_EQ(count_partial(tmp.path()), 1u);
  int step = 2;
  while (sink->finished_files().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_OK(sink->append(make_record("a", DType::kInt16, {2}, make_bytes(DType::kInt16, 2, step), step)));
    ++step;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(sink->finished_files().size(), 2u);
  H5File f(sink->finished_files()[1]);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.steps("/a").front(), 1);
}

TEST(Hdf5Sink, DestructorFinalizesAndNumbersAreNeverReused) {
  TempDir tmp("h5reuse");
  {
    auto sink = open_sink(tmp.path(), default_options());
    ASSERT_NE(sink, nullptr);
    ASSERT_OK(sink->append(make_record("a", DType::kUInt8, {1}, "\x01", 0)));
  }
  EXPECT_THAT(list_dir(tmp.path()), ElementsAre("values.0.h5"));
  // A stale partial file (a killed writer) keeps its number too.
  { std::ofstream(tmp.path() + "/.values.1.h5.partial") << "junk"; }
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kUInt8, {1}, "\x02", 1)));
  ASSERT_OK(sink->finalize());
  EXPECT_THAT(sink->finished_files(), ElementsAre(tmp.path() + "/values.2.h5"));
  H5File first(tmp.path() + "/values.0.h5");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.raw("/a/values"), "\x01");
  // finalize() with no open file is a no-op.
  EXPECT_TRUE(sink->finalize().is_ok());
  EXPECT_EQ(sink->finished_files().size(), 1u);
}

// ---- dtype conversion ----

TEST(Hdf5Sink, ConvertsToFloat32) {
  TempDir tmp("h5conv");
  Hdf5SinkOptions options = default_options();
  options.dtype = "float32";
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  const std::vector<int32_t> ints{0, 1, -7, 16777217, 123456789};
  ASSERT_OK(sink->append(make_record("i", DType::kInt32, {5}, to_bytes(ints), 0)));
  const std::vector<uint16_t> bf16{0x3f80, 0xc000, 0x7f80};  // 1, -2, +Inf
  ASSERT_OK(sink->append(make_record("b", DType::kBFloat16, {3}, to_bytes(bf16), 0)));
  const std::vector<uint8_t> bools{0, 1, 5};
  ASSERT_OK(sink->append(make_record("t", DType::kBool, {3}, to_bytes(bools), 0)));
  const std::vector<double> doubles{0.1, -1e300, 2.5};
  ASSERT_OK(sink->append(make_record("d", DType::kFloat64, {3}, to_bytes(doubles), 0)));
  const std::vector<float> floats{1.5f, -3.25f};
  ASSERT_OK(sink->append(make_record("f", DType::kFloat32, {2}, to_bytes(floats), 0)));
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  for (const char* g : {"/i", "/b", "/t", "/d", "/f"}) {
    EXPECT_EQ(f.string_attribute(g, "dtype"), "float32") << g;
    EXPECT_EQ(f.type_of(std::string(g) + "/values"), std::make_pair(H5T_FLOAT, size_t{4})) << g;
  }
  EXPECT_THAT(as_vector<float>(f.raw("/i/values")), ElementsAre(0.0f, 1.0f, -7.0f, 16777216.0f, 123456792.0f));
  EXPECT_THAT(as_vector<float>(f.raw("/b/values")), ElementsAre(1.0f, -2.0f, std::numeric_limits<float>::infinity()));
  EXPECT_THAT(as_vector<float>(f.raw("/t/values")), ElementsAre(0.0f, 1.0f, 1.0f));
  EXPECT_THAT(as_vector<float>(f.raw("/d/values")), ElementsAre(0.1f, -std::numeric_limits<float>::infinity(), 2.5f));
  EXPECT_THAT(as_vector<float>(f.raw("/f/values")), ElementsAre(1.5f, -3.25f));
}

TEST(Hdf5Sink, ConvertsToFloat16AndFloat64) {
  TempDir tmp("h5conv16");
  Hdf5SinkOptions options = default_options();
  options.dtype = "float16";
  auto sink = open_sink(tmp.path(), options);
  ASSERT_NE(sink, nullptr);
  const std::vector<double> values{1.0,     -2.0,    0.1,       65504.0, 65519.0, 65520.0,
                                   0x1p-24, 0x1p-25, 0x1.8p-24, -0.0,    1e-300,  std::nan("")};
  ASSERT_OK(sink->append(make_record("h", DType::kFloat64, {12}, to_bytes(values), 0)));
  const std::vector<int64_t> ints{2049, 2051, -100000};
  ASSERT_OK(sink->append(make_record("i", DType::kInt64, {3}, to_bytes(ints), 0)));
  ASSERT_OK(sink->finalize());
  {
    H5File f(sink->finished_files().at(0));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f.type_of("/h/values"), std::make_pair(H5T_FLOAT, size_t{2}));
    const auto bits = as_vector<uint16_t>(f.raw("/h/values"));
    ASSERT_EQ(bits.size(), 12u);
    EXPECT_THAT(std::vector<uint16_t>(bits.begin(), bits.end() - 1),
                ElementsAre(0x3c00, 0xc000, 0x2e66, 0x7bff, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x0002, 0x8000, 0x0000));
    EXPECT_EQ(bits.back() & 0x7c00, 0x7c00);  // NaN: all-ones exponent ...
    EXPECT_NE(bits.back() & 0x03ff, 0);       // ... and a non-zero mantissa
    // 2049 and 2051 are ties: to even (2048, 2052).
    EXPECT_THAT(as_vector<uint16_t>(f.raw("/i/values")), ElementsAre(0x6800, 0x6802, 0xfc00));
  }
  options.dtype = "float64";
  auto sink64 = open_sink(tmp.path(), options, "f64");
  ASSERT_NE(sink64, nullptr);
  const std::vector<uint16_t> halves{0x3c00, 0x0001, 0xfc00};  // 1, 2^-24, -Inf
  ASSERT_OK(sink64->append(make_record("h", DType::kFloat16, {3}, to_bytes(halves), 0)));
  ASSERT_OK(sink64->finalize());
  H5File f(sink64->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(as_vector<double>(f.raw("/h/values")),
              ElementsAre(1.0, 0x1p-24, -std::numeric_limits<double>::infinity()));
}

// ---- layout ----

TEST(Hdf5Sink, ShapeChangeContinuesInANewGroup) {
  TempDir tmp("h5shape");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  const std::string a0 = make_bytes(DType::kFloat32, 4, 0);
  const std::string b1 = make_bytes(DType::kFloat32, 6, 1);
  const std::string a2 = make_bytes(DType::kFloat32, 4, 2);
  const std::string c3 = make_bytes(DType::kInt64, 4, 3);
  ASSERT_OK(sink->append(make_record("act", DType::kFloat32, {4}, a0, 0)));
  ASSERT_OK(sink->append(make_record("act", DType::kFloat32, {2, 3}, b1, 1)));
  ASSERT_OK(sink->append(make_record("act", DType::kFloat32, {4}, a2, 2)));
  ASSERT_OK(sink->append(make_record("act", DType::kInt64, {4}, c3, 3)));
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.groups(), ElementsAre("act", "act@1", "act@2"));
  EXPECT_THAT(f.steps("/act"), ElementsAre(0, 2));
  EXPECT_EQ(f.raw("/act/values"), a0 + a2);
  EXPECT_THAT(f.steps("/act@1"), ElementsAre(1));
  EXPECT_THAT(f.dims("/act@1/values"), ElementsAre(1u, 2u, 3u));
  EXPECT_EQ(f.raw("/act@1/values"), b1);
  EXPECT_THAT(f.shape_attribute("/act@1"), ElementsAre(2, 3));
  EXPECT_EQ(f.string_attribute("/act@2", "dtype"), "int64");
  EXPECT_EQ(f.raw("/act@2/values"), c3);
  for (const char* g : {"/act", "/act@1", "/act@2"}) {
    EXPECT_EQ(f.string_attribute(g, "stream"), "act") << g;
  }
}

TEST(Hdf5Sink, StreamNamesBecomeSafeGroupNames) {
  TempDir tmp("h5names");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model/fc1.out", "model%2Ffc1.out"},
      {"a@1", "a%401"},
      {"100%", "100%25"},
      {".", "%2E"},
      {"..", "%2E%2E"},
      {"/", "%2F"},
      {"tab\there", "tab%09here"},
      {"ünïcode.grad", "ünïcode.grad"},
  };
  int step = 0;
  for (const auto& [stream, group] : cases) {
    // A device name of the full 16 bytes (no NUL) is kept whole.
    ASSERT_OK(sink->append(make_record(stream, DType::kInt8, {1}, "\x05", step++, 0, "0123456789abcdef"))) << stream;
  }
  ASSERT_OK(sink->finalize());
  H5File f(sink->finished_files().at(0));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.groups().size(), cases.size());
  for (const auto& [stream, group] : cases) {
    ASSERT_TRUE(f.has("/" + group)) << group;
    EXPECT_EQ(f.string_attribute("/" + group, "stream"), stream);
    EXPECT_THAT(f.devices("/" + group), ElementsAre("0123456789abcdef"));
  }
}

// ---- errors ----

TEST(Hdf5Sink, BadRecordsAreRefusedAndNothingIsWritten) {
  TempDir tmp("h5bad");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  const std::string four = make_bytes(DType::kFloat32, 4, 0);
  Hdf5Record wrong_size = make_record("a", DType::kFloat32, {5}, four, 0);
  EXPECT_THAT(sink->append(wrong_size).message(), HasSubstr("do not match"));
  Hdf5Record bad_dtype = make_record("a", static_cast<DType>(42), {4}, four, 0);
  EXPECT_THAT(sink->append(bad_dtype).message(), HasSubstr("invalid dtype"));
  Hdf5Record invalid = make_record("a", DType::kInvalid, {4}, four, 0);
  EXPECT_FALSE(sink->append(invalid).is_ok());
  Hdf5Record negative = make_record("a", DType::kFloat32, {-4}, four, 0);
  EXPECT_THAT(sink->append(negative).message(), HasSubstr("negative"));
  Hdf5Record null_data = make_record("a", DType::kFloat32, {4}, four, 0);
  null_data.data = nullptr;
  EXPECT_THAT(sink->append(null_data).message(), HasSubstr("null"));
  Hdf5Record long_device = make_record("a", DType::kFloat32, {4}, four, 0, 0, std::string(17, 'd'));
  EXPECT_THAT(sink->append(long_device).message(), HasSubstr("device name"));
  Hdf5Record no_name = make_record("", DType::kFloat32, {4}, four, 0);
  EXPECT_FALSE(sink->append(no_name).is_ok());
  Hdf5Record huge = make_record("a", DType::kFloat32, {1LL << 40, 1LL << 40}, four, 0);
  EXPECT_FALSE(sink->append(huge).is_ok());
  Hdf5Record too_many_dims = make_record("a", DType::kFloat32, std::vector<int64_t>(40, 1), four, 0);
  too_many_dims.shape[0] = 4;
  EXPECT_THAT(sink->append(too_many_dims).message(), HasSubstr("dims"));
  EXPECT_EQ(sink->appended(), 0u);
  EXPECT_TRUE(list_dir(tmp.path()).empty());
  EXPECT_TRUE(sink->finalize().is_ok());
  EXPECT_TRUE(sink->finished_files().empty());
}

TEST(Hdf5Sink, BadOptionsAreRefused) {
  TempDir tmp("h5opts");
  Hdf5SinkOptions o = default_options();
  o.dtype = "int8";
  EXPECT_THAT(Hdf5Sink::open(tmp.path(), "v", o).message(), HasSubstr("unknown dtype"));
  o = default_options();
  o.gzip_level = 10;
  EXPECT_THAT(Hdf5Sink::open(tmp.path(), "v", o).message(), HasSubstr("gzip_level"));
  EXPECT_FALSE(Hdf5Sink::open(tmp.path(), "a/b", default_options()).is_ok());
  EXPECT_FALSE(Hdf5Sink::open(tmp.path(), "", default_options()).is_ok());
  { std::ofstream(tmp.path() + "/file") << "x"; }
  EXPECT_FALSE(Hdf5Sink::open(tmp.path() + "/file", "v", default_options()).is_ok());
  // A missing directory is created.
  EXPECT_TRUE(Hdf5Sink::open(tmp.path() + "/new/dir", "v", default_options()).is_ok());
}

TEST(Hdf5Sink, Hdf5FailuresBecomeStatusWithoutPrintingAnErrorStack) {
  TempDir tmp("h5fail");
  const std::string dir = tmp.path() + "/out";
  auto sink = open_sink(dir, default_options());
  ASSERT_NE(sink, nullptr);
  std::filesystem::remove_all(dir);  // the file cannot be created any more
  ::testing::internal::CaptureStderr();
  const Status s = sink->append(make_record("a", DType::kInt32, {1}, kOne, 0));
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(s.is_ok());
  // The partial file is created (and locked) before HDF5 opens it: the cause is named.
  EXPECT_THAT(s.message(), HasSubstr(".values.0.h5.partial: cannot create: "));
  EXPECT_THAT(s.message(), HasSubstr("No such file or directory"));
  EXPECT_EQ(printed, "");
  EXPECT_EQ(sink->appended(), 0u);
  // It recovers once the directory is back.
  std::filesystem::create_directories(dir);
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kOne, 1)));
  ASSERT_OK(sink->finalize());
  EXPECT_EQ(sink->finished_files().size(), 1u);
}

TEST(Hdf5Sink, FinalizeFailureKeepsThePartialName) {
  TempDir tmp("h5finfail");
  auto sink = open_sink(tmp.path(), default_options());
  ASSERT_NE(sink, nullptr);
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kOne, 0)));
  // The final name is taken by a directory: rename fails.
  ASSERT_TRUE(std::filesystem::create_directory(tmp.path() + "/values.0.h5"));
  std::filesystem::create_directory(tmp.path() + "/values.0.h5/x");
  const Status s = sink->finalize();
  EXPECT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("cannot rename"));
  EXPECT_TRUE(sink->finished_files().empty());
  EXPECT_EQ(count_partial(tmp.path()), 1u);
  // The next file gets the next number.
  ASSERT_OK(sink->append(make_record("a", DType::kInt32, {1}, kTwo, 1)));
  ASSERT_OK(sink->finalize());
  EXPECT_THAT(sink->finished_files(), ElementsAre(tmp.path() + "/values.1.h5"));
}

}  // namespace
}  // namespace tensorscope::recording
