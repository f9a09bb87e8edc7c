// held_summaries.h — summary records (summary_format.h) that a full ring could not take,
// held in the client, in the order they were made, until the ring has room: the findings
// of a step (its first NaN, its largest values) are never lost because the daemon stalled.
//
// Policy only: no ring, no clock, no connection; ClientCore feeds it (it holds what
// send_summaries could not send, and sends the oldest first before anything newer).
//
// Bounded by `budget_bytes` of payload. Past it, the records are thinned to every 2nd,
// then 4th, 8th ... one held (an even sample of the held steps, as the overview merges its
// columns), except records that hold, for some tensor, the first non-finite value held or
// the largest max |x| held: those are the anomalies the daemon reports and the evidence
// of explosions. Should those alone pass twice the budget, records that are only a
// largest max |x| go, oldest first, then first non-finite ones, newest first (the run's
// first NaN goes last). Every record that goes is counted in lost(). A record that does
// not parse (not the client's own) is held without extremes. Once records were sent, the
// extremes of what is left are worked out again at most every kRecomputeEvery records
// held (it reads every record, on the caller's thread); the stride starts again at 1
// once at most half the budget is held.
//
// Thread safety: none; ClientCore calls it under its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace tensorscope {

class HeldSummaries {
 public:
  struct Record {
    std::string track;
    int64_t step = 0;
    std::string payload;  // summary_format.h, as encode_summaries made it
    uint64_t id = 0;      // in order of hold()
  };

  explicit HeldSummaries(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // Holds a record behind the others; thins the oldest when past the budget.
  void hold(std::string track, int64_t step, std::string payload);

  bool empty() const { return records_.empty(); }
  size_t size() const { return records_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t lost() const { return lost_; }
  const Record& oldest() const { return records_.front(); }
  // The oldest record was sent.
  void pop_oldest();
  // Every record goes, counted in lost() (a daemon that does not read summaries).
  void drop_all();

 private:
  // The extremes of one tensor among the held records.
  struct Extremes {
    double max_abs = -1;
    uint64_t max_abs_record = 0;   // 0: none held
    uint64_t first_nonfinite = 0;  // 0: none held
  };

  void note_extremes(const Record& r);
  void recompute_extremes();
  // Drops, oldest first, the records `drop` names while more than `limit` bytes are held;
  // counts them and keeps the others in order.
  template <class Drop>
  void drop_if(uint64_t limit, Drop drop);
  void thin();

  const uint64_t budget_;
  std::deque<Record> records_;
  uint64_t bytes_ = 0;
  uint64_t lost_ = 0;
  uint64_t next_id_ = 1;
  uint64_t stride_ = 1;                                 // records that may go are kept when id % stride_ == 0
  std::unordered_map<std::string, Extremes> extremes_;  // by stream name
  bool extremes_stale_ = false;                         // a record they name was sent
  static constexpr uint64_t kRecomputeEvery = 64;
  uint64_t holds_since_recompute_ = kRecomputeEvery;
};

}  // namespace tensorscope
