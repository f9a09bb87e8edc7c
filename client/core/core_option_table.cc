// core_option_table.cc — see core_option_table.h.
#include "core_option_table.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "tensorscope/shared/session_name.h"

namespace tensorscope {
namespace {

// A number as Python's repr writes a float ("2.0", "-0.5", "nan", "inf").
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {  // the shortest text that reads back
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  std::string out = text;
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

class Checker {
 public:
  std::string problem;

  void option(const char* name, const std::string& v, option_rules::Text rule) {
    if (!problem.empty()) return;
    if (rule.kind == option_rules::kSession) {
      if (Status s = validate_session_name(v); !s) problem = s.message();
    } else if (v.find('\0') != std::string::npos) {
      problem = std::string(name) + " contains a NUL character";
    }
  }
  template <typename T>
  void option(const char* name, const T& v, option_rules::Integer rule) {
    if (!problem.empty()) return;
    bool inside;
    if constexpr (std::is_unsigned_v<T>) {
      inside = v <= static_cast<uint64_t>(rule.hi) && (rule.lo <= 0 || v >= static_cast<uint64_t>(rule.lo));
    } else {
      inside = v >= rule.lo && v <= rule.hi;
    }
    if (!inside) problem = std::string(name) + " " + integer_bounds(rule) + ", not " + std::to_string(v);
  }
  void option(const char* name, const double& v, option_rules::Number rule) {
    if (!problem.empty() || v >= rule.lo) return;
    char bound[32];
    std::snprintf(bound, sizeof(bound), "%g", rule.lo);
    problem = std::string(name) + " must be at least " + bound + ", not " + python_float(v);
  }
  void option(const char*, const bool&, option_rules::Flag) {}
  void option(const char* name, const std::optional<int>& v, option_rules::Rank rule) {
    if (v.has_value()) option(name, *v, option_rules::Integer{rule.lo, rule.hi});
  }
};

}  // namespace

std::string integer_bounds(const option_rules::Integer& rule) {
  if (rule.hi == option_rules::kNoLimit) return "must be at least " + std::to_string(rule.lo);
  return "must be between " + std::to_string(rule.lo) + " and " + std::to_string(rule.hi);
}

std::string core_options_problem(const CoreOptions& options) {
  Checker checker;
  visit_core_options(checker, options);
  return checker.problem;
}

}  // namespace tensorscope
