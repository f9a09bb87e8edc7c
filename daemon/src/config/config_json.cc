// config_json.cc — the JSON form of the daemon config (write_json and read_json in
// config_detail.h), handed from the supervisor to its workers: the same nesting as the
// YAML, every key present; reading requires every key, refuses unknown ones and checks
// every value, so that read_json(write_json(c)) == c exactly.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config_detail.h"
#include "config/config_fields.h"
#include "config/config_rules.h"
#include "config/config_text.h"

namespace tensorscope::config_detail {
namespace {

std::string describe(const nlohmann::json& j) {
  if (j.is_string()) return quote(j.get_ref<const std::string&>());
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > kMaxShownChars) s = s.substr(0, kMaxShownChars) + "...";
  return s;
}

Status json_error(const std::string& path, const std::string& problem) {
  return Status::error(std::string(kJsonSource) + ": " + (path.empty() ? "" : path + ": ") + problem);
}

Status collect_json_values(const nlohmann::json& root, std::map<std::string, const nlohmann::json*>* values) {
  const Layout& l = layout();
  if (!root.is_object()) return json_error("", "expected an object, got " + describe(root));
  for (const auto& [key, value] : root.items()) {
    const std::string shown = printable_key(key);
    if (l.is_top_field(key)) {
      (*values)[key] = &value;
      continue;
    }
    const std::vector<std::string>* keys = l.section_keys(key);
    if (keys == nullptr) return json_error(shown, "unknown key (known keys: " + join(l.top_keys) + ")");
    if (!value.is_object())
      return json_error(key, "expected an object with keys " + join(*keys) + ", got " + describe(value));
    for (const auto& [sub, sub_value] : value.items()) {
      if (std::find(keys->begin(), keys->end(), sub) == keys->end())
        return json_error(key + "." + printable_key(sub), "unknown key (known keys: " + join(*keys) + ")");
      (*values)[key + "." + sub] = &sub_value;
    }
  }
  return Status::ok();
}

class JsonReader {
 public:
  explicit JsonReader(std::map<std::string, const nlohmann::json*> values) : values_(std::move(values)) {}

  const Status& status() const { return status_; }

  void text(const char* path, std::string& out, StringRule rule) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    if (!j->is_string()) return fail(path, "expected a string, got " + describe(*j));
    const std::string& s = j->get_ref<const std::string&>();
    const std::string problem = string_problem(s, rule);
    if (!problem.empty()) return fail(path, problem);
    out = s;
  }

  template <typename E>
  void choice(const char* path, E& out) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    const std::optional<E> v = j->is_string() ? choice_from_name<E>(j->get_ref<const std::string&>()) : std::nullopt;
    if (!v) return fail(path, "expected " + choice_expectation(choice_names(E{})) + ", got " + describe(*j));
    out = *v;
  }
  void color(const char* path, Rgb& out) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    const std::optional<Rgb> v = j->is_string() ? parse_rgb(j->get_ref<const std::string&>()) : std::nullopt;
    if (!v) return fail(path, std::string("expected ") + kColorExpectation + ", got " + describe(*j));
    out = *v;
  }
  template <typename T>
  void integer(const char* path, T& out, const IntRule& raw_rule) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    const IntRule rule = clamp_to<T>(raw_rule);
    std::optional<int64_t> v;
    if (j->is_number_unsigned()) {
      const uint64_t u = j->get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) v = static_cast<int64_t>(u);
    } else if (j->is_number_integer()) {
      v = j->get<int64_t>();
    }
    if (!v || !in_range(rule, *v)) return fail(path, "expected " + expectation(rule) + ", got " + describe(*j));
    IntField<T>::set(out, *v);
  }

  void number(const char* path, double& out, const NumberRule& rule) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    std::optional<double> v;
    if (j->is_number()) v = j->get<double>();
    if (!v || !in_range(rule, *v)) return fail(path, "expected " + expectation(rule) + ", got " + describe(*j));
    out = *v;
  }

  template <typename T>
  void rules(const char* path, std::vector<StreamRule<T>>& out) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    if (!j->is_array()) return fail(path, "expected an array, got " + describe(*j));
    std::vector<StreamRule<T>> parsed;
    for (const auto& item : *j) {
      if (!item.is_object() || item.size() != 2 || !item.contains("match") || !item.contains("mode") ||
          !item["match"].is_string() || !item["mode"].is_string())
        return fail(path, "expected {\"match\", \"mode\"} objects, got " + describe(item));
      const std::string match = item["match"].get<std::string>();
      std::string problem = match_problem(match);
      const std::optional<T> value = choice_from_name<T>(item["mode"].get_ref<const std::string&>());
      if (problem.empty() && !value)
        problem = "\"mode\" must be " + choice_expectation(choice_names(T{})) + ", got " + describe(item["mode"]);
      if (!problem.empty()) return fail(path, problem);
      parsed.push_back({match, *value});
    }
    out = std::move(parsed);
  }
  template <typename Rule>
  void number_rules(const char* path, std::vector<Rule>& out) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    if (!j->is_array()) return fail(path, "expected an array, got " + describe(*j));
    const auto [first, second] = Rule::kNumbers;
    std::vector<Rule> parsed;
    for (const auto& item : *j) {
      if (!item.is_object() || item.size() != 3 || !item.contains("match") || !item.contains(first) ||
          !item.contains(second) || !item["match"].is_string() || !item[first].is_number() || !item[second].is_number())
        return fail(
            path,
            std::string("expected {\"match\", \"") + first + "\", \"" + second + "\"} objects, got " + describe(item));
      Rule rule;
      rule.match = item["match"].get<std::string>();
      rule.*Rule::kFields[0] = item[first].template get<double>();
      rule.*Rule::kFields[1] = item[second].template get<double>();
      const std::string problem = rule_problem(rule);
      if (!problem.empty()) return fail(path, problem);
      parsed.push_back(std::move(rule));
    }
    out = std::move(parsed);
  }

 private:
  const nlohmann::json* find(const char* path) {
    if (!status_.is_ok()) return nullptr;
    const auto it = values_.find(path);
    if (it == values_.end()) {
      fail(path, "missing (the JSON form must contain every key)");
      return nullptr;
    }
    return it->second;
  }
  void fail(const char* path, const std::string& problem) { status_ = json_error(path, problem); }

  std::map<std::string, const nlohmann::json*> values_;
  Status status_;
};

class JsonWriter {
 public:
  nlohmann::json& json() { return json_; }

  void text(const char* path, std::string& v, StringRule) { slot(path) = v; }
  template <typename E>
  void choice(const char* path, E& v) {
    slot(path) = std::string(choice_name(v));
  }
  void color(const char* path, Rgb& v) { slot(path) = to_string(v); }
  template <typename T>
  void integer(const char* path, T& v, const IntRule&) {
    slot(path) = IntField<T>::get(v);
  }
  void number(const char* path, double& v, const NumberRule&) { slot(path) = v; }
  template <typename T>
  void rules(const char* path, std::vector<StreamRule<T>>& v) {
    nlohmann::json list = nlohmann::json::array();
    for (const StreamRule<T>& r : v) list.push_back({{"match", r.match}, {"mode", std::string(choice_name(r.value))}});
    slot(path) = std::move(list);
  }
  template <typename Rule>
  void number_rules(const char* path, std::vector<Rule>& v) {
    nlohmann::json list = nlohmann::json::array();
    for (const Rule& r : v) {
      list.push_back(
          {{"match", r.match}, {Rule::kNumbers[0], r.*Rule::kFields[0]}, {Rule::kNumbers[1], r.*Rule::kFields[1]}});
    }
    slot(path) = std::move(list);
  }

 private:
  nlohmann::json& slot(const std::string& path) {
    const auto dot = path.find('.');
    if (dot == std::string::npos) return json_[path];
    return json_[path.substr(0, dot)][path.substr(dot + 1)];
  }
  nlohmann::json json_ = nlohmann::json::object();
};

}  // namespace

nlohmann::json write_json(const DaemonConfig& config) {
  DaemonConfig copy = config;
  JsonWriter writer;
  visit_fields(writer, copy);
  return std::move(writer.json());
}

StatusOr<DaemonConfig> read_json(const nlohmann::json& json) {
  std::map<std::string, const nlohmann::json*> values;
  const Status collected = collect_json_values(json, &values);
  if (!collected.is_ok()) return collected;
  DaemonConfig config;
  JsonReader reader(std::move(values));
  visit_fields(reader, config);
  if (!reader.status().is_ok()) return reader.status();
  return config;
}

}  // namespace tensorscope::config_detail
