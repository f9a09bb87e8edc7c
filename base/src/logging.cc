#include "tensorscope/base/logging.h"

#include <spdlog/sinks/base_sink.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace tensorscope {

std::string escape_log_line(std::string_view line, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(line.size(), max_bytes) + 16);
  size_t i = 0;
  for (; i < line.size() && out.size() < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < line.size()) out += "... (" + std::to_string(line.size()) + " bytes)";
  return out;
}

namespace {

// stderr, one line per message: control characters (newlines, escape sequences) that a
// message carries from untrusted input are shown escaped, and a message is cut at
// kMaxLogLineBytes, so no input can forge log lines or drive the terminal.
class EscapingStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::string_view text(formatted.data(), formatted.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    std::string line = escape_log_line(text, kMaxLogLineBytes);
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

std::shared_ptr<spdlog::logger> make_logger() {
  try {
    auto existing = spdlog::get("tensorscope");
    if (existing) return existing;
    auto sink = std::make_shared<EscapingStderrSink>();
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
  } catch (...) {}
  return Status::ok();
}

}  // namespace tensorscope
