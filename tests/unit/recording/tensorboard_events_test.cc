// TensorBoard export (recording/tensorboard_events.h, tensorboard_export.h): CRC-32C and
// TFRecord framing as TensorFlow defines them; Event records read back field by field
// (a small protocol buffer reader here); the scalars of a record by metric and stream;
// the live page's link and an anomaly's text. (python/tests/test_tensorboard_export.py
// reads a daemon's files with TensorBoard's own reader.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tensorscope/recording/tensorboard_events.h"
#include "tensorscope/recording/tensorboard_export.h"

namespace tensorscope::recording {
namespace {

// A protocol buffer message's fields: number -> raw values (varints as numbers, fixed
// fields as their bytes, length-delimited as bytes).
struct Field {
  uint64_t number = 0;
  std::string bytes;
};
std::multimap<int, Field> fields_of(const std::string& m) {
  std::multimap<int, Field> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; i < m.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(m[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (i < m.size()) {
    const uint64_t key = varint();
    Field f;
    switch (key & 7) {
      case 0: f.number = varint(); break;
      case 1:
        f.bytes = m.substr(i, 8);
        i += 8;
        break;
      case 5:
        f.bytes = m.substr(i, 4);
        i += 4;
        break;
      case 2: {
        const uint64_t n = varint();
        f.bytes = m.substr(i, n);
        i += n;
        break;
      }
      default: ADD_FAILURE() << "wire type " << (key & 7); return out;
    }
    out.emplace(static_cast<int>(key >> 3), f);
  }
  return out;
}
template <typename T>
T as(const std::string& b) {
  T v{};
  std::memcpy(&v, b.data(), sizeof(T));
  return v;
}

TEST(TensorBoardEvents, CrcAndFramingAreTensorFlows) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(crc32c(""), 0u);
  const std::string r = tfrecord("abc");
  ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(as<uint64_t>(r.substr(0, 8)), 3u);
  EXPECT_EQ(as<uint32_t>(r.substr(8, 4)), masked_crc32c(r.substr(0, 8)));
  EXPECT_EQ(r.substr(12, 3), "abc");
  const uint32_t c = crc32c("abc");
  EXPECT_EQ(as<uint32_t>(r.substr(15, 4)), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoardEvents, AFileReadsBackAsTheEventsWritten) {
  testing::TempDir dir("tb-events");
  auto events = TensorBoardEvents::create(dir.path() + "/run/rank0_pid1", 1700000000.5);
  ASSERT_TRUE(events.is_ok()) << events.message();
  ASSERT_TRUE(events
                  ->append({event_scalars(1700000001.0, 42, {{"l2/net.0", 2.5f}, {"max_abs/net.0", 0.75f}}),
                            event_text(1700000002.0, 43, "tensorscope/anomalies", "**non_finite**")})
                  .is_ok());
  std::ifstream in(events->path(), std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  const std::string file = all.str();
  std::vector<std::string> records;
  for (size_t at = 0; at < file.size();) {
    const auto n = as<uint64_t>(file.substr(at, 8));
    ASSERT_EQ(as<uint32_t>(file.substr(at + 8, 4)), masked_crc32c(file.substr(at, 8)));
    records.push_back(file.substr(at + 12, n));
    ASSERT_EQ(as<uint32_t>(file.substr(at + 12 + n, 4)), masked_crc32c(records.back()));
    at += 12 + n + 4;
  }
  ASSERT_EQ(records.size(), 3u);
  auto first = fields_of(records[0]);
  EXPECT_EQ(as<double>(first.find(1)->second.bytes), 1700000000.5);
  EXPECT_EQ(first.find(3)->second.bytes, "brain.Event:2");
  auto scalars = fields_of(records[1]);
  EXPECT_EQ(scalars.find(2)->second.number, 42u);
  auto values = fields_of(scalars.find(5)->second.bytes);
  ASSERT_EQ(values.count(1), 2u);
  auto v = fields_of(values.find(1)->second.bytes);
  EXPECT_EQ(v.find(1)->second.bytes, "l2/net.0");
  EXPECT_EQ(as<float>(v.find(2)->second.bytes), 2.5f);
  auto text = fields_of(fields_of(fields_of(records[2]).find(5)->second.bytes).find(1)->second.bytes);
  EXPECT_EQ(text.find(1)->second.bytes, "tensorscope/anomalies");
  auto tensor = fields_of(text.find(8)->second.bytes);
  EXPECT_EQ(tensor.find(1)->second.number, 7u);  // DT_STRING
  EXPECT_EQ(tensor.find(8)->second.bytes, "**non_finite**");
  auto plugin = fields_of(fields_of(text.find(9)->second.bytes).find(1)->second.bytes);
  EXPECT_EQ(plugin.find(1)->second.bytes, "text");
}

TEST(TensorBoardExport, ScalarsOfTheChosenMetricsAndStreams) {
  TensorSummary a, b;
  a.name = "net.0";
  a.numel = 4;
  a.l2 = 3;
  a.max_abs = 2;
  a.zero_count = 1;
  b.name = "net.0.weight";
  b.numel = 4;
  b.l2 = 1;
  b.has_update_ratio = true;
  b.update_ratio = 0.01;
  const auto out = export_scalars({a, b}, std::regex("l2|update_ratio|zero_fraction"), std::regex("net\\.0.*"));
  const std::vector<std::pair<std::string, float>> expected = {{"l2/net.0", 3.0f},
                                                               {"zero_fraction/net.0", 0.25f},
                                                               {"l2/net.0.weight", 1.0f},
                                                               {"zero_fraction/net.0.weight", 0.0f},
                                                               {"update_ratio/net.0.weight", 0.01f}};
  // (a's update ratio: none, left out)
  std::vector<std::pair<std::string, float>> sorted = out, want = expected;
  std::sort(sorted.begin(), sorted.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(sorted, want);
  EXPECT_TRUE(export_scalars({a}, std::regex("l2"), std::regex("other")).empty());
}

TEST(TensorBoardExport, ATensorWithNoFiniteElementHasNoNormButItsCounts) {
  TensorSummary all_nan, part_nan;
  all_nan.name = "net.4";
  all_nan.numel = 8;
  all_nan.nan_count = 8;  // l2, max |x|, mean, std over no element: 0 in the summary
  part_nan.name = "net.5";
  part_nan.numel = 8;
  part_nan.nan_count = 3;
  part_nan.l2 = 2;
  const auto out = export_scalars({all_nan, part_nan}, std::regex("l2|max_abs|mean|std|nan_count"), std::regex(".*"));
  std::map<std::string, float> got(out.begin(), out.end());
  EXPECT_EQ(got.count("l2/net.4"), 0u);
  EXPECT_EQ(got.count("max_abs/net.4"), 0u);
  EXPECT_EQ(got.count("mean/net.4"), 0u);
  EXPECT_EQ(got.count("std/net.4"), 0u);
  EXPECT_EQ(got.at("nan_count/net.4"), 8.0f);
  EXPECT_EQ(got.at("l2/net.5"), 2.0f);  // the finite elements' norm
  EXPECT_EQ(got.at("nan_count/net.5"), 3.0f);
}

TEST(TensorBoardExport, AnAnomalyLinksToTheLivePageAtItsStreamRankAndStep) {
  EXPECT_EQ(live_page_link("http://node7:8080/", "net.layers[0].attn#1", 3, 212),
            "http://node7:8080/#q=%5Enet%5C.layers%5C%5B0%5C%5D%5C.attn%231%24&rank=3&step=212&page=tiles");
  EXPECT_EQ(live_page_link("http://node7:8080/#t=secret", "x", 0, 1),
            "http://node7:8080/#q=%5Ex%24&rank=0&step=1&page=tiles");
  EXPECT_EQ(live_page_link("", "x", 0, 1), "");
  const nlohmann::json a = {
      {"type", "non_finite"},     {"step", 7}, {"rank", 1}, {"stream", "net.4"}, {"kind", "activation"},
      {"message", "NaN in net.4"}};
  const std::string linked = anomaly_markdown(a, "http://h:1/", "exp1");
  EXPECT_NE(linked.find("**non_finite** at step 7, rank 1: `net.4` (activation)"), std::string::npos) << linked;
  EXPECT_NE(linked.find("(http://h:1/#q=%5Enet%5C.4%24&rank=1&step=7&page=tiles)"), std::string::npos) << linked;
  EXPECT_NE(anomaly_markdown(a, "", "exp1").find("tensorscope view --session exp1"), std::string::npos);
}

}  // namespace
}  // namespace tensorscope::recording
