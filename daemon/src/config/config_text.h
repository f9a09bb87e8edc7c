// config_text.h — the text helpers of the config readers: values quoted for messages,
// keys as they appear in dotted paths, numbers printed and parsed strictly, UTF-8
// checked, near spellings measured.
//
// Internal to daemon/src/config/ (the YAML reader, the JSON codec, the validator).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tensorscope::config_detail {

// The most characters of a value shown in a message.
inline constexpr std::size_t kMaxShownChars = 80;

// `s` quoted for a message (quote_for_message, cut after kMaxShownChars).
std::string quote(std::string_view s);

// A key from the file as part of a dotted path: the quoted form without the quotes
// when it needs no escaping, else the quoted form.
std::string printable_key(std::string_view key);

// The shortest text that reads back as `v`; "?" if it cannot be printed.
std::string format_number(double v);

// The items joined with ", ".
template <typename Range>
std::string join(const Range& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// The Levenshtein distance between `a` and `b`.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Strict number parsing: the whole text must be the number; a leading '+' is allowed.
// parse_double refuses Inf and NaN.
std::optional<int64_t> parse_int(std::string_view s);
std::optional<double> parse_double(std::string_view s);

}  // namespace tensorscope::config_detail
