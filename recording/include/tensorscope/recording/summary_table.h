// summary_table.h — the per-step summaries of tracked tensors (a kSummary record,
// shared/summary_format.h) as lines of the session's summary table, one CSV file per
// producer: <session>/summaries/rank<r>_pid<p>.csv.
//
// Used by a worker process for each summary record it receives; tensorscope.read_summaries
// (Python) reads the files. The CSV (RFC 4180, '\n' line ends, cells as csv_text.h) has
// the header line kSummaryTableHeader and one line per summarised tensor:
//   step, rank, track, order (the tensor's place in its record: forward outputs in call
//   order, then gradients), stream, kind, numel, l2, max_abs, mean, std, nan_count,
//   inf_count, zero_fraction, update_ratio (empty unless the tensor is a parameter with
//   an earlier summarised step), steps (how many summarised steps the line stands for: 1
//   as written; more once a long run's table was compacted, summary_compaction.h: the
//   line then begins at `step`, holds the largest l2, max |x|, std, zero fraction and
//   update ratio, the mean of the means and the sums of the NaN/Inf counts), the
//   numerics (cast_format .. overflow_fraction), and for a DTensor's local part its shard
//   (shared/shard_placement.h's text) and the whole tensor's whole_numel (both empty for
//   a tensor that is not sharded), and the tensor's dtype (wire::dtype_name: float32,
//   bfloat16, ...; empty where the client did not say).
// Tables written before a column was added (the steps, the numerics, the shard, the
// dtype) are read too.
// A record's lines go to the file in one write() (AppendFile): a killed worker loses at
// most the record it was writing. parse_summary_table_line reads a line back (the live
// view's overview follows the files as they grow).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::recording {

inline constexpr char kSummaryTableHeader[] =
    "step,rank,track,order,stream,kind,numel,l2,max_abs,mean,std,nan_count,inf_count,zero_fraction,update_ratio,"
    "steps,cast_format,dynamic_range,underflow_fraction,overflow_fraction,shard,whole_numel,dtype";
// Whether `line` is the header of a table of this or an earlier version.
bool is_summary_table_header(std::string_view line);

// The lines (each ending in '\n') of one record's summaries.
std::string summary_table_lines(int64_t step, int rank, const std::string& track,
                                const std::vector<TensorSummary>& summaries);

// One line of the table (without its '\n'), as summary_table_lines wrote it.
struct SummaryTableRow {
  int64_t step = 0;
  int rank = 0;
  std::string track;
  int64_t order = 0;
  TensorSummary summary;  // zero, underflow and overflow counts from their fractions (rounded),
                          // min_abs_nonzero from the dynamic range
  int64_t steps = 1;      // summarised steps the line stands for (>= 1)
};
// False for the headers and for a line that is not one of the table's.
bool parse_summary_table_line(std::string_view line, SummaryTableRow* row);

// The count a fraction of `numel` stands for (a table keeps fractions: the zeros, the
// underflow, the overflow), rounded; 0 for NaN (an empty column).
uint64_t count_of_fraction(double fraction, uint64_t numel);
// The line (with its '\n') of `row`.
std::string summary_table_line(const SummaryTableRow& row);

// Calls `row` for each whole line of `text` that is one of the table's ('\n'-ended; a
// last line without its '\n' is left out), the header skipped; returns how many lines
// were not the table's.
uint64_t for_each_summary_table_row(std::string_view text, const std::function<void(const SummaryTableRow&)>& row);

// Reads back the table at `path` (a restarted daemon's workers: the steps summarised
// before the restart), at most its last `max_bytes` (from the first whole line in them).
// Calls `row` for each line; returns the lines that were not the table's, or why the
// file could not be read (a missing file is an error too).
StatusOr<uint64_t> read_summary_table(const std::string& path, uint64_t max_bytes,
                                      const std::function<void(const SummaryTableRow&)>& row);

// <session_dir>/summaries/rank<r>_pid<p>.csv
std::string summary_table_path(const std::string& session_dir, int rank, int64_t pid);
// rank<r>_pid<p>.csv -> r, p; false for any other name.
bool parse_summary_table_name(const std::string& name, int* rank, int64_t* pid);

}  // namespace tensorscope::recording
