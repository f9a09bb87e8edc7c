// tree_log.cc — see tree_log.h.
#include "tensorscope/recording/tree_log.h"

#include <algorithm>
#include <exception>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tensorscope::recording {
namespace {

constexpr size_t kMaxNameColumn = 56;
constexpr size_t kMaxTypeColumn = 24;
constexpr size_t kMaxNesting = 32;                  // ancestor lines and indentation levels
constexpr size_t kMaxBlockBytes = size_t{2} << 20;  // lines of one step beyond are cut

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

std::string indent(const std::string& path) { return std::string(2 * std::min(depth_of(path), kMaxNesting), ' '); }

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

std::string format_tree_step(const std::string& track, int64_t step, const ModuleTree& tree, const ModuleTree* previous,
                             int64_t previous_step) {
  std::unordered_map<std::string, const ModuleTreeCall*> before;
  if (previous != nullptr) {
    for (const ModuleTreeCall& c : previous->calls) before.emplace(key_of(c), &c);
  }
  std::unordered_map<std::string, const ModuleTreeCall*> now;
  for (const ModuleTreeCall& c : tree.calls) now.emplace(key_of(c), &c);

  // Marks against the previous step.
  size_t changed = 0, added = 0, gone = 0;
  // Values (version 2 payloads): of the calls the same as before but for their values.
  size_t values_changed = 0, values_same = 0, values_unknown = 0;
  std::vector<char> marks(tree.calls.size(), ' ');
  std::vector<const ModuleTreeCall*> was(tree.calls.size(), nullptr);
  bool reordered = false;
  if (previous != nullptr) {
    for (size_t i = 0; i < tree.calls.size(); ++i) {
      const auto it = before.find(key_of(tree.calls[i]));
      if (it == before.end()) {
        marks[i] = '+';
        ++added;
      } else if (!same_call(*it->second, tree.calls[i])) {
        marks[i] = '*';
        was[i] = it->second;
        ++changed;
      } else if (tree.calls[i].value == "~") {
        marks[i] = '~';
        ++values_changed;
      } else if (tree.calls[i].value == "=") {
        ++values_same;
      } else if (tree.calls[i].value == "?") {
        ++values_unknown;
      }
    }
    for (const ModuleTreeCall& c : previous->calls) gone += now.count(key_of(c)) == 0 ? 1 : 0;
    std::vector<std::string> order_now, order_before;
    for (const ModuleTreeCall& c : tree.calls) {
      if (before.count(key_of(c)) > 0) order_now.push_back(key_of(c));
    }
    for (const ModuleTreeCall& c : previous->calls) {
      if (now.count(key_of(c)) > 0) order_before.push_back(key_of(c));
    }
    reordered = order_now != order_before;
  }
  const size_t unchanged = tree.calls.size() - changed - added - values_changed;

  std::string out = "== step " + std::to_string(step) + " | " + track + " | " + std::to_string(tree.calls.size()) +
      (tree.calls.size() == 1 ? " call" : " calls");
  if (tree.omitted > 0) out += " (+" + std::to_string(tree.omitted) + " not listed)";
  // The whole tree for a first step or a new order; else only what changed.
  const bool whole = previous == nullptr || reordered;
  if (previous == nullptr) {
    out += " | first logged step\n";
  } else {
    std::vector<std::string> parts;
    if (changed > 0) parts.push_back(std::to_string(changed) + " changed");
    if (added > 0) parts.push_back(std::to_string(added) + " new");
    if (gone > 0) parts.push_back(std::to_string(gone) + " gone");
    if (values_changed > 0) {
      parts.push_back(std::to_string(values_changed) + (values_changed == 1 ? " value changed" : " values changed"));
    }
    if (reordered) parts.push_back("order changed");
    if (tree.omitted != previous->omitted) {
      parts.push_back("not listed " + std::to_string(previous->omitted) + " -> " + std::to_string(tree.omitted));
    }
    if (parts.empty()) {
      std::string values;
      if (values_same > 0 && values_unknown > 0) {
        values = ", values within tolerance (" + std::to_string(values_unknown) + " not compared)";
      } else if (values_same > 0) {
        values = ", values within tolerance";
      } else if (values_unknown > 0) {
        values = ", values not compared";
      }
      return out + " | same as step " + std::to_string(previous_step) + values + "\n";
    }
    out += " | changed since step " + std::to_string(previous_step) + ":";
    for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? " " : ", ") + parts[i];
    if (!whole && unchanged > 0) {
      out +=
          "; " + std::to_string(unchanged) + (unchanged == 1 ? " unchanged call" : " unchanged calls") + " not shown";
    }
    out += "\n";
  }

  // The lines, each call under the ancestors not shown just before it (at most
  // kMaxNesting levels), until the block's byte budget is spent.
  std::vector<Line> lines;
  size_t bytes = out.size(), calls_cut = 0;
  std::vector<std::string> context;  // ancestors and path of the last call line
  uint32_t context_thread = 0;
  for (size_t i = 0; i < tree.calls.size(); ++i) {
    const ModuleTreeCall& c = tree.calls[i];
    if (!whole && marks[i] == ' ') continue;
    if (bytes > kMaxBlockBytes) {
      ++calls_cut;
      continue;
    }
    if (c.thread != context_thread) context.clear();
    context_thread = c.thread;
    const std::string thread = c.thread == 0 ? std::string() : "[thread " + std::to_string(c.thread) + "] ";
    std::vector<std::string> ancestors = ancestors_of(c.path);
    if (ancestors.size() > kMaxNesting) ancestors.erase(ancestors.begin(), ancestors.end() - kMaxNesting);
    size_t common = 0;
    while (common < ancestors.size() && common < context.size() && context[common] == ancestors[common]) ++common;
    for (size_t a = common; a < ancestors.size(); ++a) {
      lines.push_back({' ', indent(ancestors[a]) + thread + module_name(track, ancestors[a]), {}, {}});
      bytes += lines.back().name.size() + 8;
    }
    context = ancestors;
    context.push_back(c.path);
    std::string name = indent(c.path) + thread + module_name(track, c.path);
    if (c.call > 0) name += "#" + std::to_string(c.call);
    std::string rest = flow(c);
    if (was[i] != nullptr) {
      rest += "  (was " + (was[i]->type != c.type ? was[i]->type + " " : std::string()) + flow(*was[i]) + ")";
    } else if (marks[i] == '~') {
      rest += "  (values changed)";
    }
    lines.push_back({marks[i], std::move(name), c.type.empty() ? std::string("?") : c.type, std::move(rest)});
    bytes += lines.back().name.size() + lines.back().type.size() + lines.back().rest.size() + 8;
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
  if (previous != nullptr) {
    for (const ModuleTreeCall& c : previous->calls) {
      if (now.count(key_of(c)) > 0) continue;
      if (out.size() > kMaxBlockBytes) {
        ++calls_cut;
        continue;
      }
      std::string name =
          (c.thread == 0 ? std::string() : "[thread " + std::to_string(c.thread) + "] ") + module_name(track, c.path);
      if (c.call > 0) name += "#" + std::to_string(c.call);
      out += "-   " + name + "  (not called; was " + flow(c) + ")\n";
    }
  }
  if (calls_cut > 0) out += "... " + std::to_string(calls_cut) + " more calls not shown (block over 2 MiB)\n";
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
    if (!tree)
      return Status::error(file_.path() + ": track '" + track + "' step " + std::to_string(step) + ": " +
                           tree.message());
    auto it = previous_.find(track);
    const Logged* before = it == previous_.end() ? nullptr : &it->second;
    Status s =
        file_.append(format_tree_step(track, step, *tree, before ? &before->tree : nullptr, before ? before->step : 0));
    // Remembered for the next step's comparison, within kMaxTracks and kMaxRememberedBytes
    // (counted as payload bytes); a track that does not fit is logged whole each step.
    if (it != previous_.end()) {
      remembered_bytes_ -= it->second.bytes;
      previous_.erase(it);
    }
    if (previous_.size() < kMaxTracks && remembered_bytes_ + payload.size() <= kMaxRememberedBytes) {
      previous_.emplace(track, Logged{step, payload.size(), std::move(*tree)});
      remembered_bytes_ += payload.size();
    }
    return s;
  } catch (const std::exception& e) {
    return Status::error(file_.path() + ": cannot log track '" + track + "': " + e.what());
  }
}

}  // namespace tensorscope::recording
