// server_context.h — what the view server's connections share: options, token, the frame
// store, the session directories, health, counters, and the live pages to notify.
//
// Used inside the view server. The frame store and the counters are thread-safe; the
// session files, the page list and the tick messages belong to the network thread;
// health is written by the status thread under its mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "session_files.h"
#include "summary_tables.h"
#include "whole_tables.h"
#include "tensorscope/view/frame_store.h"
#include "tensorscope/view/view_server.h"

namespace tensorscope::view {

// A connected page, as the server's timers see it (ws_session.cc).
class PageSink {
 public:
  virtual ~PageSink() = default;
  virtual void frames_arrived() = 0;  // new frames in the store
  virtual void tick(std::shared_ptr<const std::string> tiles, std::shared_ptr<const std::string> health,
                    bool files_changed) = 0;
};

// A connection that has not shown the token yet (http_session.cc): when a new connection
// would pass max_connections, the oldest of these is let go, so that connections that
// dribble their headers or say nothing cannot keep a viewer with the token out.
class WaitingConnection {
 public:
  virtual ~WaitingConnection() = default;
  // Closes the connection unless it has shown the token meanwhile; true when it did close.
  virtual bool let_go() = 0;
};

struct ServerContext {
  ServerContext(ViewServerOptions opts, std::string tok, std::vector<std::string> names)
      : options(std::move(opts)), token(std::move(tok)), host_names(std::move(names)), store(options.history_bytes) {}

  const ViewServerOptions options;
  const std::string token;
  const std::vector<std::string> host_names;
  int port = 0;
  FrameStore store;

  // Network thread only.
  std::vector<std::unique_ptr<SessionFiles>> files;       // one per source
  std::vector<std::unique_ptr<SummaryTables>> summaries;  // one per source (the overview)
  WholeTables whole;                                      // their sharded tensors, merged per job
  int64_t summaries_read_ms = 0;                          // when they were last refreshed
  std::vector<std::weak_ptr<PageSink>> pages;
  std::deque<std::weak_ptr<WaitingConnection>> waiting;  // oldest first
  std::shared_ptr<const std::string> tiles_message;      // the last tick's
  std::shared_ptr<const std::string> health_message;
  uint64_t files_version = 0;

  // Status thread writes, network thread reads.
  std::mutex health_mu;
  nlohmann::json daemon_status = nlohmann::json::array();  // per source: status or {"error": ...}

  std::atomic<uint64_t> requests{0}, rejected{0}, frames_sent{0}, connections{0};
  std::atomic<uint64_t> frames_read{0}, frames_lost{0}, boards{0};
};

// JSON text that never throws on names that are not UTF-8 (they come from training).
inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tensorscope::view
