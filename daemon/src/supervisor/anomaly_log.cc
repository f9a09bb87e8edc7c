// anomaly_log.cc — see anomaly_log.h.
#include "supervisor/anomaly_log.h"

#include <chrono>

#include <string_view>

#include "tensorscope/base/logging.h"
#include "tensorscope/recording/tensorboard_export.h"
#include "tensorscope/base/text_input.h"

namespace tensorscope::daemon {
namespace {

bool well_formed(const nlohmann::json& a) {
  return recording::is_anomaly_report(a) && a.contains("message") && a["message"].is_string();
}

}  // namespace

std::string AnomalyLog::identity(const nlohmann::json& a) {
  if (!well_formed(a)) return {};
  const std::string type = a["type"].get<std::string>();
  std::string id = type + "|" + std::to_string(a["rank"].get<int64_t>()) + "|" +
      (a.contains("pid") && a["pid"].is_number_integer() ? std::to_string(a["pid"].get<int64_t>()) : std::string());
  if (type != "non_finite")
    id += "|" + (a.contains("stream") && a["stream"].is_string() ? a["stream"].get<std::string>() : "");
  return id;
}

bool AnomalyLog::note(const nlohmann::json& anomaly) {
  if (!had_.insert(identity(anomaly)).second) return false;
  ++count_;
  firsts_.note(anomaly);
  if (kept_.size() < kKept) kept_.push_back(anomaly);
  return true;
}

size_t AnomalyLog::read_back() {
  bool missing = false;
  auto text = read_text_tail(path(), kReadBackBytes, "anomaly log", &missing);
  if (!text) {
    TS_LOG_WARN("the anomalies of an earlier daemon of this session are not read back: {}", text.message());
    return 0;
  }
  size_t read = 0;
  std::string_view rest(*text);
  for (size_t nl = rest.find('\n'); nl != std::string_view::npos; nl = rest.find('\n')) {
    const nlohmann::json a = nlohmann::json::parse(rest.substr(0, nl), nullptr, false);
    rest.remove_prefix(nl + 1);
    if (well_formed(a) && note(a)) ++read;  // the header line is not one
  }
  if (read > 0) TS_LOG_INFO("{} anomalies of an earlier daemon of this session read back from {}", read, path());
  return read;
}

void AnomalyLog::add(const nlohmann::json& anomaly) {
  if (!well_formed(anomaly)) {
    TS_LOG_WARN("a worker sent a malformed anomaly; dropped");
    return;
  }
  if (!note(anomaly)) return;  // had already: a detector that started over
  TS_LOG_WARN("anomaly: {}", anomaly["message"].get<std::string>());
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
  if (!export_ || events_failed_) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (!events_) {
    auto made = recording::TensorBoardEvents::create(session_dir_ + "/tensorboard/" + recording::kAnomalyRun, now);
    if (!made) {
      events_failed_ = true;
      TS_LOG_ERROR("no TensorBoard export of the anomalies: {}", made.message());
      return;
    }
    events_.emplace(std::move(*made));
  }
  const std::string text = recording::anomaly_markdown(anomaly, export_->live_url, session_);
  if (Status st =
          events_->append({recording::event_text(now, anomaly["step"].get<int64_t>(), recording::kAnomalyTag, text)});
      !st) {
    events_failed_ = true;
    TS_LOG_ERROR("the TensorBoard export of the anomalies stopped: {}", st.message());
  }
}

void AnomalyLog::link_to_live_page(const std::string& url) {
  if (export_ && export_->live_url.empty()) export_->live_url = url.substr(0, url.find('#'));
}

void AnomalyLog::export_to_tensorboard(const ExportConfig& config, std::string session) {
  if (!config.tensorboard) return;
  export_ = config;
  session_ = std::move(session);
}

nlohmann::json AnomalyLog::status() const {
  nlohmann::json recent = nlohmann::json::array();
  const size_t from = kept_.size() > 20 ? kept_.size() - 20 : 0;
  for (size_t i = from; i < kept_.size(); ++i) recent.push_back(kept_[i]);
  return {
      {"count", count_}, {"first_non_finite", firsts_.of("non_finite")}, {"first", firsts_.all()}, {"recent", recent}};
}

}  // namespace tensorscope::daemon
