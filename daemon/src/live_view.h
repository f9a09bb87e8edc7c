// live_view.h — the daemon's own live view (`tensorscoped --view`, live.serve: true): the
// view server (tensorscope/view/view_server.h) over the daemon's session, in the
// supervisor process, on threads of its own.
// Used by tensorscoped's main. Thread safety: call from one thread.
#pragma once

#include <memory>

#include "config/daemon_config.h"
#include "tensorscope/view/view_server.h"

namespace tensorscope::daemon {

// The server's options for `config`'s session: its directory, boards and socket, and
// the live.* keys.
view::ViewServerOptions live_view_options(const DaemonConfig& config);

// Starts the view when live.serve is "true" (null otherwise) and says its address on
// stderr and in the log. A view that cannot start is an error: the user asked for it.
StatusOr<std::unique_ptr<view::ViewServer>> start_live_view(const DaemonConfig& config);

}  // namespace tensorscope::daemon
