// ws_session.h — one page's WebSocket: what the page watches in, frames and tile lists out.
//
// Protocol (docs/design/live_view.md):
//   page -> server (text, at most 64 KiB): {"type": "watch", "tiles": [ids], "cursor": null | step}
//   server -> page: text {"type": "tiles", ...} and {"type": "health", ...} once a second;
//     binary frames: u32 little-endian header length, header JSON {"tile", "step", "seq",
//     "push_ns", "render_ns", "sent_ns"}, JPEG bytes;
//     text {"type": "video_frame", "tile", "path", "source", "frame", "frames", "step"}: the
//     tile's frame at the cursor is frame `frame` of a finished video;
//     text {"type": "no_frame", "tile", "cursor"}.
// Latest frame wins: one message in flight per page; when it is written, the next is
// chosen from the newest state, so a slow page skips frames and never builds a queue.
// Used on the network thread only.
#pragma once

#include <memory>

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server_context.h"

namespace tensorscope::view {

void start_ws_session(boost::beast::tcp_stream stream,
                      boost::beast::http::request<boost::beast::http::string_body> upgrade,
                      std::shared_ptr<ServerContext> context);

}  // namespace tensorscope::view
