// SummaryTables and ranks_overview (view/src/summary_tables.h): every rank of several
// sessions at one step, a column per tensor, the rank that stands out named; the step
// asked or the newest; an overview limited to the tables asked; bad queries refused.
#include "summary_tables.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tensorscope/recording/summary_table.h"

namespace tensorscope::view {
namespace {

namespace fs = std::filesystem;

class SummaryTablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ts-summary-tables-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  // A table of `rank` in session folder `node`: gradients of 3 layers over 10 steps, the
  // norm 1 + layer (times `factor` for `odd_layer` from step 5 on).
  void write_table(const std::string& node, int rank, int odd_layer = -1, double factor = 1) {
    const fs::path dir = root_ / node / "summaries";
    fs::create_directories(dir);
    std::ofstream out(dir / ("rank" + std::to_string(rank) + "_pid" + std::to_string(100 + rank) + ".csv"));
    out << recording::kSummaryTableHeader << "\n";
    for (int step = 0; step < 10; ++step) {
      std::vector<TensorSummary> s;
      for (int layer = 0; layer < 3; ++layer) {
        TensorSummary g;
        g.name = "net." + std::to_string(layer) + ".grad";
        g.kind = wire::TensorKind::kGradient;
        g.numel = 10;
        g.l2 = (1 + layer) * (layer == odd_layer && step >= 5 ? factor : 1.0) * (1 + 0.001 * rank);
        s.push_back(g);
      }
      out << recording::summary_table_lines(step, rank, "net", s);
    }
  }
  fs::path root_;
};

TEST_F(SummaryTablesTest, EveryRankOfEverySessionAtOneStepWithTheOneThatStandsOut) {
  for (int rank = 0; rank < 4; ++rank) write_table("node0", rank);
  for (int rank = 4; rank < 8; ++rank) write_table("node1", rank, rank == 6 ? 1 : -1, 20.0);
  SummaryTables a((root_ / "node0").string()), b((root_ / "node1").string());
  ASSERT_TRUE(a.refresh());
  ASSERT_TRUE(b.refresh());
  RanksQuery q;  // grad_norm, the newest step
  nlohmann::json o = ranks_overview({&a, &b}, q);
  EXPECT_EQ(o["step"], 9);
  EXPECT_EQ(o["first_step"], 0);
  EXPECT_EQ(o["last_step"], 9);
  // (gradients without their outputs: the reverse of the order backward gave them in)
  EXPECT_EQ(o["columns"], (nlohmann::json{"net.2.grad", "net.1.grad", "net.0.grad"}));
  ASSERT_EQ(o["ranks"].size(), 8u);
  EXPECT_EQ(o["ranks"][5]["source"], 1);
  EXPECT_EQ(o["ranks"][5]["rank"], 5);
  EXPECT_EQ(o["ranks"][5]["pid"], 105);
  EXPECT_NEAR(o["values"][6][1].get<double>(), 2 * 20 * 1.006, 0.01);
  EXPECT_EQ(o["outlier_ranks"], (nlohmann::json{6}));
  ASSERT_EQ(o["outliers"].size(), 1u);
  EXPECT_EQ(o["outliers"][0][0], 6);
  EXPECT_EQ(o["outliers"][0][1], 1);
  // Before the change, no rank stands out.
  q.step = 3;
  o = ranks_overview({&a, &b}, q);
  EXPECT_EQ(o["step"], 3);
  EXPECT_TRUE(o["outlier_ranks"].empty());
  EXPECT_EQ(o["ranks"][0]["first"], 3);
}

TEST_F(SummaryTablesTest, ManyRanksOfManyTensorsMergeTensorsToStayBounded) {
  // 530 ranks x 2,000 tensors: 1.06 M cells, past the bound; rank 5's tensor 1,999 stands out.
  const fs::path dir = root_ / "big" / "summaries";
  fs::create_directories(dir);
  for (int rank = 0; rank < 530; ++rank) {
    std::vector<TensorSummary> s;
    for (int k = 0; k < 2000; ++k) {
      TensorSummary g;
      g.name = "t" + std::to_string(k) + ".grad";
      g.kind = wire::TensorKind::kGradient;
      g.numel = 4;
      g.l2 = (rank == 5 && k == 1999 ? 100.0 : 1.0) * (1 + 0.001 * (rank % 7));
      s.push_back(g);
    }
    std::ofstream(dir / ("rank" + std::to_string(rank) + "_pid1.csv"))
        << recording::kSummaryTableHeader << "\n"
        << recording::summary_table_lines(0, rank, "net", s);
  }
  SummaryTables t((root_ / "big").string());
  while (!t.refresh()) {}
  const nlohmann::json o = ranks_overview({&t}, RanksQuery{});
  ASSERT_EQ(o["ranks"].size(), 530u);
  const size_t columns = o["columns"].size();
  EXPECT_LE(530 * columns, SummaryTables::kMaxAnswerCells);
  EXPECT_LT(columns, 2000u);
  EXPECT_GE(columns, 1000u);
  EXPECT_EQ(o["values"][0].size(), columns);
  EXPECT_EQ(o["outlier_ranks"], (nlohmann::json{5}));
  ASSERT_EQ(o["outliers"].size(), 1u);
  const size_t at = o["outliers"][0][1];
  EXPECT_NEAR(o["values"][5][at].get<double>(), 100 * 1.005, 0.01) << "the merged cell keeps the largest";
  EXPECT_NE(o["columns"][at].get<std::string>().find("+"), std::string::npos);
}

TEST_F(SummaryTablesTest, AnOverviewOfTheTablesAsked) {
  for (int rank = 0; rank < 3; ++rank) write_table("node0", rank);
  SummaryTables a((root_ / "node0").string());
  ASSERT_TRUE(a.refresh());
  const auto q = parse_overview_query({{"tables", "0.1.101,0.2.102"}});
  ASSERT_TRUE(q) << q.message();
  ASSERT_TRUE(q->tables);
  EXPECT_EQ(q->tables->size(), 2u);
  const nlohmann::json all = a.overview(0, 100);
  EXPECT_EQ(all["tables"].size(), 3u);
  const nlohmann::json some = a.overview(0, 100, nullptr, std::set<std::pair<int, int64_t>>{{1, 101}, {2, 102}});
  ASSERT_EQ(some["tables"].size(), 2u);
  EXPECT_EQ(some["tables"][0]["rank"], 1);
  EXPECT_EQ(some["tables"][1]["rank"], 2);
}

TEST_F(SummaryTablesTest, BadQueriesAreRefused) {
  EXPECT_FALSE(parse_ranks_query({{"step", "-1"}}));
  EXPECT_FALSE(parse_ranks_query({{"step", "x"}}));
  EXPECT_FALSE(parse_ranks_query({{"metric", "nope"}}));
  EXPECT_TRUE(parse_ranks_query({{"step", "12"}, {"metric", "act_std"}}));
  EXPECT_FALSE(parse_overview_query({{"tables", "1.2"}}));
  EXPECT_FALSE(parse_overview_query({{"tables", "1.2.3,"}}));
  EXPECT_FALSE(parse_overview_query({{"tables", "1.-2.3"}}));
  std::string many;
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string("0.") + std::to_string(i) + ".1";
  EXPECT_FALSE(parse_overview_query({{"tables", many}}));
  EXPECT_TRUE(parse_overview_query({{"tables", "0.0.1"}}));
  // No table at all: an answer without ranks.
  SummaryTables none((root_ / "missing").string());
  none.refresh();
  const nlohmann::json o = ranks_overview({&none}, RanksQuery{});
  EXPECT_TRUE(o["ranks"].empty());
  EXPECT_TRUE(o["step"].is_null());
}

}  // namespace
}  // namespace tensorscope::view
