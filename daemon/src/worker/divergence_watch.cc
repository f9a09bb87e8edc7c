// divergence_watch.cc — see divergence_watch.h.
#include "worker/divergence_watch.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

#include "tensorscope/base/logging.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/output_dir.h"

namespace tensorscope::daemon {
namespace {

using recording::DiffTolerance;
using recording::ReferenceTable;

constexpr size_t kMaxCachedStreams = 65536;

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

DiffTolerance looser(const DiffTolerance& a, const DiffTolerance& b) {
  return {std::max(a.rtol, b.rtol), std::max(a.atol, b.atol)};
}

std::string host_name() {
  char host[256] = {};
  return ::gethostname(host, sizeof(host) - 1) == 0 ? std::string(host) : std::string();
}

// step + n, saturated (steps come from the producer: any int64).
int64_t later(int64_t step, int64_t n) {
  if (n > 0 && step > INT64_MAX - n) return INT64_MAX;
  if (n < 0 && step < INT64_MIN - n) return INT64_MIN;
  return step + n;
}

int64_t mtime_ms(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return INT64_MIN;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

int64_t wall_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The size of `r` as it waits (its summaries and their names).
uint64_t record_bytes(const std::string& track, const std::vector<TensorSummary>& entries) {
  uint64_t bytes = track.size() + 64;
  for (const TensorSummary& s : entries) bytes += sizeof(TensorSummary) + s.name.size();
  return bytes;
}

}  // namespace

DivergenceWatch::DivergenceWatch(std::string reference, int rank, int64_t pid, const ReferenceConfig& config,
                                 bool reported)
    : reference_(std::move(reference)),
      rank_(rank),
      pid_(pid),
      rules_(config.tolerances),
      pending_limit_(static_cast<uint64_t>(config.pending_mb) << 20),
      reported_(reported) {}

bool DivergenceWatch::reference_ended(int64_t now_ms) {
  if (gone_) return true;
  if (ended_checked_ && now_ms - ended_checked_ms_ < kLookEveryMs) return ended_;
  ended_checked_ = true;
  ended_checked_ms_ = now_ms;
  if (!table_) {
    // No table of this rank: a reference without it, once it had time to start one.
    ended_ = now_ms - first_seen_ms_ > kQuietMs;
  } else if (same_host_ && reference_pid_ > 0 && ::kill(static_cast<pid_t>(reference_pid_), 0) != 0 && errno == ESRCH) {
    ended_ = gone_ = true;  // its process is gone: the table has all it will ever have
  } else {
    ended_ = wall_ms() - mtime_ms(table_->path()) > kQuietMs;  // quiet for a while (it may go on)
  }
  return ended_;
}

bool DivergenceWatch::settled(int64_t step, const std::string& track, int64_t now_ms) {
  if (!table_ && now_ms >= next_look_ms_) {
    next_look_ms_ = now_ms + kLookEveryMs;
    const std::string path = recording::reference_table_for_rank(reference_, rank_);
    if (!path.empty()) {
      table_ = std::make_unique<ReferenceTable>(path);
      const size_t slash = path.rfind('/');
      int rank = -1;
      recording::parse_summary_table_name(path.substr(slash + 1), &rank, &reference_pid_);
      // summaries/<table> -> the session's run_info/<same name>.json says where it ran.
      const std::string session = path.substr(0, path.rfind('/', slash - 1));
      bool missing = false;
      const auto info = read_text_file(session + "/" + kRunInfoDirName + "/" +
                                           run_info_base_name(rank_, static_cast<long>(reference_pid_)) + ".json",
                                       1 << 20, "run info", &missing);
      const nlohmann::json j = info ? nlohmann::json::parse(*info, nullptr, false) : nlohmann::json();
      const std::string here = host_name();
      same_host_ = !here.empty() && j.is_object() && j.value("hostname", std::string()) == here;
      ended_checked_ = false;  // judged again, by its table now
      TS_LOG_INFO("rank {} (pid {}) is compared with the reference's table {}", rank_, pid_, path);
    }
  }
  if (!table_) return reference_ended(now_ms);
  if (table_->last_step() <= later(step, kStepSlack)) {
    const int64_t keep_from = later(std::min(step, latest_step_), -kStepSlack);
    if (Status st = table_->read(keep_from, later(step, kStepSlack)); !st) {
      if (table_error_ != st.message()) TS_LOG_WARN("reference of rank {}: {}", rank_, st.message());
      table_error_ = st.message();
      return reference_ended(now_ms);
    }
    table_error_.clear();
  }
  return table_->last_step(track) > later(step, kTrackSlack) || table_->last_step() > later(step, kStepSlack) ||
      (table_->at_end() && reference_ended(now_ms));
}

DiffTolerance DivergenceWatch::tolerance_of(const std::string& stream, const DiffTolerance& by_dtype) {
  int rule = -1;
  const auto it = rule_of_.find(stream);
  if (it != rule_of_.end()) {
    rule = it->second;
  } else {
    const ToleranceRule* match = first_match(rules_, stream);
    rule = match == nullptr ? -1 : static_cast<int>(match - rules_.data());
    if (rule_of_.size() < kMaxCachedStreams) rule_of_.emplace(stream, rule);
  }
  if (rule >= 0) return {rules_[static_cast<size_t>(rule)].rtol, rules_[static_cast<size_t>(rule)].atol};
  // Exact types stay exact; a floating one is never tighter than a low-precision
  // tensor's before it.
  return by_dtype.rtol == 0 && by_dtype.atol == 0 ? by_dtype : looser(by_dtype, floor_);
}

void DivergenceWatch::compare(const Record& r, std::vector<Anomaly>* out) {
  const ReferenceTable::Group* group = table_ ? table_->group(r.step, r.track) : nullptr;
  if (group == nullptr) {
    not_in_reference_ += r.entries.size();
    return;
  }
  std::unordered_map<std::string, size_t>& used = used_[{r.step, r.track}];
  bool found = false;  // this record's first divergence, reported here
  uint64_t later = 0;
  for (size_t order = 0; order < r.entries.size(); ++order) {
    const TensorSummary& s = r.entries[order];
    const auto ref = group->find(s.name);
    const size_t occurrence = used[s.name]++;
    if (ref == group->end() || occurrence >= ref->second.size()) {
      ++only_in_run_;
      continue;
    }
    const TensorSummary& a = ref->second[occurrence];
    const DiffTolerance by_dtype = recording::default_tolerance(s.dtype, a.dtype);
    const DiffTolerance tolerance = tolerance_of(s.name, by_dtype);
    if (by_dtype.rtol > 0) floor_ = looser(floor_, by_dtype);
    const recording::SummaryDiff d = recording::diff_summaries(s, a, tolerance);
    ++compared_;
    if (!d.leaves()) continue;
    ++out_of_tolerance_;
    if (!first_divergence_) first_divergence_ = r.step;
    if (found) {
      ++later;
      continue;
    }
    if (reported_) continue;
    reported_ = true;
    Anomaly x;
    x.type = "divergence";
    x.step = r.step;
    x.rank = rank_;
    x.pid = pid_;
    x.track = r.track;
    x.stream = s.name;
    x.kind = wire::tensor_kind_name(s.kind);
    const std::string where =
        "step " + std::to_string(r.step) + ", rank " + std::to_string(rank_) + ", " + s.name + " (" + x.kind + ")";
    if (!d.comparable) {
      x.message = "first divergence from the reference: " + where + " has " + std::to_string(s.numel) +
          " values, the reference's " + std::to_string(a.numel);
    } else {
      const bool count = d.metric == "nan_count" || d.metric == "inf_count" || d.metric == "zero_fraction";
      x.message = "first divergence from the reference: " + where + " " + d.metric + " " + number(d.value) +
          ", the reference's " + number(d.reference) +
          (count ? std::string() : " (" + number(d.relative) + " relative)") + "; tolerance rtol " +
          number(tolerance.rtol) + (tolerance.atol > 0 ? ", atol " + number(tolerance.atol) : std::string()) + " (" +
          wire::dtype_name(s.dtype) + " here, " + wire::dtype_name(a.dtype) + " there)";
    }
    x.details = {{"metric", d.metric},
                 {"value", d.value},
                 {"reference_value", d.reference},
                 {"relative", std::isfinite(d.relative) ? nlohmann::json(d.relative) : nlohmann::json(nullptr)},
                 {"rtol", tolerance.rtol},
                 {"atol", tolerance.atol},
                 {"order", order},
                 {"dtype", wire::dtype_name(s.dtype)},
                 {"reference_dtype", wire::dtype_name(a.dtype)},
                 {"numel", s.numel},
                 {"reference_numel", a.numel},
                 {"reference", reference_},
                 {"reference_table", table_->path()}};
    out->push_back(std::move(x));
    found = true;
  }
  if (found) out->back().details["later_out_of_tolerance"] = later;
}

void DivergenceWatch::forget_before(int64_t step) {
  if (table_) table_->forget_before(step);
  for (auto it = used_.begin(); it != used_.end() && it->first.first < step;) it = used_.erase(it);
}

std::vector<Anomaly> DivergenceWatch::drain(int64_t now_ms, bool ending) {
  std::vector<Anomaly> out;
  while (!pending_.empty()) {
    const Record& r = pending_.front();
    const bool ready = settled(r.step, r.track, now_ms);
    if (!ready && !ending) break;
    if (ready) {
      compare(r, &out);
    } else {
      // The producer ended first: what the reference has of this step is compared (a
      // step it has in full), the rest could not be.
      const ReferenceTable::Group* group = table_ ? table_->group(r.step, r.track) : nullptr;
      if (group != nullptr && table_->last_step() > r.step) {
        compare(r, &out);
      } else {
        not_reached_ += r.entries.size();
      }
    }
    pending_bytes_ -= r.bytes;
    pending_.pop_front();
  }
  forget_before(later(pending_.empty() ? latest_step_ : std::min(latest_step_, pending_.front().step), -kStepSlack));
  return out;
}

std::vector<Anomaly> DivergenceWatch::observe(const std::string& track, int64_t step,
                                              const std::vector<TensorSummary>& entries, int64_t now_ms) {
  if (!seen_) first_seen_ms_ = now_ms;
  seen_ = true;
  latest_step_ = std::max(latest_step_, step);
  const uint64_t bytes = record_bytes(track, entries);
  if (pending_bytes_ + bytes > pending_limit_ && !pending_.empty()) {
    not_compared_full_ += entries.size();
  } else {
    pending_.push_back({track, step, entries, bytes});
    pending_bytes_ += bytes;
  }
  return drain(now_ms, /*ending=*/false);
}

std::vector<Anomaly> DivergenceWatch::poll(int64_t now_ms) {
  return pending_.empty() ? std::vector<Anomaly>() : drain(now_ms, /*ending=*/false);
}

std::vector<Anomaly> DivergenceWatch::finish(int64_t now_ms) { return drain(now_ms, /*ending=*/true); }

nlohmann::json DivergenceWatch::status() const {
  return {{"reference", reference_},
          {"table", table_ ? table_->path() : std::string()},
          {"compared", compared_},
          {"out_of_tolerance", out_of_tolerance_},
          {"first_divergence", first_divergence_ ? nlohmann::json(*first_divergence_) : nlohmann::json(nullptr)},
          {"waiting", pending_.size()},
          {"not_in_reference", not_in_reference_},
          {"only_in_run", only_in_run_},
          {"not_reached", not_reached_},
          {"not_compared_full", not_compared_full_},
          {"reference_step",
           table_ && table_->last_step() != ReferenceTable::kNoStep ? nlohmann::json(table_->last_step())
                                                                    : nlohmann::json(nullptr)}};
}

}  // namespace tensorscope::daemon
