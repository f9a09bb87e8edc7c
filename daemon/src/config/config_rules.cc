// config_rules.cc — see config_rules.h.
#include "config/config_rules.h"

#include <cctype>
#include <cmath>
#include <regex>
#include <vector>

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
  return std::string("a number ") + (r.lo_inclusive ? ">= " : "greater than ") + format_number(r.lo) +
      (r.hi_inclusive ? " and at most " : " and less than ") + format_number(r.hi);
}

bool in_range(const NumberRule& r, double v) {
  if (!std::isfinite(v)) return false;
  const bool lo_ok = r.lo_inclusive ? v >= r.lo : v > r.lo;
  const bool hi_ok = r.hi_inclusive ? v <= r.hi : v < r.hi;
  return lo_ok && hi_ok;
}

std::string choice_expectation(Choices accepted) {
  std::vector<std::string_view> named;
  for (const std::string_view name : accepted) {
    if (!name.empty()) named.push_back(name);
  }
  return "one of " + join(named);
}

std::string string_problem(const std::string& v, StringRule rule) {
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
      return "expected a regular expression (or \"\" for none), got " + quote(v) + " (" + e.what() + ")";
    }
  }
  return "";
}

std::string match_problem(const std::string& match) {
  if (match.empty()) return "\"match\" must be a non-empty regular expression";
  if (!is_valid_utf8(match)) return "\"match\" must be valid UTF-8 text";
  try {
    std::regex compiled(match, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return "\"match\" is not a valid regular expression (" + std::string(e.what()) + "): " + quote(match);
  }
  return "";
}

std::string rule_problem(const RangeRule& rule) {
  std::string problem = match_problem(rule.match);
  if (!problem.empty()) return problem;
  if (!std::isfinite(rule.lo) || !std::isfinite(rule.hi) || !(rule.lo < rule.hi))
    return "\"lo\" and \"hi\" must be finite numbers with lo < hi";
  return "";
}

std::string rule_problem(const ToleranceRule& rule) {
  std::string problem = match_problem(rule.match);
  if (!problem.empty()) return problem;
  if (!(rule.rtol >= 0 && rule.rtol <= 1e6) || !(rule.atol >= 0 && rule.atol <= 1e300))
    return "\"rtol\" and \"atol\" must be finite numbers >= 0 (rtol at most 1e6)";
  return "";
}

}  // namespace tensorscope::config_detail
