// tree_log.h — the module tree log: per producer (rank, pid), which modules each logged
// step of a tracked model called, in order and indented by nesting, with their input and
// output shapes, dtypes and devices, and what changed since the track's previous logged
// step. Fed with the kModuleTree records the client sends (module_tree_format.h).
//
// Used by a worker process's sink thread (RecordSinks): tree/rank<r>_pid<p>.log.
// A step block (format_tree_step) is one header line, then the whole tree for the first
// logged step of a track (and when the calls came in another order), and only the calls
// that changed for a step that differs from the track's previous one:
//   == step 20 | net | 4 calls | changed since step 10: 1 changed, 1 new, 1 gone; 2 unchanged calls not shown
//     net
//   *   net.fc1      Linear  float32[16,784]@cpu -> float32[16,128]@cpu  (was float32[32,784]@cpu -> float32[32,128]@cpu)
//   +   net.fc3      Linear  float32[16,128]@cpu -> float32[16,10]@cpu
//   -   net.fc2  (not called; was float32[32,128]@cpu -> float32[32,10]@cpu)
// A step identical to the previous one is the header line alone ("| same as step 10").
// With values (version 2 payloads: the client fingerprints outputs and compares them with
// the track's previous logged step), a call whose shapes are the same but whose output
// values changed beyond the client's tolerance is marked '~' and counted in the header:
//   == step 20 | net | 4 calls | changed since step 10: 2 values changed; 2 unchanged calls not shown
//   ~     net.fc1      Linear  float32[16,784]@cpu -> float32[16,128]@cpu  (values changed)
// and a step the same in shapes and values reads "| same as step 10, values within
// tolerance" ("(k not compared)" for calls the client could not compare).
// Bounds: at most 32 levels of nesting are shown; a block stops at about 2 MiB ("... N
// more calls not shown").
// Marks: ' ' as before, '*' changed (type, inputs or output), '+' new, '-' gone, '~' values
// changed (version 2). Calls are
// keyed by (thread, path, call number); "#<n>" follows the n-th call of a module in the
// step, "[thread <t>] " precedes calls on other op threads than the first; a module's
// ancestors that made no call of their own are shown as plain lines for the nesting;
// "order changed" is added when the common calls came in another order. Inputs are
// joined by ", " ("-": none).
// Each block is written with a single write() as soon as the record arrives (AppendFile).
// Thread safety: format_tree_step is pure; a TreeLogWriter is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "tensorscope/recording/append_file.h"
#include "tensorscope/shared/module_tree_format.h"
#include "tensorscope/base/status.h"

namespace tensorscope::recording {

// The block for step `step` of track `track` (ends with '\n'); `previous` is the track's
// previous logged step (null for its first).
std::string format_tree_step(const std::string& track, int64_t step, const ModuleTree& tree, const ModuleTree* previous,
                             int64_t previous_step);

class TreeLogWriter {
 public:
  // Tracks whose previous step is remembered, and their payload bytes at most; further
  // tracks are logged whole at each step ("first logged step").
  static constexpr size_t kMaxTracks = 256;
  static constexpr size_t kMaxRememberedBytes = size_t{64} << 20;

  // Opens (appends to) `path`, whose first line is `# tensorscope module tree log`.
  static StatusOr<std::unique_ptr<TreeLogWriter>> open(const std::string& path);

  // Parses `payload` and appends the step's block. Errors: a malformed payload (nothing
  // is written), I/O errors; each names the file.
  Status append(const std::string& track, int64_t step, std::string_view payload);

 private:
  explicit TreeLogWriter(AppendFile file) : file_(std::move(file)) {}

  struct Logged {
    int64_t step = 0;
    size_t bytes = 0;  // of its payload
    ModuleTree tree;
  };
  AppendFile file_;
  std::map<std::string, Logged> previous_;  // by track
  size_t remembered_bytes_ = 0;
};

}  // namespace tensorscope::recording
