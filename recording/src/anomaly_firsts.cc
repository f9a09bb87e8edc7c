// anomaly_firsts.cc — see anomaly_firsts.h.
#include "tensorscope/recording/anomaly_firsts.h"

namespace tensorscope::recording {

bool is_anomaly_report(const nlohmann::json& a) {
  return a.is_object() && a.contains("type") && a["type"].is_string() && a.contains("step") &&
      a["step"].is_number_integer() && a.contains("rank") && a["rank"].is_number_integer();
}

void AnomalyFirsts::note(const nlohmann::json& a) {
  if (!is_anomaly_report(a)) return;
  const std::string type = a["type"].get<std::string>();
  auto it = firsts_.find(type);
  if (it == firsts_.end()) {
    firsts_[type] = a;
    return;
  }
  const int64_t step = a["step"].get<int64_t>(), first_step = (*it)["step"].get<int64_t>();
  if (step < first_step || (step == first_step && a["rank"].get<int64_t>() < (*it)["rank"].get<int64_t>())) *it = a;
}

nlohmann::json AnomalyFirsts::of(const std::string& type) const {
  auto it = firsts_.find(type);
  return it != firsts_.end() ? *it : nlohmann::json();
}

}  // namespace tensorscope::recording
