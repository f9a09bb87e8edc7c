// daemon_config.cc — see daemon_config.h: the public functions, each a boundary that
// turns exceptions into errors.
//
// Every key is described once, in visit_fields() (config_fields.h); the YAML reader
// (config_yaml.cc), the JSON writer and reader (config_json.cc), the validator
// (config_validator.cc) and the list of known keys are visitors over that description,
// so a new key cannot be forgotten by one of them. The rules values obey are in
// config_rules.h, the text helpers of the messages in config_text.h.
#include "config/daemon_config.h"

#include <exception>
#include <string>

#include "config/config_detail.h"
#include "config/config_text.h"
#include "tensorscope/base/text_input.h"

namespace tensorscope {
namespace {

StatusOr<std::string> read_small_file(const std::string& path) {
  if (path.empty()) return Status::error("no config file path given");
  if (path.find('\0') != std::string::npos)
    return Status::error(config_detail::quote(path) + ": config file path contains a NUL byte");
  return read_text_file(path, kMaxConfigFileBytes, "config file");
}

}  // namespace

StatusOr<DaemonConfig> parse_daemon_config(const std::string& yaml_text, const std::string& source_name) {
  const std::string source = source_name.empty() ? "<config>" : source_name;
  try {
    return config_detail::parse_yaml(yaml_text, source);
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
    return config_detail::validate(config);
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot validate config: ") + e.what());
  }
}

std::string to_string(Rgb color) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "#";
  for (const uint8_t c : {color.r, color.g, color.b}) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::optional<Rgb> parse_rgb(std::string_view text) {
  if (text.size() != 7 || text[0] != '#') return std::nullopt;
  uint8_t channels[3] = {};
  for (size_t i = 1; i < 7; ++i) {
    const char c = text[i];
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) return std::nullopt;
    channels[(i - 1) / 2] = static_cast<uint8_t>(channels[(i - 1) / 2] * 16 + digit);
  }
  return Rgb{channels[0], channels[1], channels[2]};
}

nlohmann::json to_json(const DaemonConfig& config) { return config_detail::write_json(config); }

StatusOr<DaemonConfig> daemon_config_from_json(const nlohmann::json& json) {
  try {
    return config_detail::read_json(json);
  } catch (const std::exception& e) {
    return Status::error(std::string(config_detail::kJsonSource) + ": " + e.what());
  } catch (...) {
    return Status::error(std::string(config_detail::kJsonSource) + ": unknown error");
  }
}

}  // namespace tensorscope
