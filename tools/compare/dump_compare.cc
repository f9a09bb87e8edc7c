#include "compare/dump_compare.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "compare/hdf5_source.h"
#include "compare/torch_file_source.h"
#include "tensorscope/recording/file_naming.h"
#include "tensorscope/recording/npy_file.h"

namespace tensorscope::compare {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string stream_of(const std::string& relative_path) {
  std::string name = fs::path(relative_path).filename().string();
  if (ends_with(name, ".npy")) name.resize(name.size() - 4);
  return name;
}

void fill_entry(CompareEntry& entry, StatusOr<TensorCompareResult> compared) {
  if (!compared) {
    entry.verdict = CompareVerdict::kError;
    entry.error = compared.message();
    return;
  }
  entry.result = std::move(*compared);
  entry.verdict = entry.result.shape_mismatch ? CompareVerdict::kShapeMismatch
      : entry.result.allclose()               ? CompareVerdict::kMatch
                                              : CompareVerdict::kDiffer;
}

void tally(CompareReport& report) {
  for (size_t i = 0; i < report.entries.size(); ++i) {
    const CompareVerdict v = report.entries[i].verdict;
    switch (v) {
      case CompareVerdict::kMatch: ++report.matched; break;
      case CompareVerdict::kDiffer:
      case CompareVerdict::kShapeMismatch: ++report.differed; break;
      case CompareVerdict::kOnlyInA: ++report.only_in_a; break;
      case CompareVerdict::kOnlyInB: ++report.only_in_b; break;
      case CompareVerdict::kError: ++report.errors; break;
    }
    if (v != CompareVerdict::kMatch && report.first_divergence < 0) {
      report.first_divergence = static_cast<int64_t>(i);
    }
  }
}

// Orders the entries by step, then name, and counts them (tally).
void sort_and_tally(CompareReport& report) {
  std::stable_sort(report.entries.begin(), report.entries.end(), [](const CompareEntry& x, const CompareEntry& y) {
    if (x.step != y.step) return x.step < y.step;
    return x.name < y.name;
  });
  tally(report);
}

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

// ---- Named tensors: HDF5 recordings, PyTorch files, and .npy files beside them ----

enum class SideKind { kNpy, kHdf5, kTorch, kUnreadable };

// One tensor of one side: a .npy file, a row of an HDF5 recording, a tensor of a .pt
// file, or a .pt file inside a directory that could not be read.
struct SideTensor {
  SideKind kind = SideKind::kNpy;
  std::string npy_path;
  Hdf5Tensor h5;
  TorchTensor pt;
  std::string error;  // kUnreadable: why (names the file)
  int64_t step = -1;
  std::string stream;
};

// The tensors of one side by name.
struct Side {
  std::map<std::string, SideTensor> tensors;
  // Per name given more than once, the next "#<n>" suffix to try (add_tensor).
  std::unordered_map<std::string, uint64_t> next_suffix;
  bool dir = false;
  bool npy_file = false;   // a single .npy file
  bool recording = false;  // an .h5 file, or a directory holding one
};

bool is_hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.empty() || name[0] == '.';
}

// Hidden names are skipped: Hdf5Sink's unfinished `.<base>.<n>.h5.partial` (not .h5
// anyway), editors' and copy tools' temporary files.
bool is_listed_hdf5(const fs::path& path) { return !is_hidden(path) && is_hdf5_path(path.filename().string()); }
bool is_listed_torch(const fs::path& path) { return !is_hidden(path) && is_torch_path(path.filename().string()); }

struct DirectoryContents {
  std::set<std::string> npy;    // relative paths of the .npy files
  std::set<std::string> hdf5;   // relative paths of the .h5/.hdf5 files
  std::set<std::string> torch;  // relative paths of the .pt/.pth files
};

StatusOr<DirectoryContents> list_directory(const std::string& root) {
  DirectoryContents contents;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    const bool npy = ends_with(name, ".npy") && name.rfind(recording::kTempNpyPrefix, 0) != 0;
    const bool hdf5 = is_listed_hdf5(path);
    const bool torch = is_listed_torch(path);
    if (!npy && !hdf5 && !torch) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    const std::string rel = path.lexically_relative(root).generic_string();
    (npy ? contents.npy : hdf5 ? contents.hdf5 : contents.torch).insert(rel);
  }
  if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
  return contents;
}

// Key of a recorded tensor: the path the .npy sink gives it in a dump directory, without
// ".npy" (the stream name made a safe file name the same way: "a/b" -> "a_b~<hash>").
std::string recording_key(int64_t step, const std::string& stream, int rank) {
  return "step_" + std::to_string(step) + "/" + recording::sanitize_stream_name(stream) + "_rank" +
      std::to_string(rank);
}

// The same name twice: keep both, the later one named "<key>#2", "#3", ... (a counter
// per name, so k copies take O(k) tries, not O(k^2)).
void add_tensor(Side& side, std::string key, SideTensor tensor) {
  if (side.tensors.count(key) > 0) {
    uint64_t& n = side.next_suffix.try_emplace(key, 2).first->second;
    std::string other;
    do {
      other = key + "#" + std::to_string(n++);
    } while (side.tensors.count(other) > 0);
    key = std::move(other);
  }
  side.tensors.emplace(std::move(key), std::move(tensor));
}

Status add_hdf5_file(const std::string& file, Side& side) {
  auto tensors = list_hdf5_tensors(file);
  if (!tensors) return tensors.status();
  for (Hdf5Tensor& t : *tensors) {
    SideTensor s;
    s.kind = SideKind::kHdf5;
    s.step = t.step;
    s.stream = t.stream;
    std::string key = recording_key(t.step, t.stream, t.rank);
    s.h5 = std::move(t);
    add_tensor(side, std::move(key), std::move(s));
  }
  return Status::ok();
}

// The tensors of a .pt file, keyed "<base>/<tensor name>" ("<base>" for the lone
// tensor "", the tensor name alone when base is ""). A file inside a directory that
// cannot be read becomes one kUnreadable entry keyed <base>; a file given as a side is
// an error.
Status add_torch_file(const std::string& file, const std::string& base, bool in_directory, Side& side) {
  auto tensors = list_torch_tensors(file);
  if (!tensors) {
    if (!in_directory) return tensors.status();
    SideTensor s;
    s.kind = SideKind::kUnreadable;
    s.error = tensors.message();
    s.step = parse_step(base);
    s.stream = fs::path(file).stem().string();
    add_tensor(side, base, std::move(s));
    return Status::ok();
  }
  for (TorchTensor& t : *tensors) {
    std::string key = base.empty() ? t.name : t.name.empty() ? base : base + "/" + t.name;
    SideTensor s;
    s.kind = SideKind::kTorch;
    s.step = parse_step(key);
    s.stream = t.name.empty() ? fs::path(file).stem().string() : t.name;
    s.pt = std::move(t);
    add_tensor(side, std::move(key), std::move(s));
  }
  return Status::ok();
}

// One side: an .h5 file, a .pt file, a .npy file (one tensor named ""), or a directory
// of .npy (keyed by relative path without ".npy"), .h5 and .pt files.
StatusOr<Side> collect_side(const std::string& path, bool dir) {
  Side side;
  side.dir = dir;
  if (!dir) {
    if (is_hdf5_path(path)) {
      side.recording = true;
      Status added = add_hdf5_file(path, side);
      if (!added) return added;
    } else if (is_torch_path(path)) {
      Status added = add_torch_file(path, "", false, side);
      if (!added) return added;
    } else {
      side.npy_file = true;
      SideTensor s;
      s.npy_path = path;
      s.stream = stream_of(path);
      add_tensor(side, "", std::move(s));
    }
    return side;
  }
  auto contents = list_directory(path);
  if (!contents) return contents.status();
  for (const std::string& rel : contents->npy) {
    SideTensor s;
    s.npy_path = (fs::path(path) / rel).string();
    s.step = parse_step(rel);
    s.stream = stream_of(rel);
    add_tensor(side, rel.substr(0, rel.size() - 4), std::move(s));
  }
  for (const std::string& rel : contents->hdf5) {
    side.recording = true;
    Status added = add_hdf5_file((fs::path(path) / rel).string(), side);
    if (!added) return added;
  }
  for (const std::string& rel : contents->torch) {
    const std::string base = fs::path(rel).replace_extension().generic_string();
    Status added = add_torch_file((fs::path(path) / rel).string(), base, true, side);
    if (!added) return added;
  }
  return side;
}

StatusOr<std::unique_ptr<TensorSource>> open_side(const SideTensor& t, size_t chunk_bytes) {
  switch (t.kind) {
    case SideKind::kNpy: return open_npy_source(t.npy_path, chunk_bytes);
    case SideKind::kHdf5: return open_hdf5_source(t.h5, chunk_bytes);
    case SideKind::kTorch: return open_torch_source(t.pt, chunk_bytes);
    case SideKind::kUnreadable: break;
  }
  return Status::error(t.error);
}

StatusOr<TensorCompareResult> compare_side_tensors(const SideTensor& a, const SideTensor& b,
                                                   const CompareTolerance& tolerance, size_t chunk_bytes) {
  // Two .npy files: the file comparison (its reads overlap the arithmetic).
  if (a.kind == SideKind::kNpy && b.kind == SideKind::kNpy) {
    return compare_npy_files(a.npy_path, b.npy_path, tolerance, chunk_bytes);
  }
  auto source_a = open_side(a, chunk_bytes);
  if (!source_a) return source_a.status();
  auto source_b = open_side(b, chunk_bytes);
  if (!source_b) return source_b.status();
  return compare_sources(**source_a, **source_b, tolerance);
}

// "a directory", "an HDF5 recording", "x.pt, which holds 3 tensors".
std::string describe_side(const std::string& path, const Side& side) {
  if (side.dir) return "a directory (" + path + ")";
  if (side.recording) return "an HDF5 recording (" + path + ")";
  const size_t n = side.tensors.size();
  return path + ", which holds " + std::to_string(n) + " tensor" + (n == 1 ? "" : "s");
}

}  // namespace

const char* verdict_name(CompareVerdict verdict) {
  switch (verdict) {
    case CompareVerdict::kMatch: return "MATCH";
    case CompareVerdict::kDiffer: return "DIFFER";
    case CompareVerdict::kShapeMismatch: return "SHAPE";
    case CompareVerdict::kOnlyInA: return "ONLY_A";
    case CompareVerdict::kOnlyInB: return "ONLY_B";
    case CompareVerdict::kError: return "ERROR";
  }
  return "?";
}

int64_t parse_step(const std::string& relative_path) {
  int64_t step = -1;
  for (const auto& part : fs::path(relative_path)) {
    const std::string name = part.string();
    if (name.size() <= 5 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    step = std::stoll(name.substr(5));
  }
  return step;
}

namespace {

// Every side is a set of named tensors (see dump_compare.h): .npy files, HDF5 recordings
// and PyTorch files, given as files or directories holding them. With `npy_names` (only
// .npy files on both sides) an entry is named by its file's relative path, ".npy" and all.
StatusOr<CompareReport> compare_named(const std::string& path_a, bool dir_a, const std::string& path_b, bool dir_b,
                                      const CompareTolerance& tolerance, size_t chunk_bytes, bool npy_names) {
  if (chunk_bytes < 8) return Status::error("compare: chunk size must be at least 8 bytes");
  auto side_a = collect_side(path_a, dir_a);
  if (!side_a) return side_a.status();
  auto side_b = collect_side(path_b, dir_b);
  if (!side_b) return side_b.status();
  CompareReport report;
  // Two files of one tensor each (.npy, or .pt holding one tensor): compared with each
  // other whatever the tensors' names.
  const bool single_a = !dir_a && !side_a->recording && side_a->tensors.size() == 1;
  const bool single_b = !dir_b && !side_b->recording && side_b->tensors.size() == 1;
  if (single_a && single_b) {
    const SideTensor& a = side_a->tensors.begin()->second;
    const SideTensor& b = side_b->tensors.begin()->second;
    CompareEntry entry;
    entry.name = path_a + " vs " + path_b;
    entry.stream = a.stream;
    StatusOr<TensorCompareResult> compared = compare_side_tensors(a, b, tolerance, chunk_bytes);
    // Two .npy files: one that cannot be read is the command's error, naming it.
    if (!compared && npy_names) return compared.status();
    fill_entry(entry, std::move(compared));
    report.entries.push_back(std::move(entry));
    tally(report);
    return report;
  }
  // A single .npy file has no name to pair by.
  if (side_a->npy_file || side_b->npy_file) {
    const bool a_is_npy = side_a->npy_file;
    return Status::error("cannot compare a single .npy file (" + (a_is_npy ? path_a : path_b) + ") with " +
                         (a_is_npy ? describe_side(path_b, *side_b) : describe_side(path_a, *side_a)) +
                         ": a .npy file pairs only with a .npy file or a .pt file holding one "
                         "tensor (give a directory of .npy files named like the tensors)");
  }
  report.directories = true;
  std::set<std::string> keys;
  for (const auto& [key, t] : side_a->tensors) keys.insert(key);
  for (const auto& [key, t] : side_b->tensors) keys.insert(key);
  for (const std::string& key : keys) {
    const auto found_a = side_a->tensors.find(key);
    const auto found_b = side_b->tensors.find(key);
    const bool in_a = found_a != side_a->tensors.end();
    const bool in_b = found_b != side_b->tensors.end();
    const SideTensor& any = in_a ? found_a->second : found_b->second;
    CompareEntry entry;
    entry.name = key.empty() ? "(unnamed tensor)" : npy_names ? key + ".npy" : key;
    entry.step = any.step;
    // Prefer the stream name of a recording over a .npy file name ("x_rank0").
    entry.stream = (in_b && found_b->second.kind == SideKind::kHdf5) ? found_b->second.stream : any.stream;
    const SideTensor* unreadable = (in_a && found_a->second.kind == SideKind::kUnreadable) ? &found_a->second
        : (in_b && found_b->second.kind == SideKind::kUnreadable)                          ? &found_b->second
                                                                                           : nullptr;
    if (unreadable != nullptr) {
      entry.verdict = CompareVerdict::kError;
      entry.error = unreadable->error;
    } else if (in_a && in_b) {
      fill_entry(entry, compare_side_tensors(found_a->second, found_b->second, tolerance, chunk_bytes));
    } else {
      entry.verdict = in_a ? CompareVerdict::kOnlyInA : CompareVerdict::kOnlyInB;
    }
    report.entries.push_back(std::move(entry));
  }
  sort_and_tally(report);
  return report;
}

}  // namespace

namespace {

StatusOr<CompareReport> compare_any(const std::string& path_a, const std::string& path_b,
                                    const CompareTolerance& tolerance, size_t chunk_bytes) {
  std::error_code ec_a, ec_b;
  const fs::file_status st_a = fs::status(path_a, ec_a);
  const fs::file_status st_b = fs::status(path_b, ec_b);
  for (const auto& [path, st, ec] : {std::tie(path_a, st_a, ec_a), std::tie(path_b, st_b, ec_b)}) {
    if (fs::exists(st)) continue;
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return Status::error(path + ": " + ec.message());
    }
    return Status::error(path + ": no such file or directory");
  }
  const bool dir_a = fs::is_directory(st_a);
  const bool dir_b = fs::is_directory(st_b);
  // Both sides are sets of named tensors; with HDF5 recordings or PyTorch files on some
  // side, named by tensor, else (.npy files only) by file.
  bool named = false;
  for (const auto& [path, dir] : {std::pair(path_a, dir_a), std::pair(path_b, dir_b)}) {
    if (!dir) {
      named = named || is_hdf5_path(path) || is_torch_path(path);
      continue;
    }
    auto contents = list_directory(path);
    if (!contents) return contents.status();
    named = named || !contents->hdf5.empty() || !contents->torch.empty();
  }
  if (!named && dir_a != dir_b) {
    return Status::error("cannot compare a " + std::string(dir_a ? "directory" : "file") + " (" + path_a + ") with a " +
                         (dir_b ? "directory" : "file") + " (" + path_b + ")");
  }
  return compare_named(path_a, dir_a, path_b, dir_b, tolerance, chunk_bytes, !named);
}

}  // namespace

StatusOr<CompareReport> compare_paths(const std::string& path_a, const std::string& path_b,
                                      const CompareTolerance& tolerance, size_t chunk_bytes) {
  try {
    return compare_any(path_a, path_b, tolerance, chunk_bytes);
  } catch (const std::bad_alloc&) {
    return Status::error("comparing " + path_a + " with " + path_b + ": out of memory");
  } catch (const std::exception& e) {
    return Status::error("comparing " + path_a + " with " + path_b + ": " + e.what());
  }
}

std::string format_entry(const CompareEntry& e) {
  std::string line = verdict_name(e.verdict);
  line.resize(7, ' ');
  line += e.name;
  const TensorCompareResult& r = e.result;
  switch (e.verdict) {
    case CompareVerdict::kOnlyInA: return line + "  (missing in B)";
    case CompareVerdict::kOnlyInB: return line + "  (missing in A)";
    case CompareVerdict::kError: return line + "  error: " + e.error;
    case CompareVerdict::kShapeMismatch:
      return line + "  shape mismatch: " + describe_tensor(r.dtype_a, r.shape_a) + " vs " +
          describe_tensor(r.dtype_b, r.shape_b);
    case CompareVerdict::kMatch:
    case CompareVerdict::kDiffer: break;
  }
  line += "  " + describe_tensor(r.dtype_a, r.shape_a);
  if (r.dtype_a != r.dtype_b) line += " vs " + describe_tensor(r.dtype_b, r.shape_b);
  line += "  mismatches " + std::to_string(r.mismatches) + "/" + std::to_string(r.total);
  if (r.nonfinite_mismatches > 0) {
    line += " (" + std::to_string(r.nonfinite_mismatches) + " non-finite)";
  }
  line +=
      "  max_abs " + number(r.max_abs_error) + "  max_rel " + number(r.max_rel_error) + "  cosine " + number(r.cosine);
  if (r.first_mismatch >= 0) {
    line += "  first at [" + std::to_string(r.first_mismatch) + "]: " + number(r.first_mismatch_a) + " vs " +
        number(r.first_mismatch_b);
  }
  return line;
}

std::string format_summary(const CompareReport& report) {
  std::string text = "summary: " + std::to_string(report.entries.size()) + " tensor" +
      (report.entries.size() == 1 ? "" : "s") + ": " + std::to_string(report.matched) + " match, " +
      std::to_string(report.differed) + " differ";
  if (report.directories) {
    text += ", " + std::to_string(report.only_in_a) + " only in A, " + std::to_string(report.only_in_b) + " only in B";
  }
  text += ", " + std::to_string(report.errors) + " unreadable";
  if (report.all_match()) {
    text += report.entries.empty() ? "; no .npy files found: nothing differs" : "; all match";
  } else if (report.directories) {
    const CompareEntry& first = report.entries[static_cast<size_t>(report.first_divergence)];
    text += "; first divergence: ";
    if (first.step >= 0) text += "step " + std::to_string(first.step) + ", ";
    text += "stream " + first.stream + " (" + first.name + ", " + verdict_name(first.verdict) + ")";
  }
  return text;
}

std::string format_json(const CompareReport& report, const CompareTolerance& tolerance) {
  nlohmann::json doc;
  doc["atol"] = tolerance.atol;
  doc["rtol"] = tolerance.rtol;
  doc["directories"] = report.directories;
  nlohmann::json entries = nlohmann::json::array();
  for (const CompareEntry& e : report.entries) {
    nlohmann::json j;
    j["name"] = e.name;
    j["verdict"] = verdict_name(e.verdict);
    if (e.step >= 0) j["step"] = e.step;
    j["stream"] = e.stream;
    if (e.verdict == CompareVerdict::kError) j["error"] = e.error;
    const bool compared = e.verdict == CompareVerdict::kMatch || e.verdict == CompareVerdict::kDiffer ||
        e.verdict == CompareVerdict::kShapeMismatch;
    if (compared) {
      const TensorCompareResult& r = e.result;
      j["dtype_a"] = wire::dtype_name(r.dtype_a);
      j["dtype_b"] = wire::dtype_name(r.dtype_b);
      j["shape_a"] = r.shape_a;
      j["shape_b"] = r.shape_b;
    }
    if (e.verdict == CompareVerdict::kMatch || e.verdict == CompareVerdict::kDiffer) {
      const TensorCompareResult& r = e.result;
      // Non-finite metrics (an overflowing difference) are written as null.
      j["total"] = r.total;
      j["mismatches"] = r.mismatches;
      j["nonfinite_mismatches"] = r.nonfinite_mismatches;
      j["max_abs_error"] = r.max_abs_error;
      j["max_rel_error"] = r.max_rel_error;
      j["cosine"] = r.cosine;
      if (r.first_mismatch >= 0) j["first_mismatch"] = r.first_mismatch;
    }
    entries.push_back(std::move(j));
  }
  doc["entries"] = std::move(entries);
  doc["matched"] = report.matched;
  doc["differed"] = report.differed;
  doc["only_in_a"] = report.only_in_a;
  doc["only_in_b"] = report.only_in_b;
  doc["unreadable"] = report.errors;
  if (report.first_divergence >= 0) {
    doc["first_divergence"] = report.entries[static_cast<size_t>(report.first_divergence)].name;
  }
  doc["exit_code"] = report.exit_code();
  return doc.dump(2);
}

}  // namespace tensorscope::compare
