// config_fields.cc — see config_fields.h.
#include "config/config_fields.h"

#include <algorithm>

#include "config/config_text.h"

namespace tensorscope::config_detail {
namespace {

struct KeyCollector {
  std::vector<std::string> paths;
  void text(const char* p, std::string&, StringRule) { paths.emplace_back(p); }
  template <typename E>
  void choice(const char* p, E&) {
    paths.emplace_back(p);
  }
  void color(const char* p, Rgb&) { paths.emplace_back(p); }
  template <typename T>
  void integer(const char* p, T&, const IntRule&) {
    paths.emplace_back(p);
  }
  void number(const char* p, double&, const NumberRule&) { paths.emplace_back(p); }
  template <typename T>
  void rules(const char* p, std::vector<StreamRule<T>>&) {
    paths.emplace_back(p);
  }
  template <typename Rule>
  void number_rules(const char* p, std::vector<Rule>&) {
    paths.emplace_back(p);
  }
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

}  // namespace

const Layout& layout() {
  static const Layout kLayout = build_layout();
  return kLayout;
}

std::string suggestion(const std::string& section, const std::string& key) {
  const Layout& l = layout();
  for (const std::string& path : l.paths) {
    const auto dot = path.find('.');
    const std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
    const std::string sec = dot == std::string::npos ? "" : path.substr(0, dot);
    if (leaf == key && sec != section) return "; did you mean \"" + path + "\"?";
  }
  const std::vector<std::string>& candidates = section.empty() ? l.top_keys : *l.section_keys(section);
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

}  // namespace tensorscope::config_detail
