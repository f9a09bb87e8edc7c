// config_validator.cc — the check of a DaemonConfig in memory (validate in
// config_detail.h), e.g. after command-line overrides: every field against its rule in
// visit_fields(), messages naming the dotted key.
#include <cstddef>
#include <string>
#include <vector>

#include "config/config_detail.h"
#include "config/config_fields.h"
#include "config/config_rules.h"
#include "config/config_text.h"

namespace tensorscope::config_detail {
namespace {

class Validator {
 public:
  const Status& status() const { return status_; }

  void text(const char* path, std::string& v, StringRule rule) {
    if (!status_.is_ok()) return;
    const std::string problem = string_problem(v, rule);
    if (!problem.empty()) fail(path, problem);
  }
  template <typename E>
  void choice(const char* path, E& v) {
    if (status_.is_ok() && choice_name(v).empty())
      fail(path,
           "expected " + choice_expectation(choice_names(E{})) + ", got the value " +
               std::to_string(static_cast<int>(v)));
  }
  void color(const char*, Rgb&) {}  // every Rgb is a colour
  template <typename T>
  void integer(const char* path, T& v, const IntRule& raw_rule) {
    const IntRule rule = clamp_to<T>(raw_rule);
    if (status_.is_ok() && !in_range(rule, IntField<T>::get(v)))
      fail(path, "expected " + expectation(rule) + ", got " + std::to_string(IntField<T>::get(v)));
  }
  void number(const char* path, double& v, const NumberRule& rule) {
    if (status_.is_ok() && !in_range(rule, v))
      fail(path, "expected " + expectation(rule) + ", got " + format_number(v));
  }
  template <typename T>
  void rules(const char* path, std::vector<StreamRule<T>>& v) {
    for (std::size_t i = 0; i < v.size() && status_.is_ok(); ++i) {
      std::string problem = match_problem(v[i].match);
      if (problem.empty() && choice_name(v[i].value).empty())
        problem = "\"mode\" must be " + choice_expectation(choice_names(T{}));
      if (!problem.empty()) fail(path, "[" + std::to_string(i) + "] " + problem);
    }
  }
  template <typename Rule>
  void number_rules(const char* path, std::vector<Rule>& v) {
    for (std::size_t i = 0; i < v.size() && status_.is_ok(); ++i) {
      const std::string problem = rule_problem(v[i]);
      if (!problem.empty()) fail(path, "[" + std::to_string(i) + "] " + problem);
    }
  }

 private:
  void fail(const char* path, const std::string& problem) {
    status_ = Status::error(std::string(path) + ": " + problem);
  }
  Status status_;
};

}  // namespace

Status validate(const DaemonConfig& config) {
  DaemonConfig copy = config;
  Validator validator;
  visit_fields(validator, copy);
  return validator.status();
}

}  // namespace tensorscope::config_detail
