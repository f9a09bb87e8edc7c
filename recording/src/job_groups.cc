// job_groups.cc — see job_groups.h.
#include "tensorscope/recording/job_groups.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <tuple>

#include "tensorscope/shared/output_dir.h"

namespace tensorscope::recording {

std::string job_key(const nlohmann::json& run_info) {
  const auto env = run_info.find("env");
  if (!run_info.is_object() || env == run_info.end() || !env->is_object()) return "";
  std::string key;
  for (const char* name : kJobEnvironment) {
    const auto value = env->find(name);
    if (value == env->end() || !value->is_string()) continue;
    if (!key.empty()) key += ';';
    key += std::string(name) + "=" + value->get<std::string>();
  }
  return key;
}

ProducerJob read_producer_job(const std::string& session_dir, int rank, int64_t pid) {
  ProducerJob job{"session:" + session_dir, INT64_MAX};
  std::ifstream in(session_dir + "/" + kRunInfoDirName + "/" + run_info_base_name(rank, static_cast<long>(pid)) +
                   ".json");
  if (!in) return job;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json info = nlohmann::json::parse(text.str(), nullptr, false);
  if (!info.is_object()) return job;
  if (std::string key = job_key(info); !key.empty()) job.key = std::move(key);
  const auto registered = info.find("registered_unix_ms");
  if (registered != info.end() && registered->is_number_integer()) job.registered_ms = registered->get<int64_t>();
  return job;
}

size_t JobGroups::assign(const std::string& key, int rank) {
  const auto newest = newest_.find(key);
  if (newest != newest_.end() && jobs_[newest->second].ranks.insert(rank).second) return newest->second;
  jobs_.push_back(Job{{rank}});
  newest_[key] = jobs_.size() - 1;
  return jobs_.size() - 1;
}

std::vector<size_t> group_producers(const std::vector<std::tuple<std::string, int, int64_t>>& producers,
                                    JobGroups* groups) {
  std::vector<ProducerJob> jobs;
  for (const auto& [dir, rank, pid] : producers) jobs.push_back(read_producer_job(dir, rank, pid));
  std::vector<size_t> order(producers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&jobs](size_t a, size_t b) { return jobs[a].registered_ms < jobs[b].registered_ms; });
  std::vector<size_t> out(producers.size());
  for (size_t i : order) out[i] = groups->assign(jobs[i].key, std::get<1>(producers[i]));
  return out;
}

}  // namespace tensorscope::recording
