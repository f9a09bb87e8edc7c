// status_query.h — asks a session's daemon for its status (control_protocol.h: a status
// request over the session's Unix socket).
//
// Used by `tensorscope status` and the live view. Blocks at most `timeout_ms` for the
// answer. Thread safety: a free function without shared state.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tensorscope/base/status.h"

namespace tensorscope {

// The daemon's status document. Errors: "no daemon runs for session 'x' (...)" when
// nothing listens, "the daemon for session 'x' did not answer: ..." otherwise.
// `runtime_dir` "" means the default (runtime_paths.h).
StatusOr<nlohmann::json> query_daemon_status(const std::string& runtime_dir, const std::string& session,
                                             int timeout_ms);

}  // namespace tensorscope
