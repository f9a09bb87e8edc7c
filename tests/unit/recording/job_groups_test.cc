// JobGroups and group_producers (recording/job_groups.h): the ranks of one job on two
// nodes (two session folders) are one job; a later run of the same command, with the
// same rendezvous, is another; a process without a run_info is a job of its folder.
#include "tensorscope/recording/job_groups.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "temp_dir.h"

namespace tensorscope::recording {
namespace {

// Writes <session>/run_info/rank<r>_pid<p>.json as the daemon does (the fields read).
void write_run_info(const std::string& session, int rank, int64_t pid, const std::string& port, int64_t registered) {
  ::mkdir(session.c_str(), 0700);
  ::mkdir((session + "/run_info").c_str(), 0700);
  const nlohmann::json info = {
      {"registered_unix_ms", registered},
      {"env", {{"MASTER_ADDR", "node0"}, {"MASTER_PORT", port}, {"WORLD_SIZE", "4"}, {"RANK", std::to_string(rank)}}}};
  std::ofstream(session + "/run_info/rank" + std::to_string(rank) + "_pid" + std::to_string(pid) + ".json")
      << info.dump();
}

TEST(JobGroups, TheKeyIsTheRendezvousNotTheRank) {
  const nlohmann::json a = {{"env", {{"MASTER_ADDR", "n0"}, {"MASTER_PORT", "29500"}, {"RANK", "3"}}}};
  const nlohmann::json b = {{"env", {{"MASTER_ADDR", "n0"}, {"MASTER_PORT", "29500"}, {"RANK", "1"}}}};
  EXPECT_EQ(job_key(a), "MASTER_ADDR=n0;MASTER_PORT=29500");
  EXPECT_EQ(job_key(a), job_key(b));
  EXPECT_EQ(job_key(nlohmann::json::object()), "");
  EXPECT_EQ(job_key(nlohmann::json{{"env", "not an object"}}), "");
}

TEST(JobGroups, TwoNodesAreOneJobAndALaterRunOfTheSameCommandAnother) {
  testing::TempDir root("job-groups");
  const std::string node0 = root.path() + "/node0", node1 = root.path() + "/node1";
  const std::string earlier = root.path() + "/earlier", loose = root.path() + "/loose";
  // The earlier run: 4 ranks on one node at t=1000; the run: ranks 0, 1 on node0 and 2, 3
  // on node1 at t=9000 (registered in another order than listed).
  for (int rank = 0; rank < 4; ++rank) write_run_info(earlier, rank, 10 + rank, "29500", 1000 + rank);
  write_run_info(node0, 0, 20, "29500", 9003);
  write_run_info(node0, 1, 21, "29500", 9000);
  write_run_info(node1, 2, 30, "29500", 9002);
  write_run_info(node1, 3, 31, "29500", 9001);
  ::mkdir(loose.c_str(), 0700);
  const std::vector<std::tuple<std::string, int, int64_t>> producers = {
      {node0, 0, 20},   {node0, 1, 21},   {node1, 2, 30},   {node1, 3, 31}, {earlier, 0, 10},
      {earlier, 1, 11}, {earlier, 2, 12}, {earlier, 3, 13}, {loose, 0, 40}, {loose, 1, 41}};
  JobGroups groups;
  const std::vector<size_t> job = group_producers(producers, &groups);
  ASSERT_EQ(job.size(), producers.size());
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(job[i], job[0]) << i;  // the two nodes
  for (size_t i = 5; i < 8; ++i) EXPECT_EQ(job[i], job[4]) << i;  // the earlier run
  EXPECT_NE(job[0], job[4]);
  EXPECT_EQ(job[9], job[8]);  // no run_info: their folder's
  EXPECT_NE(job[8], job[0]);
  EXPECT_NE(job[8], job[4]);
  EXPECT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups.ranks(job[0]), (std::set<int>{0, 1, 2, 3}));
  // A process that registers later with a rank already in the newest job: a restart.
  EXPECT_NE(groups.assign(read_producer_job(node0, 0, 20).key, 0), job[0]);
}

}  // namespace
}  // namespace tensorscope::recording
