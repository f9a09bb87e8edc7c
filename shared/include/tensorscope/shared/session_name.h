// session_name.h — the rule for session names, shared by client, daemon and tools.
//
// A session name becomes part of shared-memory segment names, socket paths and the
// output directory, so it is restricted to [A-Za-z0-9_.-], 1..64 characters, and must
// not start with '.' (no hidden or "."/".." directories).
// Used by every process (client, daemon, tools).
// Thread safety: pure function, no shared state; safe from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "tensorscope/base/status.h"

namespace tensorscope {

inline constexpr std::size_t kMaxSessionNameLength = 64;

// Returns ok when `name` is a valid session name; otherwise an error whose message
// quotes the name (escaped) and says what is wrong with it. Never throws.
Status validate_session_name(const std::string& name);

}  // namespace tensorscope
