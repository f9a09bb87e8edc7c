// csv_text.cc — see csv_text.h.
#include "tensorscope/recording/csv_text.h"

#include <charconv>
#include <cmath>

namespace tensorscope::recording {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "";  // cannot happen with 64 bytes
  return std::string(buf, end);
}

}  // namespace tensorscope::recording
