// stats_table.h — one statistics row per received tensor, and the CSV file they go to.
//
// Used by a worker process's statistics sink: compute_stats_row on each tensor it
// receives (the payload may still be in shared memory: every element is read once,
// unaligned reads are fine), then StatsTableWriter::append. Offline tools read the CSV.
//
// The CSV (RFC 4180, '\n' line ends) starts with the header line
//   step,stream,kind,rank,device,dtype,shape,mean,std,min,max,l2_norm,nan_count,inf_count,zero_fraction
// and has one line per tensor:
//   - shape: dims joined by 'x' ("4x3x28x28", "0" or "3x0" for empty tensors), and
//     "scalar" for a 0-d tensor.
//   - fields holding ',', '"', CR or LF (stream names come from the training process)
//     are quoted, with '"' doubled.
//   - numbers: the shortest decimal text that reads back as the very same double
//     (std::to_chars), e.g. "0.1", "2.5", "1e-300"; so nothing is lost and no digits
//     are invented. A NaN field (no finite element, empty tensor) is an empty cell; an
//     l2_norm beyond the double range is "inf".
// Each line goes to the file in a single write() (O_APPEND) as soon as it is appended:
// a killed worker loses at most the line it was writing.
//
// Thread safety: compute_stats_row is a pure function. A StatsTableWriter is used by one
// thread, and one writer per file (two writers appending to one file keep whole lines,
// but both may write the header line when they start at once on a new file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorscope/recording/append_file.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::recording {

inline constexpr char kStatsTableHeader[] =
    "step,stream,kind,rank,device,dtype,shape,mean,std,min,max,l2_norm,nan_count,inf_count,"
    "zero_fraction";

struct TensorStatsRow {
  uint64_t count = 0;         // elements (numel)
  uint64_t finite_count = 0;  // elements that are neither NaN nor +-Inf
  uint64_t nan_count = 0;
  uint64_t inf_count = 0;  // +Inf and -Inf
  // Over the finite elements only, in double; NaN when finite_count == 0.
  double mean = 0;
  double std = 0;  // population standard deviation
  double min = 0;
  double max = 0;
  double l2_norm = 0;  // sqrt of the sum of squares (no overflow for large values)
  // Elements equal to zero (+0 or -0) over count; NaN when count == 0.
  double zero_fraction = 0;
};

// Statistics of `numel` elements of `dtype` at `data`. Integers and bool are all
// finite (bool: any non-zero byte is 1). An empty tensor, an invalid dtype, a null
// `data` with numel > 0, or a numel whose size in bytes overflows give count == 0 and
// NaN for every double.
TensorStatsRow compute_stats_row(wire::DType dtype, const void* data, uint64_t numel);

// What identifies the tensor of a row.
struct StatsRowMeta {
  int64_t step = 0;
  std::string stream;
  std::string kind;  // wire::tensor_kind_name(), e.g. "activation"
  int rank = 0;
  std::string device;                         // "cpu", "cuda0", ...
  wire::DType dtype = wire::DType::kInvalid;  // written as wire::dtype_name()
  std::vector<int64_t> shape;                 // empty: a 0-d tensor
};

// The line for one row, without the trailing '\n' (see the top of this file).
std::string stats_table_line(const StatsRowMeta& meta, const TensorStatsRow& row);

class StatsTableWriter {
 public:
  // Opens `path` for appending, creating it and its parent directories as needed. A new
  // or empty file gets the header line. An existing file must start with exactly that
  // header line (else an error: it is another table, and is left alone); if it does
  // not end with a line break (a writer was killed mid-line) one is added first, so the
  // new rows start on a line of their own.
  static StatusOr<StatsTableWriter> open(const std::string& path);

  // Writes one line (stats_table_line + '\n') to the file with a single write().
  // Errors: I/O errors (disk full, ...), naming the file.
  Status append(const StatsRowMeta& meta, const TensorStatsRow& row);

  const std::string& path() const { return file_->path(); }

 private:
  StatsTableWriter() = default;

  std::optional<AppendFile> file_;  // set by open()
};

}  // namespace tensorscope::recording
