// reference_table.h — a reference run's summary table of one rank (summary_table.h), read
// as it grows, in the order it was written, for the divergence watch: the rows of the
// steps still wanted, grouped by (step, track), each stream's occurrences in the order
// its track saw them (a module called twice in a step has two).
//
// The reference may be finished or still running: read() takes what the file gained
// since the last call and stops at the end of what is there; a file replaced by a
// compaction (summary_compaction.h) is opened again and its rows of steps already read
// are skipped. Rows that stand for several steps (a compacted table's merged blocks) are
// skipped and counted: they are no step's summary. Memory is bounded by the caller's
// window: rows of steps before `keep_from` are never kept, and a read stops once it has
// read past `stop_after`.
//
// reference_table_for_rank finds the table of a rank in a reference: a session folder,
// or a folder above several (one per node): the last written table of that rank.
//
// Used by a worker's divergence watch (daemon/src/worker/divergence_watch.h), one per
// producer. Thread safety: none; one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorscope/base/posix_file.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::recording {

// The summary table of rank `rank` under `reference` (a session folder, or a folder with
// session folders below it: output_dir.h's session_dirs_under); the one modified last
// where several processes had that rank (a restarted run). "" when there is none (yet).
std::string reference_table_for_rank(const std::string& reference, int rank);

class ReferenceTable {
 public:
  // One (step, track)'s rows: by stream, its occurrences in order.
  using Group = std::unordered_map<std::string, std::vector<TensorSummary>>;
  static constexpr int64_t kNoStep = INT64_MIN;

  explicit ReferenceTable(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Reads what the file gained, keeping rows of steps >= keep_from, until a row of a step
  // after `stop_after` was read, the end of the file, or `max_bytes` were read. An error
  // when the file cannot be opened or read (it may not exist yet: try again later).
  Status read(int64_t keep_from, int64_t stop_after, uint64_t max_bytes = 4u << 20);
  // Whether the last read() reached the end of what the file held.
  bool at_end() const { return at_end_; }

  // The rows of `track` at `step`; null when none were read (or they were forgotten).
  const Group* group(int64_t step, const std::string& track) const;
  // Forgets the rows of steps before `step`.
  void forget_before(int64_t step);

  // The latest step read (of any track; of `track`); kNoStep before the first row.
  int64_t last_step() const { return last_step_; }
  int64_t last_step(const std::string& track) const;

  uint64_t rows_kept() const { return rows_kept_; }       // held now
  uint64_t compacted_rows() const { return compacted_; }  // skipped: merged blocks
  uint64_t bad_lines() const { return bad_lines_; }       // not the table's
  uint64_t reopened() const { return reopened_; }         // replaced files opened again

 private:
  Status open();
  // Takes one whole line; false when it was past `stop_after` (the read stops after it).
  bool take_line(std::string_view line, int64_t keep_from, int64_t stop_after);

  const std::string path_;
  UniqueFd fd_;
  uint64_t ino_ = 0;
  uint64_t offset_ = 0;  // the file's bytes before this are in buffer_ (or were taken)
  std::string buffer_;   // read from the file, not yet taken from taken_ on
  size_t taken_ = 0;
  int64_t skip_upto_ = kNoStep;  // after a reopen: rows of steps <= this were read before
  bool at_end_ = false;
  std::map<int64_t, std::unordered_map<std::string, Group>> steps_;
  std::unordered_map<std::string, int64_t> track_last_;
  int64_t last_step_ = kNoStep;
  uint64_t rows_kept_ = 0;
  uint64_t compacted_ = 0;
  uint64_t bad_lines_ = 0;
  uint64_t reopened_ = 0;
};

}  // namespace tensorscope::recording
