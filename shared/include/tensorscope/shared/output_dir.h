// output_dir.h — where sessions' outputs go: one default for the daemon, a client's
// autostarted daemon, `tensorscope view` and the docs (<output>/<session>/), and the
// session written last, which `tensorscope view` opens when none is named.
//
// Used by the daemon's configuration, the client and the command-line tool.
// Thread safety: free functions without shared state.
#pragma once

#include <string>

namespace tensorscope {

// Relative to the working directory of the program that writes or reads it.
inline constexpr char kDefaultOutputDir[] = "tensorscope_runs";

// The session directory under `output_dir` (a directory whose name is a session name)
// written last: the latest modification of the directory or of its index.json. "" when
// there is none (or `output_dir` cannot be read).
std::string latest_session_dir(const std::string& output_dir);

}  // namespace tensorscope
