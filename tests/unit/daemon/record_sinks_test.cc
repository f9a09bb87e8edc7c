// record_sinks_test.cc — RecordSinks, the worker's recording sinks behind one queue: the
// HDF5 counters it reports and the recovery of the session directory on its first write.
#include "worker/record_sinks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "dir_listing.h"
#include "hdf5_test_files.h"
#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

using ::testing::ElementsAre;
using testing::H5File;
using testing::list_dir;
using testing::make_bytes;
using testing::make_readable_partial;
using testing::TempDir;
using testing::write_file;
using wire::DType;

TEST(RecordSinksHdf5, CountersReportTheCapAndTheRecoveryOfTheSessionDirectory) {
  TempDir tmp("h5recsinks");
  const std::string session = tmp.path() + "/session";
  std::filesystem::create_directories(session + "/hdf5");
  ASSERT_FALSE(make_readable_partial(session + "/hdf5", "rank0_pid1", 2).empty());
  write_file(session + "/hdf5/.rank0_pid2.0.h5.partial", "garbage");

  RecordConfig config;
  config.video = "";
  config.hdf5 = ".*";
  config.hdf5_gzip = 0;
  config.hdf5_change_detection_bytes = 100;
  const std::string small = make_bytes(DType::kInt32, 4, 1);   // 16 bytes
  const std::string big = make_bytes(DType::kFloat32, 64, 2);  // 256 bytes
  uint64_t written = 0;
  nlohmann::json counters;
  {
    RecordSinks sinks(config, session);
    auto push = [&](const char* name, DType dtype, int64_t n, const std::string& bytes, int64_t step) {
      RecordView view;
      wire::RecordHeader& h = view.header;
      h.payload_bytes = bytes.size();
      h.step = step;
      h.rank = 0;
      h.dtype = static_cast<uint8_t>(dtype);
      h.kind = static_cast<uint8_t>(wire::TensorKind::kActivation);
      h.ndim = 1;
      h.shape[0] = n;
      std::snprintf(h.name, sizeof(h.name), "%s", name);
      std::snprintf(h.device, sizeof(h.device), "cpu");
      view.payload = reinterpret_cast<const uint8_t*>(bytes.data());
      const uint8_t wanted = sinks.wants(name);
      ASSERT_NE(wanted & RecordSinks::kHdf5, 0);
      sinks.record(7, 4242, view, wanted);
    };
    for (int step = 0; step < 4; ++step) {
      push("small", DType::kInt32, 4, small, step);
      push("big", DType::kFloat32, 64, big, step);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (sinks.counters()["written"].get<uint64_t>() < 8 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    counters = sinks.counters();
    written = counters["written"].get<uint64_t>();
    sinks.finish_producer(7);
  }
  ASSERT_EQ(written, 8u) << counters.dump();
  EXPECT_EQ(counters["failed"], 0u) << counters.dump();
  EXPECT_EQ(counters["hdf5_skipped_unchanged"], 3u) << counters.dump();
  EXPECT_EQ(counters["hdf5_stored_over_cap"], 3u) << counters.dump();
  EXPECT_EQ(counters["hdf5_partials_recovered"], 1u) << counters.dump();
  EXPECT_EQ(counters["hdf5_partials_removed"], 1u) << counters.dump();
  EXPECT_THAT(list_dir(session + "/hdf5"), ElementsAre("rank0_pid1.0.recovered.h5", "rank0_pid4242.0.h5"));
  H5File f(session + "/hdf5/rank0_pid4242.0.h5");
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(f.steps("/small"), ElementsAre(0));
  EXPECT_THAT(f.steps("/big"), ElementsAre(0, 1, 2, 3));
}
}  // namespace
}  // namespace tensorscope::daemon
