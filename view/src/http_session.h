// http_session.h — one HTTP connection of the view server: checks and answers its
// requests (page, API, finished videos), or hands it to a WebSocket session.
//
// Used by the view server's listener, on the network thread. Thread safety: a session
// lives on the network thread.
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "server_context.h"

namespace tensorscope::view {

// Serves `socket` until the peer closes it, a request is refused, or it idles out.
void start_http_session(boost::asio::ip::tcp::socket socket, std::shared_ptr<ServerContext> context);

}  // namespace tensorscope::view
