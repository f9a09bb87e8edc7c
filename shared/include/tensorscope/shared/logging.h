// logging.h — the tensorscope logger (spdlog), shared by every process.
//
// init_logging() sets the level and a pattern tagged with the process role
// ("supervisor", "worker-1", "client"). A log call never throws: spdlog's error handler
// swallows formatting errors. Thread safety: spdlog loggers are thread safe.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "tensorscope/shared/status.h"

namespace tensorscope {

// The process-wide logger named "tensorscope" (created on first use, stderr).
spdlog::logger& logger();

// level: trace|debug|info|warn|error|off.
Status init_logging(const std::string& level, const std::string& role);

}  // namespace tensorscope

#define TS_LOG_DEBUG(...) ::tensorscope::logger().debug(__VA_ARGS__)
#define TS_LOG_INFO(...) ::tensorscope::logger().info(__VA_ARGS__)
#define TS_LOG_WARN(...) ::tensorscope::logger().warn(__VA_ARGS__)
#define TS_LOG_ERROR(...) ::tensorscope::logger().error(__VA_ARGS__)
