// config_detail.h — what the public functions of daemon_config.h delegate to: the YAML
// reader (config_yaml.cc), the JSON writer and reader (config_json.cc) and the
// validator (config_validator.cc), each a visitor over visit_fields() (config_fields.h).
//
// Internal to daemon/src/config/; daemon_config.cc keeps the public API and its
// exception boundaries (these functions may throw, e.g. std::bad_alloc; the YAML reader
// turns yaml-cpp's exceptions into errors itself). Thread safety: no shared state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/daemon_config.h"
#include "tensorscope/base/status.h"

namespace tensorscope::config_detail {

// The name of the JSON form in messages.
inline constexpr char kJsonSource[] = "daemon config JSON";

// parse_daemon_config() with `source` (never empty) prefixing messages.
StatusOr<DaemonConfig> parse_yaml(const std::string& yaml_text, const std::string& source);

// to_json() and daemon_config_from_json().
nlohmann::json write_json(const DaemonConfig& config);
StatusOr<DaemonConfig> read_json(const nlohmann::json& json);

// validate_daemon_config().
Status validate(const DaemonConfig& config);

}  // namespace tensorscope::config_detail
