// track_policy.cc — see track_policy.h.
#include "track_policy.h"

#include "stream_gate.h"

namespace tensorscope {

StepGates step_gates(int64_t step, int64_t every_n, int64_t stats_every, bool capturing) {
  return {is_sent_step(step, every_n) || capturing, stats_every > 0 && is_sent_step(step, stats_every)};
}

CallRoute route_call(CallStacking mode, int call, bool stacks) {
  const int separate = separate_calls(mode);
  CallRoute route;
  route.own_stream = (separate < 0 || call < separate) && call < kMaxCallsPerStep;
  route.stack_row = separate >= 0 && (call >= separate || stacks);
  return route;
}

bool StackLedger::wants(const std::string& name, int call) const {
  if (separate_ < 0) return false;
  if (call >= separate_) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return many_.count(name) != 0;
}

StackLedger::Taken StackLedger::take(const std::string& name, int64_t step, int call, size_t bytes) {
  Taken taken;
  std::lock_guard<std::mutex> lock(mutex_);
  if (separate_ >= 0 && call >= separate_) {
    many_.insert(name);
    any_many_.store(true, std::memory_order_relaxed);
  }
  auto it = open_.find(name);
  if (it != open_.end() && it->second.step != step) {
    held_ -= it->second.held_bytes;
    taken.closed.push_back(close(name, it->second));
    open_.erase(it);
    it = open_.end();
  }
  if (it == open_.end()) it = open_.emplace(name, Open{step, 0, 0, 0}).first;
  Open& open = it->second;
  if (open.rows >= kMaxStackedRows) {
    ++open.dropped;
    taken.row = Row::kDrop;
    return taken;
  }
  ++open.rows;
  if (held_ + bytes <= kStackedHoldBytes) {
    open.held_bytes += bytes;
    held_ += bytes;
    taken.row = Row::kHold;
  } else {
    taken.row = Row::kReduceNow;
  }
  return taken;
}

std::vector<StackLedger::Closed> StackLedger::take_all() {
  std::vector<Closed> closed;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, open] : open_) closed.push_back(close(name, open));
  open_.clear();
  held_ = 0;
  return closed;
}

std::vector<std::string> StackLedger::seen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {many_.begin(), many_.end()};
}

std::string track_refusal(TrackRefusal why, std::string_view first, std::string_view second) {
  const std::string_view words = kTrackRefusals[static_cast<size_t>(why)].words;
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == '{' && i + 2 < words.size() && words[i + 2] == '}' &&
        (words[i + 1] == '0' || words[i + 1] == '1')) {
      out += words[i + 1] == '0' ? first : second;
      i += 2;
    } else {
      out += words[i];
    }
  }
  return out;
}

}  // namespace tensorscope
