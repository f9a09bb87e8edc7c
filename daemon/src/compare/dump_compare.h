// dump_compare.h — compares two .npy files, or two directories of them (e.g. raw-value
// dumps laid out as step_<n>/<stream>_rank<r>.npy), and formats the report.
//
// Used by the `tensorscope compare` command-line tool; no daemon process uses it.
// Directories are walked recursively; regular files named *.npy are paired by their
// path relative to the directory (other files, and leftovers of write_npy named
// kTempNpyPrefix*, are ignored). A file present on one side only is a difference. A
// file that cannot be read (corrupt, truncated, unsupported dtype) is reported as an
// error entry with NpyReader's message and the walk goes on; the tool exits 2 then.
// Entries are ordered by the step number of the last `step_<n>` path component
// (entries without one first), then by relative path; the first entry that is not a
// match is the first divergence.
// HDF5 recordings (see compare/hdf5_source.h): when a side is an .h5/.hdf5 file or a
// directory holding one (hidden names skipped), every side is read as a set of
// tensors named step_<n>/<stream>_rank<r>: one per row of each recording (the files
// of a side merged), and one per .npy file (its relative path without ".npy"); the
// same name twice on one side gets "#2", "#3", ... appended. Names are paired across
// the sides and reported like dump directories (a step on one side only, e.g. a
// change-detection gap, is ONLY_A/ONLY_B). A recording that cannot be listed (not
// HDF5, corrupt, truncated, not a tensorscope recording) is an error naming the file
// (exit 2); a row that cannot be read is an error entry.
// Thread safety: free functions over value types; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare/tensor_compare.h"
#include "tensorscope/shared/status.h"

namespace tensorscope::daemon {

enum class CompareVerdict {
  kMatch,          // allclose
  kDiffer,         // same shape, some elements not close
  kShapeMismatch,  // shapes differ
  kOnlyInA,        // the file exists in A only
  kOnlyInB,        // the file exists in B only
  kError,          // a file could not be read (message in `error`)
};

// "MATCH", "DIFFER", "SHAPE", "ONLY_A", "ONLY_B", "ERROR".
const char* verdict_name(CompareVerdict verdict);

struct CompareEntry {
  std::string name;       // relative path for directories, "A vs B" text for two files
  int64_t step = -1;      // from the last step_<n> path component, -1 if none
  std::string stream;     // file name without ".npy"
  CompareVerdict verdict = CompareVerdict::kMatch;
  TensorCompareResult result;  // valid for kMatch, kDiffer, kShapeMismatch
  std::string error;           // for kError
};

struct CompareReport {
  bool directories = false;
  std::vector<CompareEntry> entries;  // ordered as described at the top of this file
  uint64_t matched = 0;
  uint64_t differed = 0;  // kDiffer + kShapeMismatch
  uint64_t only_in_a = 0;
  uint64_t only_in_b = 0;
  uint64_t errors = 0;
  int64_t first_divergence = -1;  // index into entries of the first non-match, -1 if none

  bool all_match() const { return first_divergence < 0; }
  // 0 all match, 1 something differs, 2 some file could not be read.
  int exit_code() const { return errors > 0 ? 2 : (all_match() ? 0 : 1); }
};

// The step number of the last path component of the form step_<digits>, -1 if none.
int64_t parse_step(const std::string& relative_path);

// Compares path_a with path_b: two files, or two directories. Errors (bad input, the
// tool exits 2): a path that does not exist, a file paired with a directory, and for
// two files any read error (NpyReader's message, naming the file), an unreadable HDF5
// recording, a single .npy file against a recording. libtorch-saved files (.pt,
// .pth) are refused as not yet supported.
StatusOr<CompareReport> compare_paths(const std::string& path_a, const std::string& path_b,
                                      const CompareTolerance& tolerance,
                                      size_t chunk_bytes = kCompareChunkBytes);

// One line per entry: verdict, name, dtypes/shapes and metrics (no trailing newline).
std::string format_entry(const CompareEntry& entry);
// Totals and the first divergence (no trailing newline).
std::string format_summary(const CompareReport& report);
// The whole report as a JSON document (no trailing newline).
std::string format_json(const CompareReport& report, const CompareTolerance& tolerance);

}  // namespace tensorscope::daemon
