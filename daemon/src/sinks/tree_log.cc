// tree_log.cc — see tree_log.h.
#include "sinks/tree_log.h"

#include <algorithm>
#include <exception>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tensorscope::daemon {
namespace {

constexpr size_t kMaxNameColumn = 56;
constexpr size_t kMaxTypeColumn = 24;

std::string key_of(const ModuleTreeCall& c) {
  return std::to_string(c.thread) + '\x1f' + std::to_string(c.call) + '\x1f' + c.path;
}

std::string module_name(const std::string& track, const std::string& path) {
  return path.empty() ? track : track + "." + path;
}

// The paths of the modules that contain `path`, outermost first ("" is the root).
std::vector<std::string> ancestors_of(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  out.emplace_back();
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
    out.push_back(path.substr(0, dot));
  }
  return out;
}

size_t depth_of(const std::string& path) {
  return path.empty() ? 0 : static_cast<size_t>(std::count(path.begin(), path.end(), '.')) + 1;
}

std::string flow(const ModuleTreeCall& c) {
  std::string out;
  if (c.inputs.empty()) out = "-";
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (i > 0) out += ", ";
    out += c.inputs[i];
  }
  out += " -> ";
  out += c.output.empty() ? std::string("-") : c.output;
  return out;
}

bool same_call(const ModuleTreeCall& a, const ModuleTreeCall& b) {
  return a.type == b.type && a.inputs == b.inputs && a.output == b.output;
}

struct Line {
  char mark = ' ';
  std::string name;  // indented
  std::string type;
  std::string rest;  // flow and notes; empty for a nesting line
};

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string format_tree_step(const std::string& track, int64_t step, const ModuleTree& tree,
                             const ModuleTree* previous, int64_t previous_step) {
  std::unordered_map<std::string, const ModuleTreeCall*> before;
  if (previous != nullptr) {
    for (const ModuleTreeCall& c : previous->calls) before.emplace(key_of(c), &c);
  }
  std::unordered_map<std::string, const ModuleTreeCall*> now;
  for (const ModuleTreeCall& c : tree.calls) now.emplace(key_of(c), &c);

  size_t changed = 0, added = 0, gone = 0;
  std::vector<Line> lines;
  std::vector<std::string> context;  // ancestors and path of the last call line
  uint32_t context_thread = 0;
  for (const ModuleTreeCall& c : tree.calls) {
    char mark = ' ';
    std::string note;
    if (previous != nullptr) {
      const auto it = before.find(key_of(c));
      if (it == before.end()) {
        mark = '+';
        ++added;
      } else if (!same_call(*it->second, c)) {
        mark = '*';
        ++changed;
        note = "  (was " + (it->second->type != c.type ? it->second->type + " " : std::string()) +
               flow(*it->second) + ")";
      }
    }
    if (c.thread != context_thread) context.clear();
    context_thread = c.thread;
    const std::string thread = c.thread == 0 ? std::string() : "[thread " + std::to_string(c.thread) + "] ";
    const std::vector<std::string> ancestors = ancestors_of(c.path);
    size_t common = 0;
    while (common < ancestors.size() && common < context.size() && context[common] == ancestors[common]) ++common;
    for (size_t a = common; a < ancestors.size(); ++a) {
      lines.push_back({' ', std::string(2 * depth_of(ancestors[a]), ' ') + thread + module_name(track, ancestors[a]), {}, {}});
    }
    context = ancestors;
    context.push_back(c.path);
    std::string name = std::string(2 * depth_of(c.path), ' ') + thread + module_name(track, c.path);
    if (c.call > 0) name += "#" + std::to_string(c.call);
    lines.push_back({mark, std::move(name), c.type.empty() ? std::string("?") : c.type, flow(c) + note});
  }
  std::vector<std::string> gone_lines;
  if (previous != nullptr) {
    for (const ModuleTreeCall& c : previous->calls) {
      if (now.count(key_of(c)) > 0) continue;
      ++gone;
      std::string name = (c.thread == 0 ? std::string() : "[thread " + std::to_string(c.thread) + "] ") +
                         module_name(track, c.path);
      if (c.call > 0) name += "#" + std::to_string(c.call);
      gone_lines.push_back("-   " + name + "  (not called; was " + flow(c) + ")");
    }
  }
  bool reordered = false;
  if (previous != nullptr) {
    std::vector<std::string> order_now, order_before;
    for (const ModuleTreeCall& c : tree.calls) {
      if (before.count(key_of(c)) > 0) order_now.push_back(key_of(c));
    }
    for (const ModuleTreeCall& c : previous->calls) {
      if (now.count(key_of(c)) > 0) order_before.push_back(key_of(c));
    }
    reordered = order_now != order_before;
  }

  std::string out = "== step " + std::to_string(step) + " | " + track + " | " + std::to_string(tree.calls.size()) +
                    (tree.calls.size() == 1 ? " call" : " calls");
  if (tree.omitted > 0) out += " (+" + std::to_string(tree.omitted) + " not listed)";
  if (previous == nullptr) {
    out += " | first logged step\n";
  } else {
    std::vector<std::string> parts;
    if (changed > 0) parts.push_back(std::to_string(changed) + " changed");
    if (added > 0) parts.push_back(std::to_string(added) + " new");
    if (gone > 0) parts.push_back(std::to_string(gone) + " gone");
    if (reordered) parts.push_back("order changed");
    if (tree.omitted != previous->omitted) parts.push_back("not listed " + std::to_string(previous->omitted) + " -> " + std::to_string(tree.omitted));
    if (parts.empty()) return out + " | same as step " + std::to_string(previous_step) + "\n";
    out += " | changed since step " + std::to_string(previous_step) + ":";
    for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? " " : ", ") + parts[i];
    out += "\n";
  }
  size_t name_width = 0, type_width = 0;
  for (const Line& l : lines) {
    if (l.rest.empty()) continue;
    name_width = std::max(name_width, std::min(l.name.size(), kMaxNameColumn));
    type_width = std::max(type_width, std::min(l.type.size(), kMaxTypeColumn));
  }
  for (const Line& l : lines) {
    out += l.mark;
    out += "   ";
    if (l.rest.empty()) {
      out += l.name;
    } else {
      out += pad(l.name, name_width) + "  " + pad(l.type, type_width) + "  " + l.rest;
    }
    out += '\n';
  }
  for (const std::string& g : gone_lines) out += g + "\n";
  return out;
}

StatusOr<std::unique_ptr<TreeLogWriter>> TreeLogWriter::open(const std::string& path) {
  auto file = AppendFile::open(path, "# tensorscope module tree log", "module tree log");
  if (!file) return file.status();
  return std::unique_ptr<TreeLogWriter>(new TreeLogWriter(std::move(*file)));
}

Status TreeLogWriter::append(const std::string& track, int64_t step, std::string_view payload) {
  try {
    auto tree = parse_module_tree(payload);
    if (!tree) return Status::error(file_.path() + ": track '" + track + "' step " + std::to_string(step) + ": " + tree.message());
    auto it = previous_.find(track);
    const Logged* before = it == previous_.end() ? nullptr : &it->second;
    Status s = file_.append(format_tree_step(track, step, *tree, before ? &before->tree : nullptr,
                                             before ? before->step : 0));
    if (it != previous_.end()) {
      it->second = Logged{step, std::move(*tree)};
    } else if (previous_.size() < kMaxTracks) {
      previous_.emplace(track, Logged{step, std::move(*tree)});
    }
    return s;
  } catch (const std::exception& e) {
    return Status::error(file_.path() + ": cannot log track '" + track + "': " + e.what());
  }
}

}  // namespace tensorscope::daemon
