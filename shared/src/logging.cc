#include "tensorscope/shared/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <mutex>

namespace tensorscope {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  try {
    auto existing = spdlog::get("tensorscope");
    if (existing) return existing;
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("tensorscope", sink);
    log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [tensorscope] [%l] %v");
    log->set_level(spdlog::level::info);
    log->set_error_handler([](const std::string&) {});
    spdlog::register_logger(log);
    return log;
  } catch (...) {
    auto log = std::make_shared<spdlog::logger>("tensorscope-fallback");
    return log;
  }
}

}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

Status init_logging(const std::string& level, const std::string& role) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return Status::error("unknown log level '" + level + "'");
  }
  try {
    logger().set_level(parsed);
    logger().set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + role + " %P] [%l] %v");
  } catch (...) {
  }
  return Status::ok();
}

}  // namespace tensorscope
