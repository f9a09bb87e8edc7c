// summary_table_test.cc — the summary table's lines read back as they were written
// (quoted names, empty cells for NaN and absent update ratios), and lines that are not
// the table's refused.
#include "tensorscope/recording/summary_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace tensorscope::recording {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(SummaryTableTest, AFractionStandsForItsRoundedCountAndAnEmptyColumnForNone) {
  EXPECT_EQ(count_of_fraction(0.25, 8), 2u);
  EXPECT_EQ(count_of_fraction(1.0 / 3, 10), 3u) << "rounded";
  EXPECT_EQ(count_of_fraction(0.25, 10), 3u) << "2.5 rounds away from zero";
  EXPECT_EQ(count_of_fraction(std::numeric_limits<double>::quiet_NaN(), 10), 0u);
  EXPECT_EQ(count_of_fraction(1.0, 0), 0u);
}

TEST(SummaryTableTest, LinesReadBackAsWritten) {
  TensorSummary a;
  a.name = "net.blocks,\"0\".out";  // a comma and quotes: a quoted cell
  a.kind = wire::TensorKind::kActivation;
  a.numel = 1000;
  a.zero_count = 250;
  a.nan_count = 3;
  a.inf_count = 1;
  a.l2 = 0.1;
  a.max_abs = std::numeric_limits<double>::infinity();
  a.mean = -1e-300;
  a.std = 2.5;
  TensorSummary w;
  w.name = "net.fc.weight";
  w.kind = wire::TensorKind::kParameter;
  w.numel = 64;
  w.l2 = 3;
  w.has_update_ratio = true;
  w.update_ratio = 1.5e-4;
  TensorSummary g;  // with numerics: counts from fractions, min |x| from the dynamic range
  g.name = "net.fc.grad";
  g.kind = wire::TensorKind::kGradient;
  g.numel = 400;
  g.max_abs = 0x1p-3;
  g.cast_format = CastFormat::kFp8E5m2;
  g.underflow_count = 37;
  g.overflow_count = 2;
  g.min_abs_nonzero = 0x1p-30;
  TensorSummary zeros = g;  // numerics of a tensor without a non-zero value
  zeros.name = "net.zeros";
  zeros.max_abs = 0;
  zeros.min_abs_nonzero = 0;
  zeros.underflow_count = zeros.overflow_count = 0;
  const auto lines = lines_of(summary_table_lines(41, 2, "net", {a, w, g, zeros}));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[2].find(",fp8_e5m2,27,0.0925,0.005"), std::string::npos) << lines[2];
  EXPECT_NE(lines[0].find(",1,,,,"), std::string::npos) << "no numerics: empty cells";
  SummaryTableRow row;
  ASSERT_TRUE(parse_summary_table_line(lines[0], &row));
  EXPECT_EQ(row.step, 41);
  EXPECT_EQ(row.rank, 2);
  EXPECT_EQ(row.track, "net");
  EXPECT_EQ(row.summary, a);
  ASSERT_TRUE(parse_summary_table_line(lines[1], &row));
  EXPECT_EQ(row.summary, w);
  ASSERT_TRUE(parse_summary_table_line(lines[2], &row));
  EXPECT_EQ(row.summary, g);
  ASSERT_TRUE(parse_summary_table_line(lines[3], &row));
  EXPECT_EQ(row.summary, zeros);
}

TEST(SummaryTableTest, OtherLinesAreRefused) {
  SummaryTableRow row;
  EXPECT_FALSE(parse_summary_table_line(kSummaryTableHeader, &row));
  EXPECT_FALSE(parse_summary_table_line("", &row));
  EXPECT_FALSE(parse_summary_table_line("1,0,net,0,x,activation,10,1,1,0,1,0,0,0", &row));  // a cell short
  EXPECT_FALSE(parse_summary_table_line("1,0,net,0,x,nonsense,10,1,1,0,1,0,0,0,", &row));
  EXPECT_FALSE(parse_summary_table_line("1,0,net,0,\"x,activation,10,1,1,0,1,0,0,0,", &row));
  EXPECT_FALSE(parse_summary_table_line("1,0,net,0,x,activation,ten,1,1,0,1,0,0,0,", &row));
  EXPECT_TRUE(parse_summary_table_line("1,0,net,0,x,activation,10,1,1,0,1,0,0,0,", &row));  // before steps
  EXPECT_EQ(row.steps, 1);
  EXPECT_TRUE(parse_summary_table_line("1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8", &row));
  EXPECT_EQ(row.steps, 8);
  EXPECT_EQ(row.order, 3);
  EXPECT_EQ(summary_table_line(row), "1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8,,,,,,,\n")
      << "written as this version";
  EXPECT_FALSE(parse_summary_table_line("1,0,net,0,x,activation,10,1,1,0,1,0,0,0,,0", &row));
  EXPECT_TRUE(parse_summary_table_line("1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8,bf16,3,0.1,0", &row));
  EXPECT_EQ(row.summary.cast_format, CastFormat::kBf16);
  EXPECT_EQ(row.summary.underflow_count, 1u);
  EXPECT_EQ(row.summary.min_abs_nonzero, 0.125);
  EXPECT_FALSE(parse_summary_table_line("1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8,bf17,3,0.1,0", &row));
  EXPECT_FALSE(parse_summary_table_line("1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8,bf16,3,0.1", &row));
  EXPECT_FALSE(parse_summary_table_line("1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8,bf16,x,0.1,0", &row));
  EXPECT_TRUE(parse_summary_table_line("1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8,,,,", &row));
  EXPECT_FALSE(row.summary.has_numerics());
}

TEST(SummaryTableTest, AShardsPlacementReadsBack) {
  TensorSummary w;
  w.name = "net.fc.weight";
  w.kind = wire::TensorKind::kParameter;
  w.numel = 32;
  w.l2 = 2;
  w.shard.whole_numel = 128;
  w.shard.dims = {{MeshPlacement::kReplicate, 0, 1, 2}, {MeshPlacement::kShard, 0, 3, 4}};
  const std::string line = summary_table_lines(5, 7, "net", {w});
  EXPECT_NE(line.find(",R@1/2|S0@3/4,128,\n"), std::string::npos) << line;
  SummaryTableRow row;
  ASSERT_TRUE(parse_summary_table_line(line.substr(0, line.size() - 1), &row));
  EXPECT_EQ(row.summary, w);
  EXPECT_TRUE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,,S0@1/2,20", &row));
  EXPECT_EQ(row.summary.shard.whole_numel, 20u);
  EXPECT_FALSE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,,S0@2/2,20", &row));
  EXPECT_FALSE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,,S0@1/2,", &row));
  EXPECT_TRUE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,", &row));
  EXPECT_FALSE(row.summary.shard.sharded()) << "a line before the shard columns";
}

// The headers of this and the earlier versions are the table's; a line or a prefix cut
// inside a column name is not.
TEST(SummaryTableTest, TheDtypeReadsBackAndOlderLinesHaveNone) {
  TensorSummary a;
  a.name = "net.attn";
  a.kind = wire::TensorKind::kActivation;
  a.numel = 8;
  a.l2 = 1;
  a.dtype = wire::DType::kBFloat16;
  const std::string line = summary_table_lines(3, 0, "net", {a});
  EXPECT_NE(line.find(",bfloat16\n"), std::string::npos) << line;
  SummaryTableRow row;
  ASSERT_TRUE(parse_summary_table_line(line.substr(0, line.size() - 1), &row));
  EXPECT_EQ(row.summary, a);
  a.dtype = wire::DType::kInvalid;  // not known: an empty cell
  const std::string unknown = summary_table_lines(3, 0, "net", {a});
  EXPECT_NE(unknown.find(",,\n"), std::string::npos) << unknown;
  ASSERT_TRUE(parse_summary_table_line(unknown.substr(0, unknown.size() - 1), &row));
  EXPECT_EQ(row.summary.dtype, wire::DType::kInvalid);
  row.summary.dtype = wire::DType::kFloat64;
  ASSERT_TRUE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,,,", &row));
  EXPECT_EQ(row.summary.dtype, wire::DType::kInvalid) << "a line before the dtype column";
  EXPECT_TRUE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,,,,int64", &row));
  EXPECT_EQ(row.summary.dtype, wire::DType::kInt64);
  EXPECT_FALSE(parse_summary_table_line("1,0,net,3,x,parameter,10,1,1,0,1,0,0,0,,1,,,,,,,float8", &row));
}

TEST(SummaryTableTest, HeadersOfEveryVersion) {
  const std::string header = kSummaryTableHeader;
  EXPECT_TRUE(is_summary_table_header(header));
  const size_t v4 = header.find(",dtype"), v3 = header.find(",shard"), v2 = header.find(",cast_format"),
               v1 = header.find(",steps");
  EXPECT_TRUE(is_summary_table_header(header.substr(0, v4)));
  EXPECT_TRUE(is_summary_table_header(header.substr(0, v3)));
  EXPECT_TRUE(is_summary_table_header(header.substr(0, v2)));
  EXPECT_TRUE(is_summary_table_header(header.substr(0, v1)));
  EXPECT_FALSE(is_summary_table_header(header.substr(0, v1 - 3)));
  EXPECT_FALSE(is_summary_table_header(header.substr(0, header.find(",dynamic_range"))));
  EXPECT_FALSE(is_summary_table_header(""));
  SummaryTableRow row;
  for (const std::string& h :
       {header, header.substr(0, v4), header.substr(0, v3), header.substr(0, v2), header.substr(0, v1)}) {
    EXPECT_FALSE(parse_summary_table_line(h, &row)) << h;
  }
}

}  // namespace
}  // namespace tensorscope::recording
