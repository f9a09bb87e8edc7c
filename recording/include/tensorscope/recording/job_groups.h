// job_groups.h — which training processes are one job. The ranks of a run on many nodes
// write to several session folders (a daemon per node), and a parent folder may also hold
// earlier runs of the same command. What merges rows across processes (the shards of a
// DTensor: shard_merge.h) merges only within a job.
//
// A process's job comes from its run_info (<session>/run_info/rank<r>_pid<p>.json, which
// the daemon writes at registration): the rendezvous its launcher gave it
// (kJobEnvironment: TORCHELASTIC_RUN_ID, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, the Slurm
// job and step). Two jobs with one rendezvous cannot run at once (its port is taken), so
// the processes of one rendezvous, taken in the order they registered, start a new job
// where a rank repeats: a later run of the same command, or an elastic restart. A process
// without a run_info is a job of its session folder alone.
//
// Used by the live view (view/src/whole_tables.h) and tensorscope.read_summaries (through
// the extension). Thread safety: read_producer_job and job_key are reentrant; JobGroups
// has none (one per reader).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace tensorscope::recording {

// The run_info environment variables that name a job's rendezvous.
inline constexpr std::array<const char*, 6> kJobEnvironment = {"TORCHELASTIC_RUN_ID", "MASTER_ADDR",  "MASTER_PORT",
                                                               "WORLD_SIZE",          "SLURM_JOB_ID", "SLURM_STEP_ID"};

// The rendezvous of a run_info document ("NAME=value;..." of kJobEnvironment, those it
// has); "" when it has none.
std::string job_key(const nlohmann::json& run_info);

struct ProducerJob {
  std::string key;            // job_key, or "session:<dir>" without a run_info
  int64_t registered_ms = 0;  // when the daemon registered it (INT64_MAX: unknown)
};
// The job of the process (rank, pid) that wrote into `session_dir`.
ProducerJob read_producer_job(const std::string& session_dir, int rank, int64_t pid);

class JobGroups {
 public:
  // The job of a process of rendezvous `key` and `rank`: processes must come in the order
  // they registered (sort a batch found together by registered_ms first).
  size_t assign(const std::string& key, int rank);
  size_t size() const { return jobs_.size(); }
  // The ranks of job `job`, lowest first.
  const std::set<int>& ranks(size_t job) const { return jobs_[job].ranks; }

 private:
  struct Job {
    std::set<int> ranks;
  };
  std::vector<Job> jobs_;
  std::map<std::string, size_t> newest_;  // rendezvous -> its newest job
};

// The jobs of processes (session folder, rank, pid), in their order: read_producer_job,
// taken in order of registration. Returns one job id per process and fills `groups`.
std::vector<size_t> group_producers(const std::vector<std::tuple<std::string, int, int64_t>>& producers,
                                    JobGroups* groups);

}  // namespace tensorscope::recording
