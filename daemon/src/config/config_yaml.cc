// config_yaml.cc — the YAML reader of the daemon config (parse_yaml in
// config_detail.h): one document, known keys only, no duplicates, sections as mappings,
// then every value read and checked by a visitor over visit_fields(). Messages name the
// source, the dotted key and the line and column.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config_detail.h"
#include "config/config_fields.h"
#include "config/config_rules.h"
#include "config/config_text.h"

namespace tensorscope::config_detail {
namespace {

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "an empty value";
    case YAML::NodeType::Scalar: return quote(n.Scalar());
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Undefined: break;
  }
  return "nothing";
}

std::string where(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return "";
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) + ")";
}

std::string yaml_error(const std::string& source, const std::string& path, const std::string& problem,
                       const YAML::Node& at) {
  std::string m = source + ": ";
  if (!path.empty()) m += path + ": ";
  return m + problem + where(at.Mark());
}

// Counts the parser's events for one document, to tell empty documents from real ones.
class DocumentProbe : public YAML::EventHandler {
 public:
  void reset() {
    started_ = false;
    content_ = false;
  }
  const YAML::Mark& start() const { return start_; }
  bool started() const { return started_; }
  bool has_content() const { return content_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    start_ = mark;
    started_ = true;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content_ = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { content_ = true; }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnMapEnd() override {}

 private:
  YAML::Mark start_;
  bool started_ = false;
  bool content_ = false;
};

// yaml-cpp 0.7 does not consume a stray flow indicator (',' at the start of a document):
// it reports an empty document at the same place again and again, so YAML::LoadAll
// loops until memory runs out, and YAML::Load silently returns an empty document. This
// pass walks the documents with a plain event handler and stops at such a spot (and at a
// second non-empty document), so that LoadAll is only called on text it can finish.
Status check_documents(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentProbe probe;
  std::optional<std::size_t> previous_start;
  int documents_with_content = 0;
  for (std::size_t i = 0; i <= text.size() + 1; ++i) {  // every document consumes input
    probe.reset();
    if (!parser.HandleNextDocument(probe)) return Status::ok();
    if (!probe.started()) continue;
    const YAML::Mark& at = probe.start();
    if (previous_start && *previous_start == static_cast<std::size_t>(at.pos)) {
      const std::string what = static_cast<std::size_t>(at.pos) < text.size() ? quote(text.substr(at.pos, 1)) : "input";
      return Status::error(source + ": YAML syntax error at line " + std::to_string(at.line + 1) + ", column " +
                           std::to_string(at.column + 1) + ": unexpected " + what);
    }
    previous_start = static_cast<std::size_t>(at.pos);
    if (probe.has_content() && ++documents_with_content > 1) {
      return Status::error(source + ": contains more than one YAML document (separated by " + "'---'); expected one" +
                           where(at));
    }
  }
  return Status::error(source + ": YAML parser made no progress");
}

// Walks the document: known keys only, no duplicates, sections are mappings. Fills
// `values` with the value node of every key present, by dotted path.
Status collect_yaml_values(const YAML::Node& root, const std::string& source,
                           std::map<std::string, YAML::Node>* values) {
  const Layout& l = layout();
  std::set<std::string> seen_top;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    if (!key_node.IsScalar())
      return Status::error(yaml_error(source, "", "expected a key name, got " + describe(key_node), key_node));
    const std::string key = key_node.Scalar();
    const std::string shown = printable_key(key);
    if (!seen_top.insert(key).second) return Status::error(yaml_error(source, shown, "duplicate key", key_node));
    if (l.is_top_field(key)) {
      (*values)[key] = value;
      continue;
    }
    const std::vector<std::string>* keys = l.section_keys(key);
    if (keys == nullptr) {
      return Status::error(yaml_error(
          source, shown, "unknown key (known keys: " + join(l.top_keys) + ")" + suggestion("", key), key_node));
    }
    if (value.IsNull()) continue;  // "video:" with everything below commented out
    if (!value.IsMap()) {
      return Status::error(
          yaml_error(source, key, "expected a mapping with keys " + join(*keys) + ", got " + describe(value), value));
    }
    std::set<std::string> seen;
    for (auto jt = value.begin(); jt != value.end(); ++jt) {
      const YAML::Node sub_node = jt->first;
      if (!sub_node.IsScalar())
        return Status::error(yaml_error(source, key, "expected a key name, got " + describe(sub_node), sub_node));
      const std::string sub = sub_node.Scalar();
      const std::string sub_shown = key + "." + printable_key(sub);
      if (!seen.insert(sub).second) return Status::error(yaml_error(source, sub_shown, "duplicate key", sub_node));
      if (std::find(keys->begin(), keys->end(), sub) == keys->end()) {
        return Status::error(yaml_error(
            source, sub_shown, "unknown key (known keys: " + join(*keys) + ")" + suggestion(key, sub), sub_node));
      }
      (*values)[key + "." + sub] = jt->second;
    }
  }
  return Status::ok();
}

class YamlReader {
 public:
  YamlReader(const std::string& source, std::map<std::string, YAML::Node> values)
      : source_(source), values_(std::move(values)) {}

  const Status& status() const { return status_; }

  void text(const char* path, std::string& out, StringRule rule) {
    const YAML::Node* n = find(path);
    if (n == nullptr) return;
    if (!n->IsScalar()) return fail(path, *n, "expected a string, got " + describe(*n));
    const std::string problem = string_problem(n->Scalar(), rule);
    if (!problem.empty()) return fail(path, *n, problem);
    out = n->Scalar();
  }

  template <typename E>
  void choice(const char* path, E& out) {
    const YAML::Node* n = find(path);
    if (n == nullptr) return;
    const std::optional<E> v = n->IsScalar() ? choice_from_name<E>(n->Scalar()) : std::nullopt;
    if (!v) return fail(path, *n, "expected " + choice_expectation(choice_names(E{})) + ", got " + describe(*n));
    out = *v;
  }

  void color(const char* path, Rgb& out) {
    const YAML::Node* n = find(path);
    if (n == nullptr) return;
    const std::optional<Rgb> v = n->IsScalar() ? parse_rgb(n->Scalar()) : std::nullopt;
    if (!v) return fail(path, *n, std::string("expected ") + kColorExpectation + ", got " + describe(*n));
    out = *v;
  }

  template <typename T>
  void integer(const char* path, T& out, const IntRule& raw_rule) {
    if (!status_.is_ok()) return;
    const IntRule rule = clamp_to<T>(raw_rule);
    const YAML::Node* n = find(path);
    if (n == nullptr) {
      // Absent: the default stays, but a rule that depends on another key (timeout >
      // interval) may no longer hold for it.
      if (!in_range(rule, IntField<T>::get(out))) {
        status_ = Status::error(source_ + ": " + path + ": expected " + expectation(rule) + ", got " +
                                std::to_string(IntField<T>::get(out)) + " (its default value; set this key too)");
      }
      return;
    }
    std::optional<int64_t> v;
    if (n->IsScalar()) v = parse_int(n->Scalar());
    if (!v || !in_range(rule, *v)) return fail(path, *n, "expected " + expectation(rule) + ", got " + describe(*n));
    IntField<T>::set(out, *v);
  }

  void number(const char* path, double& out, const NumberRule& rule) {
    const YAML::Node* n = find(path);
    if (n == nullptr) return;
    std::optional<double> v;
    if (n->IsScalar()) v = parse_double(n->Scalar());
    if (!v || !in_range(rule, *v)) return fail(path, *n, "expected " + expectation(rule) + ", got " + describe(*n));
    out = *v;
  }

  template <typename T>
  void rules(const char* path, std::vector<StreamRule<T>>& out) {
    const YAML::Node* n = find(path);
    if (n == nullptr || n->IsNull()) return;
    const std::string shape = "expected a list of {match: REGEX, mode: " + choice_expectation(choice_names(T{})) + "}";
    if (!n->IsSequence()) return fail(path, *n, shape + ", got " + describe(*n));
    std::vector<StreamRule<T>> parsed;
    for (std::size_t i = 0; i < n->size(); ++i) {
      const YAML::Node item = (*n)[i];
      const std::string where = std::string(path) + "[" + std::to_string(i) + "]";
      if (!item.IsMap() || item.size() != 2 || !item["match"] || !item["mode"] || !item["match"].IsScalar() ||
          !item["mode"].IsScalar()) {
        status_ = Status::error(yaml_error(source_, where, shape + ", got " + describe(item), item));
        return;
      }
      const std::string match = item["match"].Scalar();
      std::string problem = match_problem(match);
      const std::optional<T> value = choice_from_name<T>(item["mode"].Scalar());
      if (problem.empty() && !value)
        problem = "\"mode\" must be " + choice_expectation(choice_names(T{})) + ", got " + describe(item["mode"]);
      if (!problem.empty()) {
        status_ = Status::error(yaml_error(source_, where, problem, item));
        return;
      }
      parsed.push_back({match, *value});
    }
    out = std::move(parsed);
  }

  template <typename Rule>
  void number_rules(const char* path, std::vector<Rule>& out) {
    const YAML::Node* n = find(path);
    if (n == nullptr || n->IsNull()) return;
    const auto [first, second] = Rule::kNumbers;
    const std::string shape =
        std::string("expected a list of {match: REGEX, ") + first + ": NUMBER, " + second + ": NUMBER}";
    if (!n->IsSequence()) return fail(path, *n, shape + ", got " + describe(*n));
    std::vector<Rule> parsed;
    for (std::size_t i = 0; i < n->size(); ++i) {
      const YAML::Node item = (*n)[i];
      const std::string where = std::string(path) + "[" + std::to_string(i) + "]";
      std::optional<double> a, b;
      if (item.IsMap() && item.size() == 3 && item["match"] && item[first] && item[second] &&
          item["match"].IsScalar() && item[first].IsScalar() && item[second].IsScalar()) {
        a = parse_double(item[first].Scalar());
        b = parse_double(item[second].Scalar());
      }
      if (!a || !b) {
        status_ = Status::error(yaml_error(source_, where, shape + ", got " + describe(item), item));
        return;
      }
      Rule rule;
      rule.match = item["match"].Scalar();
      rule.*Rule::kFields[0] = *a;
      rule.*Rule::kFields[1] = *b;
      const std::string problem = rule_problem(rule);
      if (!problem.empty()) {
        status_ = Status::error(yaml_error(source_, where, problem, item));
        return;
      }
      parsed.push_back(std::move(rule));
    }
    out = std::move(parsed);
  }

 private:
  const YAML::Node* find(const char* path) const {
    if (!status_.is_ok()) return nullptr;
    const auto it = values_.find(path);
    return it == values_.end() ? nullptr : &it->second;
  }
  void fail(const char* path, const YAML::Node& at, const std::string& problem) {
    status_ = Status::error(yaml_error(source_, path, problem, at));
  }

  const std::string& source_;
  std::map<std::string, YAML::Node> values_;
  Status status_;
};

}  // namespace

StatusOr<DaemonConfig> parse_yaml(const std::string& yaml_text, const std::string& source) {
  try {
    const Status documents = check_documents(yaml_text, source);
    if (!documents.is_ok()) return documents;
    YAML::Node root;  // the one document with content, if any
    for (const YAML::Node& d : YAML::LoadAll(yaml_text)) {
      if (!d.IsNull()) root = d;
    }
    DaemonConfig config;
    if (!root.IsDefined() || root.IsNull()) return config;  // empty, comments, only "---"

    if (!root.IsMap()) {
      return Status::error(yaml_error(
          source, "", "expected a mapping of config keys at the top level (like \"workers: 2\"), got " + describe(root),
          root));
    }
    std::map<std::string, YAML::Node> values;
    const Status collected = collect_yaml_values(root, source, &values);
    if (!collected.is_ok()) return collected;
    YamlReader reader(source, std::move(values));
    visit_fields(reader, config);
    if (!reader.status().is_ok()) return reader.status();
    return config;
  } catch (const YAML::ParserException& e) {
    return Status::error(source + ": YAML syntax error" +
                         (e.mark.is_null() ? std::string()
                                           : " at line " + std::to_string(e.mark.line + 1) + ", column " +
                                  std::to_string(e.mark.column + 1)) +
                         ": " + e.msg);
  } catch (const YAML::Exception& e) {
    return Status::error(source + ": cannot read YAML" + where(e.mark) + ": " + e.msg);
  }
}

}  // namespace tensorscope::config_detail
