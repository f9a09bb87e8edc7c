#include "compare/dump_compare.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "compare/hdf5_source.h"
#include "sinks/npy_file.h"

namespace tensorscope::daemon {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Status refuse_unsupported(const std::string& path) {
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext == ".pt" || ext == ".pth") {
    return Status::error(path +
                         ": libtorch-saved tensors are not supported yet (only .npy and HDF5 files)");
  }
  return Status::ok();
}

// Relative paths of the *.npy regular files under `root`, sorted.
StatusOr<std::set<std::string>> list_npy_files(const std::string& root) {
  std::set<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
    const std::string name = it->path().filename().string();
    if (!ends_with(name, ".npy") || name.rfind(kTempNpyPrefix, 0) == 0) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    files.insert(it->path().lexically_relative(root).generic_string());
  }
  if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
  return files;
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
                  : entry.result.allclose()   ? CompareVerdict::kMatch
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
  std::stable_sort(report.entries.begin(), report.entries.end(),
                   [](const CompareEntry& x, const CompareEntry& y) {
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


// ---- HDF5 recordings (and .npy dumps beside them), paired by (step, stream, rank) ----

// One tensor of one side: a .npy file or a row of an HDF5 recording.
struct SideTensor {
  bool hdf5 = false;
  std::string npy_path;
  Hdf5Tensor h5;
  int64_t step = -1;
  std::string stream;
};

bool is_listed_hdf5(const fs::path& path) {
  const std::string name = path.filename().string();
  // Hidden names: Hdf5Sink's unfinished `.<base>.<n>.h5.partial` (not .h5 anyway).
  return !name.empty() && name[0] != '.' && is_hdf5_path(name);
}

StatusOr<bool> directory_has_hdf5(const std::string& root) {
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
    std::error_code type_ec;
    if (is_listed_hdf5(it->path()) && it->is_regular_file(type_ec)) return true;
  }
  if (ec) return Status::error(root + ": cannot list directory: " + ec.message());
  return false;
}

// Key of a recorded tensor: the path a dump directory would give it, without ".npy".
std::string recording_key(int64_t step, const std::string& stream, int rank) {
  return "step_" + std::to_string(step) + "/" + stream + "_rank" + std::to_string(rank);
}

void add_tensor(std::map<std::string, SideTensor>& side, std::string key, SideTensor tensor) {
  if (side.count(key) > 0) {  // the same (step, stream, rank) twice: keep both
    for (int n = 2;; ++n) {
      const std::string other = key + "#" + std::to_string(n);
      if (side.count(other) == 0) {
        key = other;
        break;
      }
    }
  }
  side.emplace(std::move(key), std::move(tensor));
}

Status add_hdf5_file(const std::string& file, std::map<std::string, SideTensor>& side) {
  auto tensors = list_hdf5_tensors(file);
  if (!tensors) return tensors.status();
  for (Hdf5Tensor& t : *tensors) {
    SideTensor s;
    s.hdf5 = true;
    s.step = t.step;
    s.stream = t.stream;
    std::string key = recording_key(t.step, t.stream, t.rank);
    s.h5 = std::move(t);
    add_tensor(side, std::move(key), std::move(s));
  }
  return Status::ok();
}

// The tensors of one side: an .h5 file, or a directory of .h5 and .npy files (.npy
// files keyed by their relative path without ".npy").
StatusOr<std::map<std::string, SideTensor>> collect_side(const std::string& path, bool dir) {
  std::map<std::string, SideTensor> side;
  if (!dir) {
    if (!is_hdf5_path(path)) {
      return Status::error(path + ": cannot compare a single .npy file with an HDF5 recording "
                                  "(give a dump directory)");
    }
    Status added = add_hdf5_file(path, side);
    if (!added) return added;
    return side;
  }
  auto npy = list_npy_files(path);
  if (!npy) return npy.status();
  for (const std::string& rel : *npy) {
    SideTensor s;
    s.npy_path = (fs::path(path) / rel).string();
    s.step = parse_step(rel);
    s.stream = stream_of(rel);
    add_tensor(side, rel.substr(0, rel.size() - 4), std::move(s));
  }
  std::set<std::string> h5_files;
  std::error_code ec;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  if (ec) return Status::error(path + ": cannot list directory: " + ec.message());
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return Status::error(path + ": cannot list directory: " + ec.message());
    std::error_code type_ec;
    if (is_listed_hdf5(it->path()) && it->is_regular_file(type_ec)) {
      h5_files.insert(it->path().string());
    }
  }
  if (ec) return Status::error(path + ": cannot list directory: " + ec.message());
  for (const std::string& file : h5_files) {
    Status added = add_hdf5_file(file, side);
    if (!added) return added;
  }
  return side;
}

StatusOr<std::unique_ptr<TensorSource>> open_side(const SideTensor& t, size_t chunk_bytes) {
  return t.hdf5 ? open_hdf5_source(t.h5, chunk_bytes) : open_npy_source(t.npy_path, chunk_bytes);
}

StatusOr<TensorCompareResult> compare_side_tensors(const SideTensor& a, const SideTensor& b,
                                                   const CompareTolerance& tolerance,
                                                   size_t chunk_bytes) {
  auto source_a = open_side(a, chunk_bytes);
  if (!source_a) return source_a.status();
  auto source_b = open_side(b, chunk_bytes);
  if (!source_b) return source_b.status();
  return compare_sources(**source_a, **source_b, tolerance);
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
    if (!std::all_of(name.begin() + 5, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    step = std::stoll(name.substr(5));
  }
  return step;
}

namespace {

// Some side is an HDF5 recording (an .h5 file, or a directory holding one).
StatusOr<CompareReport> compare_recordings(const std::string& path_a, bool dir_a,
                                           const std::string& path_b, bool dir_b,
                                           const CompareTolerance& tolerance,
                                           size_t chunk_bytes) {
  if (chunk_bytes < 8) return Status::error("compare: chunk size must be at least 8 bytes");
  auto side_a = collect_side(path_a, dir_a);
  if (!side_a) return side_a.status();
  auto side_b = collect_side(path_b, dir_b);
  if (!side_b) return side_b.status();
  CompareReport report;
  report.directories = true;
  std::set<std::string> keys;
  for (const auto& [key, t] : *side_a) keys.insert(key);
  for (const auto& [key, t] : *side_b) keys.insert(key);
  for (const std::string& key : keys) {
    const auto found_a = side_a->find(key);
    const auto found_b = side_b->find(key);
    const bool in_a = found_a != side_a->end();
    const bool in_b = found_b != side_b->end();
    const SideTensor& any = in_a ? found_a->second : found_b->second;
    CompareEntry entry;
    entry.name = key;
    entry.step = any.step;
    // Prefer the stream name of a recording over a .npy file name ("x_rank0").
    entry.stream = (in_b && found_b->second.hdf5) ? found_b->second.stream : any.stream;
    if (in_a && in_b) {
      fill_entry(entry,
                 compare_side_tensors(found_a->second, found_b->second, tolerance, chunk_bytes));
    } else {
      entry.verdict = in_a ? CompareVerdict::kOnlyInA : CompareVerdict::kOnlyInB;
    }
    report.entries.push_back(std::move(entry));
  }
  sort_and_tally(report);
  return report;
}

}  // namespace

StatusOr<CompareReport> compare_paths(const std::string& path_a, const std::string& path_b,
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
  bool recording = false;
  for (const auto& [path, dir] : {std::pair(path_a, dir_a), std::pair(path_b, dir_b)}) {
    if (!dir) {
      recording = recording || is_hdf5_path(path);
      continue;
    }
    auto has = directory_has_hdf5(path);
    if (!has) return has.status();
    recording = recording || *has;
  }
  if (recording) return compare_recordings(path_a, dir_a, path_b, dir_b, tolerance, chunk_bytes);
  if (dir_a != dir_b) {
    return Status::error("cannot compare a " + std::string(dir_a ? "directory" : "file") +
                         " (" + path_a + ") with a " + (dir_b ? "directory" : "file") + " (" +
                         path_b + ")");
  }

  CompareReport report;
  if (!dir_a) {
    for (const std::string* path : {&path_a, &path_b}) {
      Status supported = refuse_unsupported(*path);
      if (!supported) return supported;
    }
    auto compared = compare_npy_files(path_a, path_b, tolerance, chunk_bytes);
    if (!compared) return compared.status();
    CompareEntry entry;
    entry.name = path_a + " vs " + path_b;
    entry.stream = stream_of(path_a);
    fill_entry(entry, std::move(compared));
    report.entries.push_back(std::move(entry));
    tally(report);
    return report;
  }

  report.directories = true;
  auto files_a = list_npy_files(path_a);
  if (!files_a) return files_a.status();
  auto files_b = list_npy_files(path_b);
  if (!files_b) return files_b.status();
  std::set<std::string> all = *files_a;
  all.insert(files_b->begin(), files_b->end());
  for (const std::string& rel : all) {
    CompareEntry entry;
    entry.name = rel;
    entry.step = parse_step(rel);
    entry.stream = stream_of(rel);
    const bool in_a = files_a->count(rel) > 0;
    const bool in_b = files_b->count(rel) > 0;
    if (in_a && in_b) {
      fill_entry(entry, compare_npy_files((fs::path(path_a) / rel).string(),
                                          (fs::path(path_b) / rel).string(), tolerance,
                                          chunk_bytes));
    } else {
      entry.verdict = in_a ? CompareVerdict::kOnlyInA : CompareVerdict::kOnlyInB;
    }
    report.entries.push_back(std::move(entry));
  }
  sort_and_tally(report);
  return report;
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
  line += "  max_abs " + number(r.max_abs_error) + "  max_rel " + number(r.max_rel_error) +
          "  cosine " + number(r.cosine);
  if (r.first_mismatch >= 0) {
    line += "  first at [" + std::to_string(r.first_mismatch) + "]: " +
            number(r.first_mismatch_a) + " vs " + number(r.first_mismatch_b);
  }
  return line;
}

std::string format_summary(const CompareReport& report) {
  std::string text = "summary: " + std::to_string(report.entries.size()) + " tensor" +
                     (report.entries.size() == 1 ? "" : "s") + ": " +
                     std::to_string(report.matched) + " match, " +
                     std::to_string(report.differed) + " differ";
  if (report.directories) {
    text += ", " + std::to_string(report.only_in_a) + " only in A, " +
            std::to_string(report.only_in_b) + " only in B";
  }
  text += ", " + std::to_string(report.errors) + " unreadable";
  if (report.all_match()) {
    text += report.entries.empty() ? "; no .npy files found: nothing differs" : "; all match";
  } else if (report.directories) {
    const CompareEntry& first = report.entries[static_cast<size_t>(report.first_divergence)];
    text += "; first divergence: ";
    if (first.step >= 0) text += "step " + std::to_string(first.step) + ", ";
    text += "stream " + first.stream + " (" + first.name + ", " + verdict_name(first.verdict) +
            ")";
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
    const bool compared = e.verdict == CompareVerdict::kMatch ||
                          e.verdict == CompareVerdict::kDiffer ||
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

}  // namespace tensorscope::daemon
