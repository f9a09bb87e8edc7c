// output_budget.cc — see output_budget.h.
#include "supervisor/output_budget.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace tensorscope::daemon {

BudgetPlan plan_output_budget(std::vector<BudgetVideo> videos, uint64_t used, uint64_t budget,
                              const std::vector<AnomalyMark>& anomalies, int64_t evidence_steps) {
  BudgetPlan plan;
  if (budget == 0 || used <= budget) return plan;
  const uint64_t goal = budget - budget / 10;
  // Each stream's newest video stays.
  using Key = std::tuple<std::string, std::string, int, std::string, int64_t>;
  std::map<Key, const recording::IndexEntry*> newest;
  for (const BudgetVideo& v : videos) {
    const recording::IndexEntry& e = v.entry;
    const Key key{e.stream, e.device, e.rank, e.mode, e.pid};
    auto [at, first] = newest.try_emplace(key, &e);
    if (!first &&
        std::tie(e.last_step, e.first_step, e.path) >
            std::tie(at->second->last_step, at->second->first_step, at->second->path)) {
      at->second = &e;
    }
  }
  auto evidence = [&](const recording::IndexEntry& e) {
    return std::any_of(anomalies.begin(), anomalies.end(), [&](const AnomalyMark& a) {
      return a.rank == e.rank && (a.pid == e.pid || a.pid == 0 || e.pid == 0) &&
          a.step >= e.first_step - evidence_steps && a.step <= e.last_step + evidence_steps;
    });
  };
  std::vector<const BudgetVideo*> order;
  for (const BudgetVideo& v : videos) {
    const recording::IndexEntry& e = v.entry;
    if (newest[Key{e.stream, e.device, e.rank, e.mode, e.pid}] == &e || evidence(e)) continue;
    order.push_back(&v);
  }
  std::sort(order.begin(), order.end(), [](const BudgetVideo* a, const BudgetVideo* b) {
    return std::tie(a->entry.last_step, a->entry.first_step, a->entry.path) <
        std::tie(b->entry.last_step, b->entry.first_step, b->entry.path);
  });
  uint64_t left = used;
  for (const BudgetVideo* v : order) {
    if (left <= goal) break;
    plan.remove.push_back(v->entry.path);
    plan.freed += v->bytes;
    left -= std::min(left, v->bytes);
  }
  plan.still_over = left > budget;
  return plan;
}

namespace {

void measure(const std::string& dir, int depth, const std::string& part, SessionUsage* usage) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (usage->files >= kMaxMeasuredFiles) {
      usage->cut_short = true;
      break;
    }
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < 8) measure(path, depth + 1, depth == 0 ? name : part, usage);
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    ++usage->files;
    const auto bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    usage->total += bytes;
    const bool video = depth == 0 ? name.size() > 4 && name.compare(name.size() - 4, 4, ".mp4") == 0 : part == "steps";
    if (video) {
      usage->videos += bytes;
    } else if (part == "summaries") {
      usage->summaries += bytes;
    } else if (part == "dumps" || part == "hdf5" || part == "stats") {
      usage->recordings += bytes;
    } else {
      usage->other += bytes;
    }
  }
  ::closedir(d);
}

}  // namespace

SessionUsage measure_session(const std::string& session_dir) {
  SessionUsage usage;
  measure(session_dir, 0, "", &usage);
  return usage;
}

}  // namespace tensorscope::daemon
