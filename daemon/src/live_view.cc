#include "live_view.h"

#include <cstdio>

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {

view::ViewServerOptions live_view_options(const DaemonConfig& config) {
  view::ViewServerOptions o;
  o.sources.push_back({config.output_dir + "/" + config.session, config.session, config.runtime_dir, ""});
  o.bind_address = config.live.address;
  o.allow_remote = config.live.allow_remote;
  o.port = config.live.port;
  o.history_bytes = static_cast<uint64_t>(config.live.history_mb) << 20;
  return o;
}

StatusOr<std::unique_ptr<view::ViewServer>> start_live_view(const DaemonConfig& config) {
  if (!config.live.serve) return std::unique_ptr<view::ViewServer>();
  auto server = view::ViewServer::start(live_view_options(config));
  if (!server) return server.status();
  TS_LOG_INFO("live view: {}", (*server)->url());
  std::fprintf(stderr, "tensorscoped: live view at %s\n", (*server)->url().c_str());
  return server;
}

}  // namespace tensorscope::daemon
