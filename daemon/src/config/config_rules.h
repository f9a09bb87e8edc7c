// config_rules.h — the rules a config value must satisfy (strings, integer and number
// ranges, choices, per-stream mode and range rules) and the words of their messages.
//
// Internal to daemon/src/config/: visit_fields() (config_fields.h) names a rule for
// every key; the YAML reader, the JSON reader and the validator check values with these
// functions, so a value is judged the same way whichever way it came in.
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "config/daemon_config.h"

namespace tensorscope::config_detail {

enum class StringRule { kAny, kNonEmpty, kSessionName, kRegex };

struct IntRule {
  int64_t lo;
  int64_t hi;
  std::string what;  // "" = "an integer between lo and hi" / "an integer >= lo"
};

inline IntRule between(int64_t lo, int64_t hi) { return {lo, hi, ""}; }
inline IntRule at_least(int64_t lo) { return {lo, std::numeric_limits<int64_t>::max(), ""}; }

// An integer field: an integer type, or a std::chrono::duration (its count, in the
// key's unit: "_ms" keys are milliseconds, "_seconds" keys seconds).
template <typename T>
struct IntField {
  using Count = T;
  static int64_t get(const T& v) { return static_cast<int64_t>(v); }
  static void set(T& field, int64_t v) { field = static_cast<T>(v); }
};
template <typename Rep, typename Period>
struct IntField<std::chrono::duration<Rep, Period>> {
  using Count = Rep;
  static int64_t get(const std::chrono::duration<Rep, Period>& v) { return static_cast<int64_t>(v.count()); }
  static void set(std::chrono::duration<Rep, Period>& field, int64_t v) {
    field = std::chrono::duration<Rep, Period>(static_cast<Rep>(v));
  }
};

// `r` narrowed to what a T (an IntField) holds.
template <typename T>
IntRule clamp_to(IntRule r) {
  using Count = typename IntField<T>::Count;
  r.lo = std::max<int64_t>(r.lo, std::numeric_limits<Count>::min());
  r.hi = std::min<int64_t>(r.hi, std::numeric_limits<Count>::max());
  return r;
}

// "an integer between 1 and 64", "an integer >= 0", or the rule's own words.
std::string expectation(const IntRule& r);
bool in_range(const IntRule& r, int64_t v);

struct NumberRule {
  double lo;
  bool lo_inclusive;
  double hi;
  bool hi_inclusive;
};

// "a number between 2 and 100", "a number greater than 0 and at most 240", ...
std::string expectation(const NumberRule& r);
// False for NaN and +-Inf.
bool in_range(const NumberRule& r, double v);

using Choices = std::span<const std::string_view>;

// "one of a, b, c" (the names that are not "").
std::string choice_expectation(Choices accepted);

// The words of a colour's rule, "a colour \"#rrggbb\"".
inline constexpr const char* kColorExpectation = "a colour \"#rrggbb\"";

// "" when `v` satisfies `rule`, else the problem (without the key).
std::string string_problem(const std::string& v, StringRule rule);

// "" when `match`, a stream rule's regex, is usable.
std::string match_problem(const std::string& match);

// "" when the rule (a histogram range, a tolerance) is usable.
std::string rule_problem(const RangeRule& rule);
std::string rule_problem(const ToleranceRule& rule);

}  // namespace tensorscope::config_detail
