// session_name.cc — see session_name.h.
#include "tensorscope/shared/session_name.h"
#include "tensorscope/base/text_input.h"

#include <exception>
#include <string>

namespace tensorscope {
namespace {

bool is_allowed(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

std::string quoted(const std::string& s) { return quote_for_message(s); }

std::string describe_byte(unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 0xf];
}

}  // namespace

Status validate_session_name(const std::string& name) {
  try {
    const std::string prefix = "invalid session name " + quoted(name) + ": ";
    if (name.empty()) return Status::error("invalid session name: it is empty (1 to 64 characters)");
    if (name.size() > kMaxSessionNameLength) {
      return Status::error(prefix + "it is " + std::to_string(name.size()) + " characters long; at most " +
                           std::to_string(kMaxSessionNameLength) + " are allowed");
    }
    if (name[0] == '.') return Status::error(prefix + "it must not start with '.'");
    for (std::size_t i = 0; i < name.size(); ++i) {
      const auto c = static_cast<unsigned char>(name[i]);
      if (!is_allowed(c)) {
        return Status::error(prefix + describe_byte(c) + " at position " + std::to_string(i) +
                             " is not allowed (only letters A-Z a-z, digits, '_', '.' and '-')");
      }
    }
    return Status::ok();
  } catch (const std::exception& e) {
    return Status::error(std::string("invalid session name: ") + e.what());
  }
}

}  // namespace tensorscope
