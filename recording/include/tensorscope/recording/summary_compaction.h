// summary_compaction.h — keeping a long run's summary table (summary_table.h) within its
// size: the older steps' lines merged per tensor in blocks of steps, so that a week-long
// run's table stays bounded while every step keeps a line standing for it and every
// finding stays as it was.
//
// compact_summary_table reads the table's text (header and whole lines, e.g. a file
// mapped in memory) and hands the compacted table to `sink` in pieces, aiming at
// `target_bytes`. The newest quarter of the lines stays as it was. In the older part,
// steps are taken in blocks of `block_steps` (a power of two: the narrowest that meets the
// target, at least twice a line and at least the widest line there, so that older steps
// end up at one resolution, as the overview's whole run; but never shrinking the older
// part more than four times at once), and each tensor's lines (same
// track and stream) of a block merge into one line standing for them (`steps` added up,
// the first one's `step`): the largest l2, max |x|, std, zero fraction and update ratio
// (as the overview merges its columns), the mean of the means weighted by steps, the
// sums of the NaN and Inf counts. Lines that are findings stay as they were: each
// tensor's first line with a NaN or Inf, and every line of a step in `keep_steps` (the
// steps the daemon reported anomalies at). Applied again as the table grows (and to its
// own output, when one pass falls short of the target: then only the newest quarter of
// that pass's input stays whole), the older steps are merged in ever larger blocks while
// the newest stay whole. Lines that do not
// parse are dropped and counted. Memory: a line per tensor, besides the text.
//
// Used by a worker's summary intake (in a thread of its own). Thread safety: a pure
// function.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>

namespace tensorscope::recording {

struct CompactedTable {
  uint64_t bytes_out = 0;     // what the sink was given
  uint64_t lines_in = 0;      // table lines read (the header not counted)
  uint64_t lines_out = 0;     // table lines written
  uint64_t kept = 0;          // findings kept as they were in the older half
  uint64_t skipped = 0;       // lines that were not the table's (dropped)
  int64_t merged_before = 0;  // the older part: the steps before this one (0: none merged)
  int64_t block_steps = 0;    // the block the older part was merged by
};

CompactedTable compact_summary_table(std::string_view text, const std::set<int64_t>& keep_steps, uint64_t target_bytes,
                                     const std::function<void(std::string_view)>& sink);

}  // namespace tensorscope::recording
