#include "stream_gate.h"

#include <vector>

#include "pacer.h"

namespace tensorscope {

StreamGate::StreamGate(int64_t every_n, double max_hz)
    : every_n_(every_n < 1 ? 1 : every_n),
      min_interval_(max_hz > 0 ? std::chrono::nanoseconds(static_cast<int64_t>(1e9 / max_hz))
                               : std::chrono::nanoseconds(0)) {}

StreamGate::State& StreamGate::state_of(const std::string& name) {
  auto it = streams_.find(std::string_view(name));
  if (it == streams_.end()) {
    it = streams_.emplace(name, State{}).first;
    it->second.ordinal = static_cast<uint32_t>(streams_.size() - 1);
    it->second.stride16 = fitted_for_;  // until the next fit knows its calls
  }
  return it->second;
}

bool StreamGate::paced_out(State& state, uint32_t stride16) {
  state.recent += 16;  // in sixteenths: a stream called once a while keeps its count when halved
  ++recent_;
  if (stride16 <= 16) {
    fitted_for_ = 16;
    if (recent_ >= (uint64_t{1} << 20)) refit(16);  // keeps the counts of recent calls recent
    ++state.offered;
    return false;
  }
  // Fitted again when the pacer's stride changes, and as the streams' calls come in.
  if (stride16 != fitted_for_ || recent_ >= 64 + 8 * streams_.size()) refit(stride16);
  return ((state.offered++ + state.ordinal) * 16) % state.stride16 >= 16;
}

void StreamGate::refit(uint32_t stride16) {
  std::vector<uint64_t> offered;
  offered.reserve(streams_.size());
  for (const auto& [name, st] : streams_) offered.push_back(st.recent);
  const std::vector<uint32_t> strides = fair_stride16s(offered, stride16);
  size_t i = 0;
  for (auto& [name, st] : streams_) {
    st.stride16 = strides[i++];
    st.recent /= 2;  // older calls count half: the demand follows the training's changes
  }
  fitted_for_ = stride16;
  recent_ /= 2;
}

StreamGate::Admission StreamGate::admit(const std::string& name, uint32_t stride16) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& state = state_of(name);
  const int64_t call = state.calls++;
  if (call % every_n_ != 0) return {false, state.render_hint};
  std::chrono::steady_clock::time_point now{};
  if (min_interval_.count() > 0) {
    now = std::chrono::steady_clock::now();
    if (state.last_admitted.time_since_epoch().count() != 0 && now - state.last_admitted < min_interval_) {
      return {false, state.render_hint};
    }
  }
  if (paced_out(state, stride16)) return {false, state.render_hint, true};
  if (min_interval_.count() > 0) state.last_admitted = now;
  return {true, state.render_hint};
}

StreamGate::Admission StreamGate::pace(const std::string& name, uint32_t stride16) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& state = state_of(name);
  if (paced_out(state, stride16)) return {false, state.render_hint, true};
  return {true, state.render_hint};
}

void StreamGate::set_render_hint(const std::string& name, uint8_t hint) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_of(name).render_hint = hint;
}

uint8_t StreamGate::render_hint(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(std::string_view(name));
  return it == streams_.end() ? 0 : it->second.render_hint;
}

}  // namespace tensorscope
