// anomaly_firsts.cc — see anomaly_firsts.h.
#include "tensorscope/recording/anomaly_firsts.h"

#include <cstdint>

namespace tensorscope::recording {

bool is_anomaly_report(const nlohmann::json& a) {
  return a.is_object() && a.contains("type") && a["type"].is_string() && a.contains("step") &&
      a["step"].is_number_integer() && a.contains("rank") && a["rank"].is_number_integer();
}

namespace {

// A report's place in its step's forward order (details.order); after every placed one
// when it has none (a report written before the detector gave it).
int64_t order_of(const nlohmann::json& a) {
  const auto details = a.find("details");
  if (details == a.end() || !details->is_object()) return INT64_MAX;
  const auto order = details->find("order");
  return order != details->end() && order->is_number_integer() ? order->get<int64_t>() : INT64_MAX;
}

}  // namespace

bool earlier_anomaly(const nlohmann::json& a, const nlohmann::json& b) {
  const int64_t sa = a["step"].get<int64_t>(), sb = b["step"].get<int64_t>();
  if (sa != sb) return sa < sb;
  const int64_t oa = order_of(a), ob = order_of(b);
  if (oa != ob) return oa < ob;
  return a["rank"].get<int64_t>() < b["rank"].get<int64_t>();
}

void AnomalyFirsts::note(const nlohmann::json& a) {
  if (!is_anomaly_report(a)) return;
  const std::string type = a["type"].get<std::string>();
  auto it = firsts_.find(type);
  if (it == firsts_.end()) {
    firsts_[type] = a;
    return;
  }
  if (earlier_anomaly(a, *it)) *it = a;
}

nlohmann::json AnomalyFirsts::of(const std::string& type) const {
  auto it = firsts_.find(type);
  return it != firsts_.end() ? *it : nlohmann::json();
}

}  // namespace tensorscope::recording
