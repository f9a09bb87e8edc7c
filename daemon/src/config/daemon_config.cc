// daemon_config.cc — see daemon_config.h.
//
// Every key is described once, in visit_fields(); the YAML reader, the JSON reader and
// writer, the validator and the list of known keys are visitors over that description,
// so a new key cannot be forgotten by one of them.
#include "config/daemon_config.h"
#include "tensorscope/base/text_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensorscope/shared/session_name.h"

namespace tensorscope {
namespace {

constexpr char kJsonSource[] = "daemon config JSON";
constexpr std::size_t kMaxShownChars = 80;

// ---------------------------------------------------------------- text helpers

std::string quote(std::string_view s) { return quote_for_message(s, kMaxShownChars); }

// A key from the file as part of a dotted path: the quoted form without the quotes
// when it needs no escaping, else the quoted form.
std::string printable_key(std::string_view key) {
  std::string q = quote(key);
  std::string bare = q.substr(1, q.size() - 2);
  const bool plain =
      !key.empty() && bare == key && key.find_first_of(" .\"") == std::string_view::npos;
  return plain ? bare : q;
}

std::string format_number(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  if (res.ec != std::errc()) return "?";
  return std::string(buf, res.ptr);
}

template <typename Range>
std::string join(const Range& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(extra) >= s.size()) return false;  // truncated
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000))
      return false;  // overlong
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Strict number parsing: the whole text must be the number; a leading '+' is allowed.
std::optional<int64_t> parse_int(std::string_view s) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s[0] == '-') return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s[0] == '-') return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

// ---------------------------------------------------------------- rules

enum class StringRule { kAny, kNonEmpty, kSessionName, kColor, kRegex };

struct IntRule {
  int64_t lo;
  int64_t hi;
  std::string what;  // "" = "an integer between lo and hi" / "an integer >= lo"
};

IntRule between(int64_t lo, int64_t hi) { return {lo, hi, ""}; }
IntRule at_least(int64_t lo) { return {lo, std::numeric_limits<int64_t>::max(), ""}; }

template <typename T>
IntRule clamp_to(IntRule r) {
  r.lo = std::max<int64_t>(r.lo, std::numeric_limits<T>::min());
  r.hi = std::min<int64_t>(r.hi, std::numeric_limits<T>::max());
  return r;
}

std::string expectation(const IntRule& r) {
  if (!r.what.empty()) return r.what;
  if (r.hi == std::numeric_limits<int64_t>::max()) return "an integer >= " + std::to_string(r.lo);
  return "an integer between " + std::to_string(r.lo) + " and " + std::to_string(r.hi);
}

bool in_range(const IntRule& r, int64_t v) { return v >= r.lo && v <= r.hi; }

struct NumberRule {
  double lo;
  bool lo_inclusive;
  double hi;
  bool hi_inclusive;
};

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

using Choices = std::span<const std::string_view>;

std::string choice_expectation(Choices accepted) { return "one of " + join(accepted); }

bool is_choice(Choices accepted, std::string_view v) {
  return std::find(accepted.begin(), accepted.end(), v) != accepted.end();
}

// "" when `v` satisfies `rule`, else the problem (without the key).
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

// "" when the rule is usable: a regex that compiles and a known mode.
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

// "" when the range rule is usable.
std::string range_problem(const RangeRule& rule) {
  ModeRule as_mode{rule.match, "auto"};
  std::string problem = rule_problem(as_mode, Choices(kRenderModes));
  if (!problem.empty()) return problem;
  if (!std::isfinite(rule.lo) || !std::isfinite(rule.hi) || !(rule.lo < rule.hi))
    return "\"lo\" and \"hi\" must be finite numbers with lo < hi";
  return "";
}

// ---------------------------------------------------------------- the keys

// Every key, its place in DaemonConfig and its rule. Visitors stop doing work after
// their first error, so a rule may rely on the keys visited before it being valid.
template <typename V>
void visit_fields(V& v, DaemonConfig& c) {
  v.text("session", c.session, StringRule::kSessionName);
  v.text("output_dir", c.output_dir, StringRule::kNonEmpty);
  v.text("runtime_dir", c.runtime_dir, StringRule::kAny);
  v.integer("workers", c.workers, between(1, 64));
  v.choice("log_level", c.log_level, Choices(kLogLevels));

  v.integer("video.width", c.video.width, between(160, 7680));
  v.integer("video.height", c.video.height, between(120, 4320));
  v.number("video.fps", c.video.fps, NumberRule{0, false, 240, true});
  v.integer("video.max_frames", c.video.max_frames, between(1, 10000000));
  v.choice("video.codec", c.video.codec, Choices(kVideoCodecs));

  v.choice("render.mode", c.render.mode, Choices(kRenderModes));
  v.rules("render.stream_modes", c.render.stream_modes, Choices(kRenderModes));
  v.ranges("render.histogram_ranges", c.render.histogram_ranges);
  v.integer("render.histogram_bins", c.render.histogram_bins, between(2, 4096));
  v.number("render.histogram_margin", c.render.histogram_margin, NumberRule{0, true, 1, true});
  v.choice("render.histogram_scale", c.render.histogram_scale, Choices(kHistogramScales));
  v.choice("render.heatmap_reduction", c.render.heatmap_reduction, Choices(kHeatmapReductions));
  v.choice("render.pca_layout", c.render.pca_layout, Choices(kPcaLayouts));
  v.number("render.tsne_perplexity", c.render.tsne_perplexity, NumberRule{2, true, 100, true});
  v.integer("render.tsne_iterations", c.render.tsne_iterations, between(50, 10000));
  v.integer("render.tsne_warm_iterations", c.render.tsne_warm_iterations, between(10, 10000));
  v.integer("render.tsne_max_rows", c.render.tsne_max_rows, between(10, 1000000));
  v.integer("render.tsne_seed", c.render.tsne_seed, at_least(0));

  v.text("style.background", c.style.background, StringRule::kColor);
  v.text("style.foreground", c.style.foreground, StringRule::kColor);
  v.text("style.bar", c.style.bar, StringRule::kColor);
  v.text("style.grid", c.style.grid, StringRule::kColor);
  v.text("style.accent", c.style.accent, StringRule::kColor);

  RecordConfig& r = c.record;
  v.text("record.video", r.video, StringRule::kRegex);
  v.text("record.stats", r.stats, StringRule::kRegex);
  v.text("record.npy", r.npy, StringRule::kRegex);
  v.text("record.hdf5", r.hdf5, StringRule::kRegex);
  v.text("record.tree", r.tree, StringRule::kRegex);
  v.choice("record.hdf5_dtype", r.hdf5_dtype, Choices(kHdf5Dtypes));
  v.integer("record.hdf5_gzip", r.hdf5_gzip, between(0, 9));
  v.choice("record.hdf5_change_detection", r.hdf5_change_detection, Choices(kBooleans));
  v.integer("record.hdf5_rotate_bytes", r.hdf5_rotate_bytes, at_least(1048576));
  v.integer("record.hdf5_rotate_seconds", r.hdf5_rotate_seconds, between(1, 86400));
  v.integer("record.hdf5_flush_seconds", r.hdf5_flush_seconds, between(0, 3600));
  v.integer("record.hdf5_change_detection_bytes", r.hdf5_change_detection_bytes, at_least(0));
  v.integer("record.queue_bytes", r.queue_bytes, at_least(1048576));

  v.integer("limits.max_record_bytes", c.limits.max_record_bytes, at_least(1));
  v.integer("limits.max_streams_per_worker", c.limits.max_streams_per_worker, at_least(1));
  v.integer("limits.max_open_videos_per_worker", c.limits.max_open_videos_per_worker, between(1, 4096));

  SupervisorConfig& s = c.supervisor;
  v.integer("supervisor.heartbeat_interval_ms", s.heartbeat_interval_ms, between(10, 60000));
  const int64_t interval = s.heartbeat_interval_ms;
  v.integer("supervisor.heartbeat_timeout_ms", s.heartbeat_timeout_ms,
            IntRule{interval + 1, std::numeric_limits<int>::max(),
                    "an integer greater than supervisor.heartbeat_interval_ms (" +
                        std::to_string(interval) + ")"});
  v.integer("supervisor.restart_backoff_initial_ms", s.restart_backoff_initial_ms,
            between(1, 60000));
  const int64_t initial = s.restart_backoff_initial_ms;
  v.integer("supervisor.restart_backoff_max_ms", s.restart_backoff_max_ms,
            IntRule{initial, std::numeric_limits<int>::max(),
                    "an integer >= supervisor.restart_backoff_initial_ms (" +
                        std::to_string(initial) + ")"});
  v.integer("supervisor.shutdown_timeout_ms", s.shutdown_timeout_ms, between(100, 600000));
  v.integer("supervisor.idle_exit_ms", s.idle_exit_ms, at_least(0));
}

// The key tree, derived from visit_fields().
struct Layout {
  std::vector<std::string> paths;     // every dotted path, in visit order
  std::vector<std::string> top_keys;  // top-level names: fields and sections, in order
  std::set<std::string> top_fields;   // top-level names that are values
  std::map<std::string, std::vector<std::string>> sections;  // section -> its keys

  bool is_top_field(const std::string& k) const { return top_fields.count(k) != 0; }
  const std::vector<std::string>* section_keys(const std::string& k) const {
    const auto it = sections.find(k);
    return it == sections.end() ? nullptr : &it->second;
  }
};

struct KeyCollector {
  std::vector<std::string> paths;
  void text(const char* p, std::string&, StringRule) { paths.emplace_back(p); }
  void choice(const char* p, std::string&, Choices) { paths.emplace_back(p); }
  template <typename T>
  void integer(const char* p, T&, const IntRule&) {
    paths.emplace_back(p);
  }
  void number(const char* p, double&, const NumberRule&) { paths.emplace_back(p); }
  void rules(const char* p, std::vector<ModeRule>&, Choices) { paths.emplace_back(p); }
  void ranges(const char* p, std::vector<RangeRule>&) { paths.emplace_back(p); }
};

Layout build_layout() {
  Layout layout;
  KeyCollector collector;
  DaemonConfig scratch;
  visit_fields(collector, scratch);
  layout.paths = collector.paths;
  for (const std::string& path : layout.paths) {
    const auto dot = path.find('.');
    const std::string top = path.substr(0, dot);
    if (std::find(layout.top_keys.begin(), layout.top_keys.end(), top) == layout.top_keys.end())
      layout.top_keys.push_back(top);
    if (dot == std::string::npos) {
      layout.top_fields.insert(path);
    } else {
      layout.sections[top].push_back(path.substr(dot + 1));
    }
  }
  return layout;
}

const Layout& layout() {
  static const Layout kLayout = build_layout();
  return kLayout;
}

// A hint for an unknown key: the same name in another section, or a near spelling.
std::string suggestion(const std::string& section, const std::string& key) {
  const Layout& l = layout();
  for (const std::string& path : l.paths) {
    const auto dot = path.find('.');
    const std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
    const std::string sec = dot == std::string::npos ? "" : path.substr(0, dot);
    if (leaf == key && sec != section) return "; did you mean \"" + path + "\"?";
  }
  const std::vector<std::string>& candidates =
      section.empty() ? l.top_keys : *l.section_keys(section);
  std::string best;
  std::size_t best_distance = 3;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(key, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (best.empty() || key.size() > 64) return "";
  return "; did you mean \"" + (section.empty() ? best : section + "." + best) + "\"?";
}

// ---------------------------------------------------------------- YAML

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "an empty value";
    case YAML::NodeType::Scalar:
      return quote(n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

std::string where(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return "";
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

std::string yaml_error(const std::string& source, const std::string& path,
                       const std::string& problem, const YAML::Node& at) {
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
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    content_ = true;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
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
      const std::string what =
          static_cast<std::size_t>(at.pos) < text.size() ? quote(text.substr(at.pos, 1)) : "input";
      return Status::error(source + ": YAML syntax error at line " + std::to_string(at.line + 1) +
                           ", column " + std::to_string(at.column + 1) + ": unexpected " + what);
    }
    previous_start = static_cast<std::size_t>(at.pos);
    if (probe.has_content() && ++documents_with_content > 1) {
      return Status::error(source + ": contains more than one YAML document (separated by " +
                           "'---'); expected one" + where(at));
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
      return Status::error(
          yaml_error(source, "", "expected a key name, got " + describe(key_node), key_node));
    const std::string key = key_node.Scalar();
    const std::string shown = printable_key(key);
    if (!seen_top.insert(key).second)
      return Status::error(yaml_error(source, shown, "duplicate key", key_node));
    if (l.is_top_field(key)) {
      (*values)[key] = value;
      continue;
    }
    const std::vector<std::string>* keys = l.section_keys(key);
    if (keys == nullptr) {
      return Status::error(yaml_error(
          source, shown, "unknown key (known keys: " + join(l.top_keys) + ")" + suggestion("", key),
          key_node));
    }
    if (value.IsNull()) continue;  // "video:" with everything below commented out
    if (!value.IsMap()) {
      return Status::error(yaml_error(
          source, key, "expected a mapping with keys " + join(*keys) + ", got " + describe(value),
          value));
    }
    std::set<std::string> seen;
    for (auto jt = value.begin(); jt != value.end(); ++jt) {
      const YAML::Node sub_node = jt->first;
      if (!sub_node.IsScalar())
        return Status::error(
            yaml_error(source, key, "expected a key name, got " + describe(sub_node), sub_node));
      const std::string sub = sub_node.Scalar();
      const std::string sub_shown = key + "." + printable_key(sub);
      if (!seen.insert(sub).second)
        return Status::error(yaml_error(source, sub_shown, "duplicate key", sub_node));
      if (std::find(keys->begin(), keys->end(), sub) == keys->end()) {
        return Status::error(yaml_error(
            source, sub_shown,
            "unknown key (known keys: " + join(*keys) + ")" + suggestion(key, sub), sub_node));
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

  void choice(const char* path, std::string& out, Choices accepted) {
    const YAML::Node* n = find(path);
    if (n == nullptr) return;
    if (!n->IsScalar() || !is_choice(accepted, n->Scalar()))
      return fail(path, *n, "expected " + choice_expectation(accepted) + ", got " + describe(*n));
    out = n->Scalar();
  }

  template <typename T>
  void integer(const char* path, T& out, const IntRule& raw_rule) {
    if (!status_.is_ok()) return;
    const IntRule rule = clamp_to<T>(raw_rule);
    const YAML::Node* n = find(path);
    if (n == nullptr) {
      // Absent: the default stays, but a rule that depends on another key (timeout >
      // interval) may no longer hold for it.
      if (!in_range(rule, static_cast<int64_t>(out))) {
        status_ =
            Status::error(source_ + ": " + path + ": expected " + expectation(rule) + ", got " +
                          std::to_string(out) + " (its default value; set this key too)");
      }
      return;
    }
    std::optional<int64_t> v;
    if (n->IsScalar()) v = parse_int(n->Scalar());
    if (!v || !in_range(rule, *v))
      return fail(path, *n, "expected " + expectation(rule) + ", got " + describe(*n));
    out = static_cast<T>(*v);
  }

  void number(const char* path, double& out, const NumberRule& rule) {
    const YAML::Node* n = find(path);
    if (n == nullptr) return;
    std::optional<double> v;
    if (n->IsScalar()) v = parse_double(n->Scalar());
    if (!v || !in_range(rule, *v))
      return fail(path, *n, "expected " + expectation(rule) + ", got " + describe(*n));
    out = *v;
  }

  void rules(const char* path, std::vector<ModeRule>& out, Choices modes) {
    const YAML::Node* n = find(path);
    if (n == nullptr || n->IsNull()) return;
    const std::string shape = "expected a list of {match: REGEX, mode: MODE}";
    if (!n->IsSequence()) return fail(path, *n, shape + ", got " + describe(*n));
    std::vector<ModeRule> parsed;
    for (std::size_t i = 0; i < n->size(); ++i) {
      const YAML::Node item = (*n)[i];
      const std::string where = std::string(path) + "[" + std::to_string(i) + "]";
      if (!item.IsMap() || item.size() != 2 || !item["match"] || !item["mode"] ||
          !item["match"].IsScalar() || !item["mode"].IsScalar()) {
        status_ = Status::error(yaml_error(source_, where, shape + ", got " + describe(item), item));
        return;
      }
      ModeRule rule{item["match"].Scalar(), item["mode"].Scalar()};
      const std::string problem = rule_problem(rule, modes);
      if (!problem.empty()) {
        status_ = Status::error(yaml_error(source_, where, problem, item));
        return;
      }
      parsed.push_back(std::move(rule));
    }
    out = std::move(parsed);
  }

  void ranges(const char* path, std::vector<RangeRule>& out) {
    const YAML::Node* n = find(path);
    if (n == nullptr || n->IsNull()) return;
    const std::string shape = "expected a list of {match: REGEX, lo: NUMBER, hi: NUMBER}";
    if (!n->IsSequence()) return fail(path, *n, shape + ", got " + describe(*n));
    std::vector<RangeRule> parsed;
    for (std::size_t i = 0; i < n->size(); ++i) {
      const YAML::Node item = (*n)[i];
      const std::string where = std::string(path) + "[" + std::to_string(i) + "]";
      std::optional<double> lo, hi;
      if (item.IsMap() && item.size() == 3 && item["match"] && item["lo"] && item["hi"] &&
          item["match"].IsScalar() && item["lo"].IsScalar() && item["hi"].IsScalar()) {
        lo = parse_double(item["lo"].Scalar());
        hi = parse_double(item["hi"].Scalar());
      }
      if (!lo || !hi) {
        status_ = Status::error(yaml_error(source_, where, shape + ", got " + describe(item), item));
        return;
      }
      RangeRule rule{item["match"].Scalar(), *lo, *hi};
      const std::string problem = range_problem(rule);
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

// ---------------------------------------------------------------- JSON

std::string describe(const nlohmann::json& j) {
  if (j.is_string()) return quote(j.get_ref<const std::string&>());
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > kMaxShownChars) s = s.substr(0, kMaxShownChars) + "...";
  return s;
}

Status json_error(const std::string& path, const std::string& problem) {
  return Status::error(std::string(kJsonSource) + ": " + (path.empty() ? "" : path + ": ") +
                       problem);
}

Status collect_json_values(const nlohmann::json& root,
                           std::map<std::string, const nlohmann::json*>* values) {
  const Layout& l = layout();
  if (!root.is_object()) return json_error("", "expected an object, got " + describe(root));
  for (const auto& [key, value] : root.items()) {
    const std::string shown = printable_key(key);
    if (l.is_top_field(key)) {
      (*values)[key] = &value;
      continue;
    }
    const std::vector<std::string>* keys = l.section_keys(key);
    if (keys == nullptr)
      return json_error(shown, "unknown key (known keys: " + join(l.top_keys) + ")");
    if (!value.is_object())
      return json_error(key,
                        "expected an object with keys " + join(*keys) + ", got " + describe(value));
    for (const auto& [sub, sub_value] : value.items()) {
      if (std::find(keys->begin(), keys->end(), sub) == keys->end())
        return json_error(key + "." + printable_key(sub),
                          "unknown key (known keys: " + join(*keys) + ")");
      (*values)[key + "." + sub] = &sub_value;
    }
  }
  return Status::ok();
}

class JsonReader {
 public:
  explicit JsonReader(std::map<std::string, const nlohmann::json*> values)
      : values_(std::move(values)) {}

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

  void choice(const char* path, std::string& out, Choices accepted) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    if (!j->is_string() || !is_choice(accepted, j->get_ref<const std::string&>()))
      return fail(path, "expected " + choice_expectation(accepted) + ", got " + describe(*j));
    out = j->get<std::string>();
  }

  template <typename T>
  void integer(const char* path, T& out, const IntRule& raw_rule) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    const IntRule rule = clamp_to<T>(raw_rule);
    std::optional<int64_t> v;
    if (j->is_number_unsigned()) {
      const uint64_t u = j->get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        v = static_cast<int64_t>(u);
    } else if (j->is_number_integer()) {
      v = j->get<int64_t>();
    }
    if (!v || !in_range(rule, *v))
      return fail(path, "expected " + expectation(rule) + ", got " + describe(*j));
    out = static_cast<T>(*v);
  }

  void number(const char* path, double& out, const NumberRule& rule) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    std::optional<double> v;
    if (j->is_number()) v = j->get<double>();
    if (!v || !in_range(rule, *v))
      return fail(path, "expected " + expectation(rule) + ", got " + describe(*j));
    out = *v;
  }

  void rules(const char* path, std::vector<ModeRule>& out, Choices modes) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    if (!j->is_array()) return fail(path, "expected an array, got " + describe(*j));
    std::vector<ModeRule> parsed;
    for (const auto& item : *j) {
      if (!item.is_object() || item.size() != 2 || !item.contains("match") ||
          !item.contains("mode") || !item["match"].is_string() || !item["mode"].is_string())
        return fail(path, "expected {\"match\", \"mode\"} objects, got " + describe(item));
      ModeRule rule{item["match"].get<std::string>(), item["mode"].get<std::string>()};
      const std::string problem = rule_problem(rule, modes);
      if (!problem.empty()) return fail(path, problem);
      parsed.push_back(std::move(rule));
    }
    out = std::move(parsed);
  }

  void ranges(const char* path, std::vector<RangeRule>& out) {
    const nlohmann::json* j = find(path);
    if (j == nullptr) return;
    if (!j->is_array()) return fail(path, "expected an array, got " + describe(*j));
    std::vector<RangeRule> parsed;
    for (const auto& item : *j) {
      if (!item.is_object() || item.size() != 3 || !item.contains("match") || !item.contains("lo") ||
          !item.contains("hi") || !item["match"].is_string() || !item["lo"].is_number() ||
          !item["hi"].is_number())
        return fail(path, "expected {\"match\", \"lo\", \"hi\"} objects, got " + describe(item));
      RangeRule rule{item["match"].get<std::string>(), item["lo"].get<double>(), item["hi"].get<double>()};
      const std::string problem = range_problem(rule);
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
  void choice(const char* path, std::string& v, Choices) { slot(path) = v; }
  template <typename T>
  void integer(const char* path, T& v, const IntRule&) {
    slot(path) = static_cast<int64_t>(v);
  }
  void number(const char* path, double& v, const NumberRule&) { slot(path) = v; }
  void rules(const char* path, std::vector<ModeRule>& v, Choices) {
    nlohmann::json list = nlohmann::json::array();
    for (const ModeRule& r : v) list.push_back({{"match", r.match}, {"mode", r.mode}});
    slot(path) = std::move(list);
  }
  void ranges(const char* path, std::vector<RangeRule>& v) {
    nlohmann::json list = nlohmann::json::array();
    for (const RangeRule& r : v) list.push_back({{"match", r.match}, {"lo", r.lo}, {"hi", r.hi}});
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

// ---------------------------------------------------------------- in-memory checks

class Validator {
 public:
  const Status& status() const { return status_; }

  void text(const char* path, std::string& v, StringRule rule) {
    if (!status_.is_ok()) return;
    const std::string problem = string_problem(v, rule);
    if (!problem.empty()) fail(path, problem);
  }
  void choice(const char* path, std::string& v, Choices accepted) {
    if (status_.is_ok() && !is_choice(accepted, v))
      fail(path, "expected " + choice_expectation(accepted) + ", got " + quote(v));
  }
  template <typename T>
  void integer(const char* path, T& v, const IntRule& raw_rule) {
    const IntRule rule = clamp_to<T>(raw_rule);
    if (status_.is_ok() && !in_range(rule, static_cast<int64_t>(v)))
      fail(path, "expected " + expectation(rule) + ", got " + std::to_string(v));
  }
  void number(const char* path, double& v, const NumberRule& rule) {
    if (status_.is_ok() && !in_range(rule, v))
      fail(path, "expected " + expectation(rule) + ", got " + format_number(v));
  }
  void rules(const char* path, std::vector<ModeRule>& v, Choices modes) {
    for (std::size_t i = 0; i < v.size() && status_.is_ok(); ++i) {
      const std::string problem = rule_problem(v[i], modes);
      if (!problem.empty()) fail(path, "[" + std::to_string(i) + "] " + problem);
    }
  }
  void ranges(const char* path, std::vector<RangeRule>& v) {
    for (std::size_t i = 0; i < v.size() && status_.is_ok(); ++i) {
      const std::string problem = range_problem(v[i]);
      if (!problem.empty()) fail(path, "[" + std::to_string(i) + "] " + problem);
    }
  }

 private:
  void fail(const char* path, const std::string& problem) {
    status_ = Status::error(std::string(path) + ": " + problem);
  }
  Status status_;
};

// ---------------------------------------------------------------- file reading

StatusOr<std::string> read_small_file(const std::string& path) {
  if (path.empty()) return Status::error("no config file path given");
  if (path.find('\0') != std::string::npos)
    return Status::error(quote(path) + ": config file path contains a NUL byte");
  return read_text_file(path, kMaxConfigFileBytes, "config file");
}

}  // namespace

// ---------------------------------------------------------------- public API

StatusOr<DaemonConfig> parse_daemon_config(const std::string& yaml_text,
                                           const std::string& source_name) {
  const std::string source = source_name.empty() ? "<config>" : source_name;
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
          source, "",
          "expected a mapping of config keys at the top level (like \"workers: 2\"), got " +
              describe(root),
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
                                           : " at line " + std::to_string(e.mark.line + 1) +
                                                 ", column " + std::to_string(e.mark.column + 1)) +
                         ": " + e.msg);
  } catch (const YAML::Exception& e) {
    return Status::error(source + ": cannot read YAML" + where(e.mark) + ": " + e.msg);
  } catch (const std::exception& e) {
    return Status::error(source + ": cannot read config: " + e.what());
  } catch (...) {
    return Status::error(source + ": cannot read config: unknown error");
  }
}

StatusOr<DaemonConfig> load_daemon_config(const std::string& path) {
  try {
    StatusOr<std::string> text = read_small_file(path);
    if (!text.is_ok()) return text.status();
    return parse_daemon_config(*text, path);
  } catch (const std::exception& e) {
    return Status::error(path + ": cannot read config: " + e.what());
  } catch (...) {
    return Status::error(path + ": cannot read config: unknown error");
  }
}

Status validate_daemon_config(const DaemonConfig& config) {
  try {
    DaemonConfig copy = config;
    Validator validator;
    visit_fields(validator, copy);
    return validator.status();
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot validate config: ") + e.what());
  }
}

nlohmann::json to_json(const DaemonConfig& config) {
  DaemonConfig copy = config;
  JsonWriter writer;
  visit_fields(writer, copy);
  return std::move(writer.json());
}

StatusOr<DaemonConfig> daemon_config_from_json(const nlohmann::json& json) {
  try {
    std::map<std::string, const nlohmann::json*> values;
    const Status collected = collect_json_values(json, &values);
    if (!collected.is_ok()) return collected;
    DaemonConfig config;
    JsonReader reader(std::move(values));
    visit_fields(reader, config);
    if (!reader.status().is_ok()) return reader.status();
    return config;
  } catch (const std::exception& e) {
    return Status::error(std::string(kJsonSource) + ": " + e.what());
  } catch (...) {
    return Status::error(std::string(kJsonSource) + ": unknown error");
  }
}

}  // namespace tensorscope
