// anomaly_firsts.h — the first report of each anomaly type in a session's anomaly
// reports (anomalies.jsonl, as the daemon's workers write them: {"type", "step", "rank",
// "stream", "message", "details", ...}): of each type, the earliest: the earliest step,
// then the earliest in that step's forward order (details.order: the tensor's place in
// its record), then the lowest rank. What `tensorscope status` and the live page's banner
// name first, over every session the viewer shows (several nodes' included).
//
// Used by the daemon's supervisor (anomaly_log.h) and the viewer (summary_tables.h).
// Thread safety: a value type; one thread at a time.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tensorscope::recording {

// The types the workers report, in the order they are named (anomaly_detector.h; the
// first divergence from a reference run: divergence_watch.h).
inline constexpr const char* kAnomalyTypes[] = {"non_finite", "explosion", "dead_units", "divergence"};

// Whether `a` has what every report has: a string "type", integer "step" and "rank".
bool is_anomaly_report(const nlohmann::json& a);
// Whether report `a` came before report `b` (both is_anomaly_report): by step, then
// forward order, then rank.
bool earlier_anomaly(const nlohmann::json& a, const nlohmann::json& b);

class AnomalyFirsts {
 public:
  // Notes one report; one that is not is_anomaly_report is ignored.
  void note(const nlohmann::json& a);
  // {type: its first report}, each type seen once at least.
  const nlohmann::json& all() const { return firsts_; }
  // The first report of `type`; null when none.
  nlohmann::json of(const std::string& type) const;

 private:
  nlohmann::json firsts_ = nlohmann::json::object();
};

}  // namespace tensorscope::recording
