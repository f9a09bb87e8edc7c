// logging.h — the tensorscope logger (spdlog), shared by every process.
//
// init_logging() sets the level and a pattern tagged with the process role
// ("supervisor", "worker-1", "client"). A log call never throws: spdlog's error handler
// swallows formatting errors. Every line goes to stderr through escape_log_line(), so a
// message is one line whatever it carries; untrusted strings (stream names, peer
// messages) are also quoted and cut where they are logged (quote_for_message in
// text_input.h). Thread safety: spdlog loggers are thread safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "tensorscope/base/status.h"

namespace tensorscope {

// The process-wide logger named "tensorscope" (created on first use, stderr).
spdlog::logger& logger();

// A formatted log line as written: control characters (bytes below 0x20 and 0x7f) as
// \xNN, and cut after `max_bytes` with "... (N bytes)".
inline constexpr size_t kMaxLogLineBytes = 4096;
std::string escape_log_line(std::string_view line, size_t max_bytes = kMaxLogLineBytes);

// level: trace|debug|info|warn|error|off.
Status init_logging(const std::string& level, const std::string& role);

}  // namespace tensorscope

#define TS_LOG_DEBUG(...) ::tensorscope::logger().debug(__VA_ARGS__)
#define TS_LOG_INFO(...) ::tensorscope::logger().info(__VA_ARGS__)
#define TS_LOG_WARN(...) ::tensorscope::logger().warn(__VA_ARGS__)
#define TS_LOG_ERROR(...) ::tensorscope::logger().error(__VA_ARGS__)
