// anomaly_log_test.cc — the session's anomaly log across a restart of the daemon: read
// back, the first NaN still named, and an anomaly a producer already had (reported again
// by a detector that started over) not added twice.
#include "supervisor/anomaly_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

nlohmann::json anomaly(const std::string& type, int64_t step, int rank, int64_t pid, const std::string& stream) {
  return {{"type", type},   {"step", step},     {"rank", rank},         {"pid", pid},
          {"track", "net"}, {"stream", stream}, {"kind", "activation"}, {"message", type + " in " + stream}};
}

size_t lines_of(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(AnomalyLog, ARestartedDaemonGoesOnFromTheFile) {
  testing::TempDir dir("ts-anomalies");
  {
    AnomalyLog first(dir.path());
    EXPECT_EQ(first.read_back(), 0u);  // no file yet
    first.add(anomaly("explosion", 40, 0, 7, "net.fc"));
    first.add(anomaly("non_finite", 57, 0, 7, "net.conv"));
  }
  AnomalyLog again(dir.path());
  EXPECT_EQ(again.read_back(), 2u);
  EXPECT_EQ(again.status()["count"], 2);
  EXPECT_EQ(again.status()["first_non_finite"]["step"], 57);
  // The same process, its detector new: its later NaN is not a "first" again, nor its
  // stream's explosion a second one.
  again.add(anomaly("non_finite", 90, 0, 7, "net.fc"));
  again.add(anomaly("explosion", 95, 0, 7, "net.fc"));
  EXPECT_EQ(again.status()["count"], 2);
  EXPECT_EQ(again.status()["first_non_finite"]["step"], 57);
  // Another stream's explosion, another rank's NaN: new.
  again.add(anomaly("explosion", 96, 0, 7, "net.out"));
  again.add(anomaly("non_finite", 12, 1, 8, "net.conv"));
  EXPECT_EQ(again.status()["count"], 4);
  EXPECT_EQ(again.status()["first_non_finite"]["rank"], 1);
  EXPECT_EQ(lines_of(again.path()), 1u + 4u) << "the header and each anomaly once";
}

TEST(AnomalyLog, MalformedLinesOfTheFileAreSkipped) {
  testing::TempDir dir("ts-anomalies");
  std::ofstream(dir.path() + "/anomalies.jsonl")
      << "{\"tensorscope\":\"anomalies\",\"version\":1}\nnot json\n{\"type\":3}\n"
      << anomaly("dead_units", 5, 0, 3, "net.relu").dump() << "\n{\"type\":\"non_fin";
  AnomalyLog log(dir.path());
  EXPECT_EQ(log.read_back(), 1u);
  EXPECT_EQ(log.status()["count"], 1);
  EXPECT_TRUE(log.status()["first_non_finite"].is_null());
}

}  // namespace
}  // namespace tensorscope::daemon
