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
  const auto lines = lines_of(summary_table_lines(41, 2, "net", {a, w}));
  ASSERT_EQ(lines.size(), 2u);
  SummaryTableRow row;
  ASSERT_TRUE(parse_summary_table_line(lines[0], &row));
  EXPECT_EQ(row.step, 41);
  EXPECT_EQ(row.rank, 2);
  EXPECT_EQ(row.track, "net");
  EXPECT_EQ(row.summary, a);
  ASSERT_TRUE(parse_summary_table_line(lines[1], &row));
  EXPECT_EQ(row.summary, w);
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
  EXPECT_EQ(summary_table_line(row), "1,0,net,3,x,activation,10,1,1,0,1,0,0,0,,8\n");
  EXPECT_FALSE(parse_summary_table_line("1,0,net,0,x,activation,10,1,1,0,1,0,0,0,,0", &row));
  EXPECT_FALSE(parse_summary_table_line(kSummaryTableHeaderV1, &row));
}

}  // namespace
}  // namespace tensorscope::recording
