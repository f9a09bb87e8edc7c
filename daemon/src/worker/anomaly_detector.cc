// anomaly_detector.cc — see anomaly_detector.h.
#include "worker/anomaly_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tensorscope::daemon {
namespace {

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4g", v);
  return buffer;
}

double median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  return values[mid];
}

}  // namespace

nlohmann::json Anomaly::to_json() const {
  return {{"type", type},     {"step", step}, {"rank", rank},       {"pid", pid},        {"track", track},
          {"stream", stream}, {"kind", kind}, {"message", message}, {"details", details}};
}

Anomaly AnomalyDetector::base(const char* type, const std::string& track, int64_t step, int rank, int64_t pid,
                              const TensorSummary& s) const {
  Anomaly a;
  a.type = type;
  a.step = step;
  a.rank = rank;
  a.pid = pid;
  a.track = track;
  a.stream = s.name;
  a.kind = wire::tensor_kind_name(s.kind);
  return a;
}

std::vector<Anomaly> AnomalyDetector::observe(const std::string& track, int64_t step, int rank, int64_t pid,
                                              const std::vector<TensorSummary>& entries) {
  std::vector<Anomaly> out;
  if (!non_finite_reported_) {
    const auto first = std::find_if(entries.begin(), entries.end(), [](const TensorSummary& s) { return !s.finite(); });
    if (first != entries.end()) {
      non_finite_reported_ = true;
      const auto others = std::count_if(first + 1, entries.end(), [](const TensorSummary& s) { return !s.finite(); });
      Anomaly a = base("non_finite", track, step, rank, pid, *first);
      a.message = "first non-finite value: step " + std::to_string(step) + ", rank " + std::to_string(rank) + ", " +
          first->name + " (" + a.kind + ") has " + std::to_string(first->nan_count) + " NaN and " +
          std::to_string(first->inf_count) + " Inf of " + std::to_string(first->numel) + " values" +
          (others > 0 ? "; " + std::to_string(others) + " later tensor(s) of that step too" : "");
      a.details = {{"nan", first->nan_count},
                   {"inf", first->inf_count},
                   {"numel", first->numel},
                   {"later_non_finite", others},
                   {"order", first - entries.begin()}};
      out.push_back(std::move(a));
    }
  }
  for (size_t order = 0; order < entries.size(); ++order) {
    const TensorSummary& s = entries[order];
    auto it = streams_.find(s.name);
    if (it == streams_.end()) {
      if (streams_.size() >= kMaxStreams) continue;
      it = streams_.emplace(s.name, Stream{}).first;
    }
    const Anomaly proto = base("", track, step, rank, pid, s);
    const size_t before = out.size();
    check_explosion(it->second, s, proto, &out);
    check_dead(it->second, s, proto, &out);
    for (size_t k = before; k < out.size(); ++k) out[k].details["order"] = order;
  }
  return out;
}

void AnomalyDetector::check_explosion(Stream& st, const TensorSummary& s, Anomaly proto, std::vector<Anomaly>* out) {
  if (!std::isfinite(s.l2)) return;
  const auto window = static_cast<size_t>(config_.explosion_window);
  const double rms = s.numel > 0 ? s.l2 / std::sqrt(static_cast<double>(s.numel)) : 0;
  const bool baseline = st.norms.size() >= std::max<size_t>(2, window / 2);
  const double typical =
      !st.exploded && st.norms.size() >= 2 ? median(std::vector<double>(st.norms.begin(), st.norms.end())) : 0;
  const bool above = typical > 0 && s.l2 > config_.explosion_factor * typical;
  // A level reached while the baseline was still short is not reported once it is long
  // enough (at a step that is not the one it rose at); a fall under the limit ends it.
  st.early_high = baseline ? st.early_high && above : above;
  if (!st.exploded && baseline && above && !st.early_high && rms >= config_.explosion_min_rms) {
    st.exploded = true;
    proto.type = "explosion";
    proto.message = "explosion: step " + std::to_string(proto.step) + ", rank " + std::to_string(proto.rank) + ", " +
        s.name + " (" + proto.kind + ") has L2 norm " + number(s.l2) + ", " + number(s.l2 / typical) + "x the median " +
        number(typical) + " of its last " + std::to_string(st.norms.size()) + " summarised steps (RMS " + number(rms) +
        ")";
    proto.details = {
        {"l2", s.l2}, {"median", typical}, {"ratio", s.l2 / typical}, {"window", st.norms.size()}, {"rms", rms}};
    out->push_back(std::move(proto));
  }
  st.norms.push_back(s.l2);
  if (st.norms.size() > window) st.norms.pop_front();
}

void AnomalyDetector::check_dead(Stream& st, const TensorSummary& s, Anomaly proto, std::vector<Anomaly>* out) {
  if (s.kind != wire::TensorKind::kActivation || s.numel == 0) return;
  st.dead_run = s.zero_fraction() >= config_.dead_fraction ? st.dead_run + 1 : 0;
  if (st.dead || st.dead_run < config_.dead_steps) return;
  st.dead = true;
  proto.type = "dead_units";
  proto.message = "dead units: " + s.name + " (rank " + std::to_string(proto.rank) + ") has been at least " +
      number(100 * config_.dead_fraction) + "% exact zeros for " + std::to_string(st.dead_run) +
      " summarised steps in a row, up to step " + std::to_string(proto.step);
  proto.details = {{"zero_fraction", s.zero_fraction()}, {"steps", st.dead_run}};
  out->push_back(std::move(proto));
}

}  // namespace tensorscope::daemon
