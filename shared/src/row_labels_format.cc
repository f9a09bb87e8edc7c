// row_labels_format.cc — see row_labels_format.h.
#include "tensorscope/shared/row_labels_format.h"

#include <algorithm>
#include <cstring>

#include "byte_fields.h"

namespace tensorscope {
namespace {

using internal::get_field;
using internal::put_field;

std::string name_refusal(std::string_view name) {
  if (name.empty()) return "a label name is empty";
  if (name.size() >= kMaxRowLabelNameBytes) {
    return "label name '" + std::string(name.substr(0, 32)) + "...' is longer than " +
        std::to_string(kMaxRowLabelNameBytes - 1) + " bytes";
  }
  for (const char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "a label name holds a control character";
  }
  return {};
}

}  // namespace

std::string RowLabels::class_name(int64_t value) const {
  if (!names.empty() && value >= 0 && static_cast<uint64_t>(value) < names.size()) {
    return names[static_cast<size_t>(value)];
  }
  return std::to_string(value);
}

StatusOr<std::string> encode_row_labels(const RowLabels& labels) {
  if (labels.values.size() > kMaxRowLabels) {
    return Status::error(std::to_string(labels.values.size()) + " labels: at most " + std::to_string(kMaxRowLabels) +
                         " rows can be labelled");
  }
  if (labels.names.size() > kMaxRowLabelClasses) {
    return Status::error(std::to_string(labels.names.size()) + " label names: at most " +
                         std::to_string(kMaxRowLabelClasses) + " classes");
  }
  size_t names_bytes = 0;
  for (const std::string& name : labels.names) {
    if (std::string why = name_refusal(name); !why.empty()) return Status::error(why);
    names_bytes += name.size() + 1;
  }
  if (!labels.names.empty()) {
    for (const int64_t v : labels.values) {
      if (v < 0 || static_cast<uint64_t>(v) >= labels.names.size()) {
        return Status::error("label " + std::to_string(v) + " is not an index into the " +
                             std::to_string(labels.names.size()) + " label names");
      }
    }
  }
  const size_t count = labels.values.size();
  std::string out(kRowLabelsHeaderBytes + 8 * count + names_bytes, '\0');
  put_field<uint32_t>(out, 0, kRowLabelsMagic);
  put_field<uint16_t>(out, 4, kRowLabelsVersion);
  put_field<uint32_t>(out, 8, static_cast<uint32_t>(count));
  put_field<uint32_t>(out, 12, static_cast<uint32_t>(labels.names.size()));
  put_field<uint32_t>(out, 16, static_cast<uint32_t>(names_bytes));
  if (count > 0) std::memcpy(out.data() + kRowLabelsHeaderBytes, labels.values.data(), 8 * count);
  size_t at = kRowLabelsHeaderBytes + 8 * count;
  for (const std::string& name : labels.names) {
    std::memcpy(out.data() + at, name.data(), name.size());
    at += name.size() + 1;  // the NUL is already there
  }
  return out;
}

StatusOr<RowLabels> parse_row_labels(std::string_view in, uint64_t rows) {
  if (in.size() < kRowLabelsHeaderBytes) return Status::error("row labels section shorter than its header");
  if (get_field<uint32_t>(in, 0) != kRowLabelsMagic) return Status::error("not a row labels section (wrong magic)");
  const auto version = get_field<uint16_t>(in, 4);
  if (version != kRowLabelsVersion) {
    return Status::error("row labels of format version " + std::to_string(version) + "; this daemon reads " +
                         std::to_string(kRowLabelsVersion) + " (update tensorscoped to the client's version)");
  }
  if (get_field<uint16_t>(in, 6) != 0 || get_field<uint32_t>(in, 20) != 0) {
    return Status::error("row labels section has reserved bits set");
  }
  const uint32_t count = get_field<uint32_t>(in, 8);
  const uint32_t classes = get_field<uint32_t>(in, 12);
  const uint32_t names_bytes = get_field<uint32_t>(in, 16);
  if (count != rows) {
    return Status::error(std::to_string(count) + " row labels for a tensor of " + std::to_string(rows) + " rows");
  }
  if (count > kMaxRowLabels || classes > kMaxRowLabelClasses ||
      names_bytes > uint64_t{kMaxRowLabelClasses} * kMaxRowLabelNameBytes) {
    return Status::error("row labels section over its limits");
  }
  if (in.size() != kRowLabelsHeaderBytes + uint64_t{8} * count + names_bytes) {
    return Status::error("row labels section size does not match its counts");
  }
  RowLabels out;
  out.values.resize(count);
  if (count > 0) std::memcpy(out.values.data(), in.data() + kRowLabelsHeaderBytes, 8 * size_t{count});
  std::string_view names = in.substr(kRowLabelsHeaderBytes + 8 * size_t{count});
  out.names.reserve(classes);
  for (uint32_t c = 0; c < classes; ++c) {
    const size_t end = names.find('\0');
    if (end == std::string_view::npos) return Status::error("row label names: fewer names than the class count");
    if (std::string why = name_refusal(names.substr(0, end)); !why.empty()) return Status::error(why);
    out.names.emplace_back(names.substr(0, end));
    names.remove_prefix(end + 1);
  }
  if (!names.empty()) return Status::error("row label names: bytes after the last name");
  if (classes > 0) {
    for (const int64_t v : out.values) {
      if (v < 0 || v >= static_cast<int64_t>(classes)) {
        return Status::error("row label " + std::to_string(v) + " is not an index into the " + std::to_string(classes) +
                             " names");
      }
    }
  }
  return out;
}

StatusOr<RowLabels> row_labels_from_text(const std::vector<std::string>& text) {
  RowLabels out;
  out.names = text;
  std::sort(out.names.begin(), out.names.end());
  out.names.erase(std::unique(out.names.begin(), out.names.end()), out.names.end());
  if (out.names.size() > kMaxRowLabelClasses) {
    return Status::error(std::to_string(out.names.size()) + " different label names: at most " +
                         std::to_string(kMaxRowLabelClasses));
  }
  out.values.reserve(text.size());
  for (const std::string& t : text) {
    out.values.push_back(std::lower_bound(out.names.begin(), out.names.end(), t) - out.names.begin());
  }
  return out;
}

}  // namespace tensorscope
