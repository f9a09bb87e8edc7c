// module_tree_format.cc — see module_tree_format.h.
#include "tensorscope/shared/module_tree_format.h"

#include <charconv>

#include "tensorscope/shared/wire_format.h"

namespace tensorscope {
namespace {

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool parse_u32(std::string_view text, uint32_t* out) {
  if (text.empty() || text.size() > 10) return false;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// <dtype>[<d0>,...]@<device>, or "?"
bool valid_description(std::string_view d) {
  if (d == "?") return true;
  const size_t open = d.find('[');
  const size_t close = d.find(']');
  if (open == 0 || open == std::string_view::npos || close == std::string_view::npos || close < open) return false;
  for (size_t i = 0; i < open; ++i) {
    const char c = d[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  const std::string_view dims = d.substr(open + 1, close - open - 1);
  if (!dims.empty()) {
    for (std::string_view dim : split(dims, ',')) {
      if (dim.empty() || dim.size() > 19) return false;
      for (const char c : dim) {
        if (c < '0' || c > '9') return false;
      }
    }
  }
  if (close + 1 >= d.size() || d[close + 1] != '@' || close + 2 >= d.size()) return false;
  for (const char c : d.substr(close + 2)) {
    if (c == ' ' || is_control(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Status field_error(size_t line, const std::string& what) {
  return Status::error("module tree line " + std::to_string(line) + ": " + what);
}

}  // namespace

std::string describe_tensor(std::string_view dtype, const int64_t* sizes, size_t ndim, std::string_view device) {
  std::string out(dtype);
  out += '[';
  for (size_t d = 0; d < ndim; ++d) {
    if (d > 0) out += ',';
    out += std::to_string(sizes[d]);
  }
  out += "]@";
  out += device;
  return out.size() > ModuleTree::kMaxFieldBytes ? std::string("?") : out;
}

namespace {

// A description as it goes into the payload: cleaned, "?" when too long.
std::string description_field(std::string_view description) {
  if (description.size() > ModuleTree::kMaxFieldBytes) return "?";
  std::string out = module_tree_field(description);
  for (char& c : out) {
    if (c == ' ') c = '_';
  }
  return out;
}

}  // namespace

std::string module_tree_field(std::string_view text) {
  std::string out(text.substr(0, ModuleTree::kMaxFieldBytes));
  for (char& c : out) {
    if (is_control(static_cast<unsigned char>(c))) c = ' ';
  }
  return out;
}

std::string format_module_tree(const ModuleTree& tree) {
  std::string body;
  uint64_t omitted = tree.omitted;
  size_t listed = 0;
  bool with_values = false;
  for (const ModuleTreeCall& call : tree.calls) with_values = with_values || !call.value.empty();
  for (const ModuleTreeCall& call : tree.calls) {
    std::string line = std::to_string(call.thread) + '\t' + std::to_string(call.call) + '\t' +
        module_tree_field(call.path) + '\t' + module_tree_field(call.type) + '\t';
    if (call.inputs.empty()) line += '-';
    for (size_t i = 0; i < call.inputs.size() && i < ModuleTree::kMaxInputs; ++i) {
      if (i > 0) line += ' ';
      line += description_field(call.inputs[i]);
    }
    line += '\t';
    line += call.output.empty() ? std::string("-") : description_field(call.output);
    if (with_values) {
      line += '\t';
      if (call.value.empty()) {
        line += '-';
      } else {
        line += call.value == "=" || call.value == "~" ? call.value : std::string("?");
      }
    }
    line += '\n';
    // Room for the header (with the largest count) is kept.
    if (listed == ModuleTree::kMaxCalls || body.size() + line.size() + 64 > wire::kMaxModuleTreeBytes) {
      ++omitted;
      continue;
    }
    body += line;
    ++listed;
  }
  return std::string(with_values ? kModuleTreeMagicValues : kModuleTreeMagic) + " omitted=" + std::to_string(omitted) +
      '\n' + body;
}

StatusOr<ModuleTree> parse_module_tree(std::string_view payload) {
  if (payload.size() > wire::kMaxModuleTreeBytes) return Status::error("module tree is larger than 1 MiB");
  if (payload.empty() || payload.back() != '\n') return Status::error("module tree does not end with a newline");
  std::vector<std::string_view> lines = split(payload.substr(0, payload.size() - 1), '\n');
  ModuleTree tree;
  std::string header_prefix = std::string(kModuleTreeMagic) + " omitted=";
  const std::string header_values = std::string(kModuleTreeMagicValues) + " omitted=";
  const bool with_values = lines[0].substr(0, header_values.size()) == header_values;
  if (with_values) header_prefix = header_values;
  if (lines[0].substr(0, header_prefix.size()) != header_prefix) {
    return Status::error("module tree: unknown header (expected \"" + std::string(kModuleTreeMagic) + "\" or \"" +
                         std::string(kModuleTreeMagicValues) + "\")");
  }
  const size_t field_count = with_values ? 7 : 6;
  {
    const std::string_view count = lines[0].substr(header_prefix.size());
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), tree.omitted);
    if (count.empty() || ec != std::errc() || end != count.data() + count.size()) {
      return field_error(1, "omitted count is not a number");
    }
  }
  if (lines.size() - 1 > ModuleTree::kMaxCalls) return Status::error("module tree lists more than 4096 calls");
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t line_no = i + 1;
    const std::vector<std::string_view> fields = split(lines[i], '\t');
    if (fields.size() != field_count) {
      return field_error(line_no, "expected " + std::to_string(field_count) + " tab-separated fields");
    }
    for (std::string_view f : fields) {
      if (f.size() > ModuleTree::kMaxFieldBytes * (ModuleTree::kMaxInputs + 1))
        return field_error(line_no, "field too long");
      for (const char c : f) {
        if (is_control(static_cast<unsigned char>(c))) return field_error(line_no, "control byte in a field");
      }
    }
    ModuleTreeCall call;
    if (!parse_u32(fields[0], &call.thread)) return field_error(line_no, "thread is not a number");
    if (!parse_u32(fields[1], &call.call)) return field_error(line_no, "call is not a number");
    if (fields[2].size() > ModuleTree::kMaxFieldBytes || fields[3].size() > ModuleTree::kMaxFieldBytes ||
        fields[5].size() > ModuleTree::kMaxFieldBytes) {
      return field_error(line_no, "field longer than 512 bytes");
    }
    call.path = std::string(fields[2]);
    call.type = std::string(fields[3]);
    if (fields[4] != "-") {
      const std::vector<std::string_view> inputs = split(fields[4], ' ');
      if (inputs.size() > ModuleTree::kMaxInputs) return field_error(line_no, "more than 16 inputs");
      for (std::string_view input : inputs) {
        if (input.size() > ModuleTree::kMaxFieldBytes || !valid_description(input)) {
          return field_error(line_no, "malformed input description");
        }
        call.inputs.emplace_back(input);
      }
    }
    if (fields[5] != "-") {
      if (!valid_description(fields[5])) return field_error(line_no, "malformed output description");
      call.output = std::string(fields[5]);
    }
    if (with_values) {
      const std::string_view value = fields[6];
      if (value != "-" && value != "=" && value != "~" && value != "?") {
        return field_error(line_no, "value is not one of =, ~, ?, -");
      }
      if (value != "-") call.value = std::string(value);
    }
    tree.calls.push_back(std::move(call));
  }
  return tree;
}

}  // namespace tensorscope
