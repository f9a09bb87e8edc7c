// config_rules.cc — see config_rules.h.
#include "config/config_rules.h"

#include <cctype>
#include <cmath>
#include <regex>

#include "config/config_text.h"
#include "tensorscope/shared/session_name.h"

namespace tensorscope::config_detail {

std::string expectation(const IntRule& r) {
  if (!r.what.empty()) return r.what;
  if (r.hi == std::numeric_limits<int64_t>::max()) return "an integer >= " + std::to_string(r.lo);
  return "an integer between " + std::to_string(r.lo) + " and " + std::to_string(r.hi);
}

bool in_range(const IntRule& r, int64_t v) { return v >= r.lo && v <= r.hi; }

std::string expectation(const NumberRule& r) {
  if (r.lo_inclusive && r.hi_inclusive)
    return "a number between " + format_number(r.lo) + " and " + format_number(r.hi);
  return std::string("a number ") + (r.lo_inclusive ? ">= " : "greater than ") +
         format_number(r.lo) + (r.hi_inclusive ? " and at most " : " and less than ") +
         format_number(r.hi);
}

bool in_range(const NumberRule& r, double v) {
  if (!std::isfinite(v)) return false;
  const bool lo_ok = r.lo_inclusive ? v >= r.lo : v > r.lo;
  const bool hi_ok = r.hi_inclusive ? v <= r.hi : v < r.hi;
  return lo_ok && hi_ok;
}

std::string choice_expectation(Choices accepted) { return "one of " + join(accepted); }

bool is_choice(Choices accepted, std::string_view v) {
  return std::find(accepted.begin(), accepted.end(), v) != accepted.end();
}

std::string string_problem(const std::string& v, StringRule rule) {
  if (rule == StringRule::kColor) {
    const bool ok = v.size() == 7 && v[0] == '#' &&
                    std::all_of(v.begin() + 1, v.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    return ok ? "" : "expected a colour \"#rrggbb\", got " + quote(v);
  }
  if (rule == StringRule::kSessionName) {
    const Status s = validate_session_name(v);
    return s.is_ok() ? "" : s.message();
  }
  if (v.find('\0') != std::string::npos) return "must not contain NUL bytes, got " + quote(v);
  if (!is_valid_utf8(v)) return "must be valid UTF-8 text, got " + quote(v);
  if (rule == StringRule::kNonEmpty && v.empty()) return "expected a non-empty string, got \"\"";
  if (rule == StringRule::kRegex && !v.empty()) {
    try {
      std::regex compiled(v, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return "expected a regular expression (or \"\" for none), got " + quote(v) + " (" +
             e.what() + ")";
    }
  }
  return "";
}

std::string rule_problem(const ModeRule& rule, Choices modes) {
  if (rule.match.empty()) return "\"match\" must be a non-empty regular expression";
  if (!is_valid_utf8(rule.match)) return "\"match\" must be valid UTF-8 text";
  try {
    std::regex compiled(rule.match, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return "\"match\" is not a valid regular expression (" + std::string(e.what()) + "): " +
           quote(rule.match);
  }
  if (!is_choice(modes, rule.mode))
    return "\"mode\" must be " + choice_expectation(modes) + ", got " + quote(rule.mode);
  return "";
}

std::string range_problem(const RangeRule& rule) {
  ModeRule as_mode{rule.match, "auto"};
  std::string problem = rule_problem(as_mode, Choices(kRenderModes));
  if (!problem.empty()) return problem;
  if (!std::isfinite(rule.lo) || !std::isfinite(rule.hi) || !(rule.lo < rule.hi))
    return "\"lo\" and \"hi\" must be finite numbers with lo < hi";
  return "";
}

}  // namespace tensorscope::config_detail
