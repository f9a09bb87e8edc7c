// output_dir.h — where sessions' outputs go: one default for the daemon, a client's
// autostarted daemon, `tensorscope view` and the docs (<output>/<session>/), the session
// written last, which `tensorscope view` opens when none is named, and the session folders
// under a common parent (many nodes' daemons writing to shared storage), which `tensorscope
// view --dir` and the Python readers (SESSION_MARKS, SESSION_SEARCH_DEPTH) take as one run.
//
// Used by the daemon's configuration, the client and the command-line tool.
// Thread safety: free functions without shared state.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace tensorscope {

// Relative to the working directory of the program that writes or reads it.
inline constexpr char kDefaultOutputDir[] = "tensorscope_runs";

// The session directory under `output_dir` (a directory whose name is a session name)
// written last: the latest modification of the directory or of its index.json. "" when
// there is none (or `output_dir` cannot be read).
std::string latest_session_dir(const std::string& output_dir);

// <session>/run_info/<run_info_base_name>.json: what each training process that registered
// was running (the daemon writes it, readers group the processes of one job by it).
inline constexpr char kRunInfoDirName[] = "run_info";
// "rank<rank>_pid<pid>": the file name stem of a producer's run_info files.
std::string run_info_base_name(int rank, long pid);

// What a session folder holds (any of them makes a folder one), and how far below a
// parent session folders are looked for.
inline constexpr std::array<const char*, 4> kSessionMarks = {"summaries", "anomalies.jsonl", "index.json",
                                                             kRunInfoDirName};
inline constexpr int kSessionSearchDepth = 3;

// Whether `dir` is a session folder.
bool is_session_dir(const std::string& dir);
// `dir` itself when it is a session folder; else the session folders below it at the
// first depth (1 to kSessionSearchDepth) that has any, in name order. Hidden folders
// are skipped.
std::vector<std::string> session_dirs_under(const std::string& dir);

}  // namespace tensorscope
