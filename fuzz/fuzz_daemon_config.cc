// fuzz_daemon_config.cc — the daemon's YAML configuration (daemon_config.h): any text
// either loads into a config that validates, or gives an error.
#include <cstdlib>

#include "fuzz_target.h"
#include "config/daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensorscope;
  StatusOr<DaemonConfig> config = parse_daemon_config(fuzz::as_string(data, size), "fuzz.yaml");
  if (config.is_ok() && !validate_daemon_config(*config).is_ok()) std::abort();  // loaded means valid
  if (config.is_ok()) {
    StatusOr<DaemonConfig> back = daemon_config_from_json(to_json(*config));
    if (!back.is_ok() || !(*back == *config)) std::abort();  // the worker gets the same config
  }
  return 0;
}
