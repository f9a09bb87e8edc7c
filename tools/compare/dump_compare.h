// dump_compare.h — compares two .npy files, or two directories of them (e.g. raw-value
// dumps laid out as step_<n>/<stream>_rank<r>.npy), HDF5 recordings and PyTorch files,
// and formats the report.
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
// Named tensors: when some side is an HDF5 recording (.h5/.hdf5) or a PyTorch file
// (.pt/.pth, see compare/torch_file_source.h), or a directory holding one (hidden
// names skipped), every side is read as a set of named tensors, and names are paired
// across the sides and reported like dump directories (a name on one side only is
// ONLY_A/ONLY_B; entries ordered by the last step_<n> component of the name, then
// name). The names:
//   - a row of a recording (compare/hdf5_source.h): step_<n>/<stream>_rank<r> (the
//     files of a side merged), <stream> made a safe file name exactly as the .npy sink
//     names its dumps (file_naming.h: "model/fc" -> "model_fc~<hash>"), so a recording
//     and a dump of the same run pair up; the entry's `stream` is the stream's own name;
//   - a .npy file in a directory: its relative path without ".npy";
//   - a .pt file given as a side: its tensors' names (torch_file_source.h: state_dict
//     keys, "0", "1", ... for torch::save of a tensor or a vector, "" for a lone
//     torch.save'd tensor, shown as "(unnamed tensor)");
//   - a .pt file in a directory: <relative path without .pt/.pth>/<tensor name>, or
//     just the relative path for a lone unnamed tensor (so dir/x.pt holding one tensor
//     pairs with dir/x.npy, and dir/m.pt holding {"w": ...} with dir/m/w.npy).
//   The same name twice on one side gets "#2", "#3", ... appended (the first of these
//   not taken yet; a counter per name keeps k copies linear).
// So a multi-tensor .pt file pairs with a directory of .npy files named like its
// tensors (fc.weight.npy) or with another .pt file. Two files that hold one tensor each
// (a .npy file, a .pt file with a single tensor whatever its name) are compared with
// each other directly, like two .npy files; a single .npy file against anything else
// (a directory holding .pt or HDF5 files, a recording, a .pt file of several tensors)
// is an error. Unreadable input: a recording that cannot be listed (not HDF5, corrupt,
// truncated, not a tensorscope recording) is an error naming the file (exit 2); a .pt
// file given as a side that cannot be read likewise (not a zip, legacy format,
// truncated, corrupt pickle, big-endian); a .pt file inside a directory that cannot be
// read is one error entry named by its relative path without the extension (the walk
// goes on, exit 2); a row or tensor that cannot be read (e.g. a complex tensor) is an
// error entry.
// No exception escapes: running out of memory (or any other exception) is an error.
// Thread safety: free functions over value types; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare/tensor_compare.h"
#include "tensorscope/base/status.h"

namespace tensorscope::compare {

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
  std::string name;    // relative path or tensor name, "A vs B" text for two files
  int64_t step = -1;   // from the last step_<n> path component, -1 if none
  std::string stream;  // file name without ".npy" (recordings: the stream; .pt: the tensor name)
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

// Compares path_a with path_b: two files, or two directories (or named-tensor sides,
// see the top of this file). Errors (bad input, the tool exits 2): a path that does
// not exist, a .npy file paired with a directory, and for two .npy files any read
// error (NpyReader's message, naming the file), an unreadable HDF5 recording or .pt
// file given as a side, a single .npy file against a recording, a directory of
// named tensors or a .pt file holding other than one tensor.
StatusOr<CompareReport> compare_paths(const std::string& path_a, const std::string& path_b,
                                      const CompareTolerance& tolerance, size_t chunk_bytes = kCompareChunkBytes);

// One line per entry: verdict, name, dtypes/shapes and metrics (no trailing newline).
std::string format_entry(const CompareEntry& entry);
// Totals and the first divergence (no trailing newline).
std::string format_summary(const CompareReport& report);
// The whole report as a JSON document (no trailing newline).
std::string format_json(const CompareReport& report, const CompareTolerance& tolerance);

}  // namespace tensorscope::compare
