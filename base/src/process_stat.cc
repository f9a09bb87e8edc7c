// process_stat.cc — /proc/<pid>/stat: the state after the command name, utime and stime.
#include "tensorscope/base/process_stat.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <string>

namespace tensorscope {

std::optional<ProcessStat> parse_process_stat(std::string_view text) {
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime ...": comm is whatever the process named itself, so fields start after the last ')'.
  const size_t paren = text.rfind(')');
  if (paren == std::string_view::npos || text.find('(') == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(paren + 1);
  uint64_t fields[13] = {};
  ProcessStat stat;
  // Field 3 is the state; fields 14 and 15 (utime, stime) are the 12th and 13th after it.
  for (int i = 0; i <= 12; ++i) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view field = rest.substr(0, end);
    if (i == 0) {
      if (field.size() != 1) return std::nullopt;
      stat.state = field[0];
    } else {
      // Fields 4..13 may be negative (tty, tpgid); only utime and stime are read as numbers.
      if (i >= 11) {
        const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), fields[i]);
        if (ec != std::errc() || ptr != field.data() + field.size()) return std::nullopt;
      }
    }
    rest.remove_prefix(end);
  }
  stat.cpu_ticks = fields[11] + fields[12];
  return stat;
}

std::optional<ProcessStat> read_process_stat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_process_stat(text);
}

}  // namespace tensorscope
