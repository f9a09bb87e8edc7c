// anomaly_log.cc — see anomaly_log.h.
#include "supervisor/anomaly_log.h"

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {
namespace {

bool well_formed(const nlohmann::json& a) {
  return a.is_object() && a.contains("type") && a["type"].is_string() && a.contains("step") &&
      a["step"].is_number_integer() && a.contains("rank") && a["rank"].is_number_integer() && a.contains("message") &&
      a["message"].is_string();
}

}  // namespace

void AnomalyLog::add(const nlohmann::json& anomaly) {
  if (!well_formed(anomaly)) {
    TS_LOG_WARN("a worker sent a malformed anomaly; dropped");
    return;
  }
  ++count_;
  TS_LOG_WARN("anomaly: {}", anomaly["message"].get<std::string>());
  if (anomaly["type"] == "non_finite") {
    const auto earlier = [&](const nlohmann::json& b) {
      return anomaly["step"].get<int64_t>() < b["step"].get<int64_t>() ||
          (anomaly["step"] == b["step"] && anomaly["rank"].get<int64_t>() < b["rank"].get<int64_t>());
    };
    if (first_non_finite_.is_null() || earlier(first_non_finite_)) first_non_finite_ = anomaly;
  }
  if (kept_.size() < kKept) kept_.push_back(anomaly);
  if (!file_) {
    auto file = recording::AppendFile::open(path(), kAnomalyLogHeader, "anomaly log");
    if (file) {
      file_.emplace(std::move(*file));
    } else if (!file_failed_) {
      file_failed_ = true;
      TS_LOG_ERROR("cannot write the anomaly log: {}", file.message());
    }
  }
  if (file_) {
    if (Status st = file_->append(anomaly.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        !st && !file_failed_) {
      file_failed_ = true;
      TS_LOG_ERROR("{}", st.message());
    }
  }
}

nlohmann::json AnomalyLog::status() const {
  nlohmann::json recent = nlohmann::json::array();
  const size_t from = kept_.size() > 20 ? kept_.size() - 20 : 0;
  for (size_t i = from; i < kept_.size(); ++i) recent.push_back(kept_[i]);
  return {{"count", count_}, {"first_non_finite", first_non_finite_}, {"recent", recent}};
}

}  // namespace tensorscope::daemon
