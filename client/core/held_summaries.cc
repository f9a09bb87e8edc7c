// held_summaries.cc — see held_summaries.h.
#include "held_summaries.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "tensorscope/shared/summary_format.h"

namespace tensorscope {

void HeldSummaries::hold(std::string track, int64_t step, std::string payload) {
  Record r{std::move(track), step, std::move(payload), next_id_++};
  bytes_ += r.payload.size();
  records_.push_back(std::move(r));
  note_extremes(records_.back());
  ++holds_since_recompute_;
  thin();
}

void HeldSummaries::pop_oldest() {
  const uint64_t id = records_.front().id;
  bytes_ -= records_.front().payload.size();
  records_.pop_front();
  for (const auto& [name, e] : extremes_) {
    if (e.max_abs_record == id || e.first_nonfinite == id) extremes_stale_ = true;
  }
  if (records_.empty()) {
    extremes_.clear();
    extremes_stale_ = false;
  }
  if (bytes_ <= budget_ / 2) stride_ = 1;  // room again: what comes next is kept whole
}

void HeldSummaries::drop_all() {
  lost_ += records_.size();
  records_.clear();
  bytes_ = 0;
  extremes_.clear();
  extremes_stale_ = false;
  stride_ = 1;
}

void HeldSummaries::note_extremes(const Record& r) {
  const StatusOr<std::vector<TensorSummary>> entries = parse_summaries(r.payload);
  if (!entries) return;
  for (const TensorSummary& s : *entries) {
    Extremes& e = extremes_[s.name];
    if (!s.finite() && e.first_nonfinite == 0) e.first_nonfinite = r.id;
    if (std::isfinite(s.max_abs) && s.max_abs > e.max_abs) {
      e.max_abs = s.max_abs;
      e.max_abs_record = r.id;
    }
  }
}

void HeldSummaries::recompute_extremes() {
  extremes_.clear();
  for (const Record& r : records_) note_extremes(r);
  extremes_stale_ = false;
  holds_since_recompute_ = 0;
}

template <class Drop>
void HeldSummaries::drop_if(uint64_t limit, Drop drop) {
  std::deque<Record> kept;
  for (Record& r : records_) {
    if (bytes_ > limit && drop(r)) {
      bytes_ -= r.payload.size();
      ++lost_;
    } else {
      kept.push_back(std::move(r));
    }
  }
  records_ = std::move(kept);
}

void HeldSummaries::thin() {
  if (bytes_ <= budget_) return;
  // Refreshed at most every kRecomputeEvery records: it parses every record held, on the
  // training thread.
  if (extremes_stale_ && holds_since_recompute_ >= kRecomputeEvery) recompute_extremes();
  std::unordered_set<uint64_t> nonfinite, largest;
  for (const auto& [name, e] : extremes_) {
    if (e.first_nonfinite != 0) nonfinite.insert(e.first_nonfinite);
    if (e.max_abs_record != 0) largest.insert(e.max_abs_record);
  }
  auto may_go = [&](const Record& r) { return nonfinite.count(r.id) == 0 && largest.count(r.id) == 0; };
  // Keep every stride_-th record (by id) of those that may go, doubling the stride until
  // the rest fits: an even sample of the held steps, as the overview merges its columns.
  while (true) {
    if (stride_ > 1) drop_if(0, [&](const Record& r) { return may_go(r) && r.id % stride_ != 0; });
    if (bytes_ <= budget_) break;
    const auto left = std::count_if(records_.begin(), records_.end(), may_go);
    if (left <= 1) {  // findings alone are left, and perhaps one more
      drop_if(budget_, may_go);
      break;
    }
    stride_ *= 2;  // ends: two distinct ids differ at some power of two
  }
  // Findings alone past twice the budget: largest values first (oldest first), then
  // first non-finite values (newest first: the run's first NaN goes last).
  const uint64_t hard = 2 * budget_;
  if (bytes_ <= hard) return;
  drop_if(hard, [&](const Record& r) { return nonfinite.count(r.id) == 0; });
  while (bytes_ > hard && records_.size() > 1) {
    bytes_ -= records_.back().payload.size();
    ++lost_;
    records_.pop_back();
  }
  extremes_stale_ = true;
}

}  // namespace tensorscope
