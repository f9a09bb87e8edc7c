// WholeTables (view/src/whole_tables.h): the parts of a sharded gradient in the tables of
// two nodes' sessions make the whole tensor's heatmap, as the tables grow; an earlier run
// of the same command in the same parent is a job of its own, never mixed in; the ranks'
// tables say how many of their tensors are parts.
#include "whole_tables.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "tensorscope/recording/summary_table.h"
#include "temp_dir.h"

namespace tensorscope::view {
namespace {

class WholeTablesTest : public ::testing::Test {
 protected:
  std::string session(const std::string& name) { return root_.path() + "/" + name; }

  // Rank `rank` of a 4-rank job (its rendezvous registered at `registered`): its run_info,
  // and steps [from, to) of its part (S0@rank/4) of gradient "net.w.grad" of 8 elements,
  // the part's values {value(step, rank, 0), value(step, rank, 1)}.
  void write_rank(const std::string& dir, int rank, int64_t registered, int from, int to, double scale = 1) {
    ::mkdir(dir.c_str(), 0700);
    ::mkdir((dir + "/run_info").c_str(), 0700);
    ::mkdir((dir + "/summaries").c_str(), 0700);
    const int64_t pid = 100 + rank;
    const nlohmann::json info = {{"registered_unix_ms", registered},
                                 {"env", {{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "4"}}}};
    std::ofstream(dir + "/run_info/rank" + std::to_string(rank) + "_pid" + std::to_string(pid) + ".json")
        << info.dump();
    std::ofstream out(recording::summary_table_path(dir, rank, pid), std::ios::app);
    if (from == 0) out << recording::kSummaryTableHeader << "\n";
    for (int step = from; step < to; ++step) {
      TensorSummary g;
      g.name = "net.w.grad";
      g.kind = wire::TensorKind::kGradient;
      g.numel = 2;
      const double a = scale * value(step, rank, 0), b = scale * value(step, rank, 1);
      g.l2 = std::sqrt(a * a + b * b);
      g.max_abs = std::max(std::fabs(a), std::fabs(b));
      g.mean = (a + b) / 2;
      g.std = std::fabs(a - b) / 2;
      g.shard.whole_numel = 8;
      g.shard.dims = {{MeshPlacement::kShard, 0, static_cast<uint32_t>(rank), 4}};
      out << recording::summary_table_lines(step, rank, "net", {g});
    }
  }
  static double value(int step, int rank, int i) { return 1.0 + step + 0.5 * rank - i; }
  static double whole_l2(int step, double scale = 1) {
    double squares = 0;
    for (int rank = 0; rank < 4; ++rank) {
      for (int i = 0; i < 2; ++i) squares += std::pow(scale * value(step, rank, i), 2);
    }
    return std::sqrt(squares);
  }

  testing::TempDir root_{"whole-tables"};
};

TEST_F(WholeTablesTest, TheWholeGradientOfTwoNodesPartsAsTheTablesGrowAndNotAnEarlierRuns) {
  // The earlier run (4 ranks on one node, 10x the values); the run: ranks 0, 1 on node0, 2, 3
  // on node1, rank 3 behind.
  for (int rank = 0; rank < 4; ++rank) write_rank(session("earlier"), rank, 1000 + rank, 0, 5, 10.0);
  for (int rank = 0; rank < 4; ++rank)
    write_rank(session(rank < 2 ? "node0" : "node1"), rank, 9000 + rank, 0, rank == 3 ? 2 : 3);
  SummaryTables earlier(session("earlier")), node0(session("node0")), node1(session("node1"));
  WholeTables whole;
  whole.refresh({&earlier, &node0, &node1});
  const size_t grad_norm = static_cast<size_t>(recording::overview_metric_index("grad_norm"));
  nlohmann::json o = whole.overview(grad_norm, 100);
  ASSERT_EQ(o.size(), 2u) << o.dump();
  // (jobs in the order their first process registered: the earlier run first)
  EXPECT_EQ(o[0]["ranks"], (nlohmann::json{0, 1, 2, 3}));
  EXPECT_EQ(o[0]["rows"], (nlohmann::json{"net.w.grad"}));
  ASSERT_EQ(o[0]["first_steps"].size(), 5u);
  for (int step = 0; step < 5; ++step) {
    EXPECT_NEAR(o[0]["values"][0][step].get<double>(), whole_l2(step, 10.0), whole_l2(step, 10.0) * 1e-3) << step;
  }
  ASSERT_EQ(o[1]["first_steps"], (nlohmann::json{0, 1})) << o[1].dump();  // step 2: rank 3's part not in
  for (int step = 0; step < 2; ++step) {
    EXPECT_NEAR(o[1]["values"][0][step].get<double>(), whole_l2(step), whole_l2(step) * 1e-3) << step;
  }
  EXPECT_EQ(o[1]["left_out"]["incomplete"], 1);
  EXPECT_EQ(o[1]["left_out"]["conflicting"], 0);
  EXPECT_EQ(o[0]["left_out"]["conflicting"], 0);

  // The run goes on: rank 3 catches up, every rank writes steps to 6.
  for (int rank = 0; rank < 4; ++rank) {
    write_rank(session(rank < 2 ? "node0" : "node1"), rank, 9000 + rank, rank == 3 ? 2 : 3, 6);
  }
  whole.refresh({&earlier, &node0, &node1});
  o = whole.overview(grad_norm, 100);
  ASSERT_EQ(o[1]["first_steps"].size(), 6u);
  EXPECT_NEAR(o[1]["values"][0][5].get<double>(), whole_l2(5), whole_l2(5) * 1e-3);
  EXPECT_EQ(o[1]["left_out"]["incomplete"], 0);
  // Each rank's own table says its tensor is a part.
  const nlohmann::json ranks = node1.overview(grad_norm, 100);
  ASSERT_EQ(ranks["tables"].size(), 2u);
  EXPECT_EQ(ranks["tables"][0]["shards"], 1);
  // Another metric without whole rows: none.
  EXPECT_TRUE(whole.overview(static_cast<size_t>(recording::overview_metric_index("underflow")), 100).empty());
}

}  // namespace
}  // namespace tensorscope::view
