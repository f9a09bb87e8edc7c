// view_server.h — the live view: one HTTP port serving a page that shows every stream of
// one or more sessions while training runs, and after it ended.
//
// Used by `tensorscope view` and by the daemon (`tensorscoped --view`). The server reads
// the workers' live boards (live_board.h) from the runtime directory, the finished videos
// (index.json, steps files) from each session directory, and the daemon's status over its
// socket; it writes nothing. A page gets the newest frame of each tile it shows over one
// WebSocket, latest frame wins (nothing queues behind a slow page), tiles it does not
// show get nothing.
// Security: binds 127.0.0.1 unless told otherwise; a random token per start is required on
// every data request and on the WebSocket upgrade; the Host header must name the bound
// address (DNS rebinding) and a WebSocket's Origin the same; read-only; only files
// listed in index.json are served; connections and message sizes are capped; a bad
// request gets a 4xx and never stops the server. Endpoints: docs/design/live_view.md.
// Thread safety: start() and stop() from one thread; the server runs on threads of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::view {

struct SessionSource {
  std::string session_dir;  // <output>/<session>: index.json, steps/, videos
  std::string session;      // names the daemon's socket and live boards ("" : none)
  std::string runtime_dir;  // where they are ("" : the default)
  std::string label;        // its name on the page ("" : "session <index>"): a node's folder
};

struct ViewServerOptions {
  std::vector<SessionSource> sources;
  std::string bind_address = "127.0.0.1";
  bool allow_remote = false;               // required to bind an address that is not loopback
  int port = 0;                            // 0: a free port
  std::string token;                       // "": a random one
  std::vector<std::string> allowed_hosts;  // extra Host names (e.g. a machine's name)
  uint64_t history_bytes = 64ull << 20;    // frames kept for the step cursor
  // Connections that have not shown the token make way for newcomers past this many; a
  // request with the token (and the page itself) is served up to twice as many plus 16.
  int max_connections = 64;
  // A page that answers no WebSocket ping for this long (it does not read: a stopped
  // tab, a dead network) is closed; pings go out after half of it without a message.
  int page_timeout_ms = 30000;
  int board_poll_ms = 50;
  int status_poll_ms = 1000;
};

class ViewServer {
 public:
  ~ViewServer();
  static StatusOr<std::unique_ptr<ViewServer>> start(ViewServerOptions options);

  int port() const;
  const std::string& token() const;
  // "http://127.0.0.1:PORT/#t=TOKEN"
  std::string url() const;
  // Stops accepting, closes every connection, joins the threads. Idempotent.
  void stop();

  struct Counters {
    uint64_t frames_read = 0;  // from the live boards
    uint64_t frames_sent = 0;  // to pages
    uint64_t requests = 0;
    uint64_t rejected = 0;     // 4xx/5xx answers
    uint64_t connections = 0;  // open now
    uint64_t store_bytes = 0;
    uint64_t tiles = 0;
  };
  Counters counters() const;

  class Impl;

 private:
  explicit ViewServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorscope::view
