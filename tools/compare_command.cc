// compare_command.cc — `tensorscope compare A B [--atol X] [--rtol Y] [--json] [--hdf5-timeout S]`.
//
// Part of the `tensorscope` command-line tool (cli_main.cc dispatches here).
// Compares two .npy files, or two directories of them paired by relative path, HDF5
// recordings of the daemon's HDF5 sink paired by (step, stream, rank), and PyTorch
// files (.pt/.pth from torch.save, torch::save, torch::pickle_save; read without
// libtorch) paired by tensor name (see compare/dump_compare.h, compare/hdf5_source.h
// and compare/torch_file_source.h for the pairing, naming, ordering and semantics).
// Prints a line per tensor and a summary (or one JSON document with --json). Exit 0
// when everything matches, 1 when something differs, 2 on bad input (message on
// stderr), including an unreadable .npy or .pt file inside a directory (reported in
// its line first). No exception escapes: one (e.g. running out of memory) is reported
// as bad input, exit 2.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "compare/dump_compare.h"
#include "compare/hdf5_reader_process.h"

namespace tensorscope::tools {
namespace {

using namespace tensorscope::compare;

void compare_usage(FILE* out) {
  std::fprintf(out,
               "usage: tensorscope compare A B [--atol X] [--rtol Y] [--json] [--hdf5-timeout S]\n"
               "Compares two .npy files, or two directories of .npy files paired by relative path\n"
               "(recursively; e.g. dumps laid out as step_<n>/<stream>_rank<r>.npy).\n"
               "  per tensor: allclose verdict |a-b| <= atol + rtol*|b| (numpy.isclose; defaults\n"
               "  atol 1e-8, rtol 1e-5), values in double, dtypes may differ; NaN equals NaN only\n"
               "  at the same position; max_abs and max_rel = |a-b|/|b| over finite pairs, skipping\n"
               "  b == 0; cosine similarity (1 for two all-zero tensors); mismatch count. Different\n"
               "  shapes are a difference. Files on one side only are differences; the summary\n"
               "  names the first diverging step and stream (ordered by step_<n>, then name).\n"
               "HDF5 recordings (.h5 files of the HDF5 sink, or directories holding them; the\n"
               "files of a side are merged): each row is the tensor of one stream at one step and\n"
               "rank, named step_<n>/<stream>_rank<r> (the stream name made a file name as the\n"
               ".npy sink does); paired by that name with the other side, which may be a\n"
               "recording too or a dump directory (.npy files step_<n>/<stream>_rank<r>.npy).\n"
               "A step stored on one side only (e.g. skipped by change detection)\n"
               "is a difference. bfloat16 rows are decoded from their stored bits. libhdf5 runs\n"
               "in a child process: a request it does not answer within --hdf5-timeout seconds\n"
               "(default 30; a corrupt file can make libhdf5 loop) is an error naming the file.\n"
               "PyTorch files (.pt/.pth written by torch.save, torch::save, torch::pickle_save;\n"
               "zip format of PyTorch >= 1.6, read without libtorch): tensors are named by their\n"
               "place in the saved object: dict keys (a state_dict's 'fc.weight'), list/tuple\n"
               "indices, nested with '.' ('opt.state.0.exp_avg'); torch::save(tensor or vector)\n"
               "gives '0', '1', ...; a lone torch.save(t) tensor is unnamed. Two files holding one\n"
               "tensor each (.pt or .npy) are compared directly; otherwise tensors are paired by\n"
               "name with the other side: a .pt file, or a directory whose .npy files are named\n"
               "<tensor name>.npy. Inside a directory, x/model.pt's tensors are 'x/model/<name>'\n"
               "(just 'x/model' for a lone tensor). Views (transposed, sliced, expanded) are\n"
               "read in logical order. Refused with a message: the legacy non-zip format,\n"
               "big-endian files, complex, quantized and sparse tensors.\n"
               "Exit 0 all match, 1 something differs, 2 bad input (missing path, file vs\n"
               "directory, bad option, an unreadable .h5 or .pt file; an unreadable .npy or .pt\n"
               "file inside a directory, or a tensor that cannot be read: reported, then exit 2).\n");
}

bool parse_tolerance(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(parsed) || parsed < 0.0) return false;
  *value = parsed;
  return true;
}

int run_compare(int argc, char** argv) {
  CompareTolerance tolerance;
  bool json = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      has_value = true;
    }
    if (arg == "--help" || arg == "-h") {
      compare_usage(stdout);
      return 0;
    } else if (arg == "--json" && !has_value) {
      json = true;
    } else if (arg == "--atol" || arg == "--rtol" || arg == "--hdf5-timeout") {
      if (!has_value) {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "tensorscope compare: %s needs a value\n", arg.c_str());
          return 2;
        }
        value = argv[++i];
      }
      if (arg == "--hdf5-timeout") {
        double seconds = 0.0;
        if (!parse_tolerance(value, &seconds) || seconds <= 0.0 || seconds > 86400.0) {
          std::fprintf(stderr,
                       "tensorscope compare: bad --hdf5-timeout value '%s' (want seconds, > 0 "
                       "and <= 86400)\n",
                       value.c_str());
          return 2;
        }
        Hdf5ReaderProcess::shared().set_timeout(
            std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5)));
      } else if (!parse_tolerance(value, arg == "--atol" ? &tolerance.atol : &tolerance.rtol)) {
        std::fprintf(stderr, "tensorscope compare: bad %s value '%s' (want a finite number >= 0)\n", arg.c_str(),
                     value.c_str());
        return 2;
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "tensorscope compare: unknown option '%s'\n", argv[i]);
      compare_usage(stderr);
      return 2;
    } else {
      paths.push_back(argv[i]);
    }
  }
  if (paths.size() != 2) {
    std::fprintf(stderr, "tensorscope compare: need exactly two paths (A and B), got %zu\n", paths.size());
    compare_usage(stderr);
    return 2;
  }
  auto report = compare_paths(paths[0], paths[1], tolerance);
  if (!report) {
    std::fprintf(stderr, "tensorscope compare: %s\n", report.message().c_str());
    return 2;
  }
  if (json) {
    std::printf("%s\n", format_json(*report, tolerance).c_str());
  } else {
    for (const CompareEntry& entry : report->entries) {
      std::printf("%s\n", format_entry(entry).c_str());
    }
    std::printf("%s\n", format_summary(*report).c_str());
  }
  std::fflush(stdout);
  if (report->errors > 0) {
    std::fprintf(stderr, "tensorscope compare: %llu file(s) could not be read (see ERROR lines)\n",
                 static_cast<unsigned long long>(report->errors));
  }
  return report->exit_code();
}

}  // namespace

int run_compare_command(int argc, char** argv) {
  // Reported with fixed text, the exception's own and the arguments: nothing allocated.
  const char* problem = "internal error";
  const char* detail = "";
  try {
    return run_compare(argc, argv);
  } catch (const std::bad_alloc&) {
    problem = "out of memory";
  } catch (const std::exception& e) {
    detail = e.what();
  } catch (...) {}
  std::fflush(stdout);
  std::fprintf(stderr, "tensorscope compare: %s%s%s while comparing", problem, *detail ? ": " : "", detail);
  for (int i = 1; i < argc; ++i) std::fprintf(stderr, " %s", argv[i]);
  std::fputs("\n", stderr);
  return 2;
}

}  // namespace tensorscope::tools
