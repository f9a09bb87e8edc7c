#include "tensorscope/view/view_server.h"

#include "tensorscope/base/clock.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "board_poller.h"
#include "http_session.h"
#include "server_context.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/status_query.h"
#include "tensorscope/view/live_board.h"
#include "tensorscope/view/request_guard.h"

namespace tensorscope::view {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

bool is_loopback_address(const net::ip::address& a) { return a.is_loopback(); }

}  // namespace

class ViewServer::Impl {
 public:
  explicit Impl(std::shared_ptr<ServerContext> ctx) : ctx_(std::move(ctx)), acceptor_(ioc_), tick_(ioc_) {}

  Status listen() {
    boost::system::error_code ec;
    const auto address = net::ip::make_address(ctx_->options.bind_address, ec);
    if (ec) return Status::error("view: '" + ctx_->options.bind_address + "' is not an IP address");
    if (!is_loopback_address(address) && !ctx_->options.allow_remote) {
      return Status::error("view: binding " + ctx_->options.bind_address +
                           " would let other machines connect; pass the flag that allows it if that is meant");
    }
    if (ctx_->options.port < 0 || ctx_->options.port > 65535) return Status::error("view: port out of range");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(ctx_->options.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::error("view: cannot listen on " + ctx_->options.bind_address + ":" +
                           std::to_string(ctx_->options.port) + ": " + ec.message());
    }
    ctx_->port = acceptor_.local_endpoint().port();
    return Status::ok();
  }

  void run() {
    for (const auto& s : ctx_->options.sources) {
      ctx_->files.push_back(std::make_unique<SessionFiles>(s.session_dir));
      ctx_->summaries.push_back(std::make_unique<SummaryTables>(s.session_dir));
    }
    on_tick();
    accept();
    io_thread_ = std::thread([this] {
      for (;;) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {  // a handler that threw: logged, the server goes on
          TS_LOG_ERROR("view server: {}", e.what());
        }
      }
    });
    poll_thread_ = std::thread([this] { poll_boards(); });
    status_thread_ = std::thread([this] { poll_status(); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    stop_cv_.notify_all();
    ioc_.stop();
    if (io_thread_.joinable()) io_thread_.join();
    if (poll_thread_.joinable()) poll_thread_.join();
    if (status_thread_.joinable()) status_thread_.join();
  }

  ~Impl() { stop(); }

  ServerContext& context() { return *ctx_; }

 private:
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (!ec) start_http_session(std::move(socket), ctx_);
      if (acceptor_.is_open()) accept();
    });
  }

  // Once a second on the network thread: re-read changed indexes, publish the tile list
  // and health to every page.
  void on_tick() {
    bool files_changed = false;
    for (size_t i = 0; i < ctx_->files.size(); ++i) {
      if (!ctx_->files[i]->refresh()) continue;
      files_changed = true;
      for (const auto& e : ctx_->files[i]->entries()) {
        ctx_->store.declare(TileKey{static_cast<int>(i), e.stream, e.device, e.mode, e.rank}, e.kind, e.pid);
      }
    }
    if (files_changed) ++ctx_->files_version;
    ctx_->tiles_message = std::make_shared<const std::string>(tiles_json());
    ctx_->health_message = std::make_shared<const std::string>(health_json());
    auto& pages = ctx_->pages;
    for (auto it = pages.begin(); it != pages.end();) {
      if (auto page = it->lock()) {
        page->tick(ctx_->tiles_message, ctx_->health_message, files_changed);
        ++it;
      } else {
        it = pages.erase(it);
      }
    }
    if (!pages.empty()) tell_workers_a_page_watches();
    tick_.expires_after(std::chrono::seconds(1));
    tick_.async_wait([this](boost::system::error_code ec) {
      if (!ec) on_tick();
    });
  }

  // Workers publish live frames only while this is fresh (live_board.h).
  void tell_workers_a_page_watches() {
    for (const SessionSource& s : ctx_->options.sources) {
      if (s.session.empty()) continue;
      const std::string path = default_runtime_dir(s.runtime_dir) + "/" + live_watch_file_name(s.session);
      if (Status st = touch_watch_file(path); !st && !watch_warned_) {
        TS_LOG_WARN("view: {} (no live frames)", st.message());
        watch_warned_ = true;
      }
    }
  }

  std::string tiles_json() {
    const uint64_t now = unix_time_ns();
    nlohmann::json tiles = nlohmann::json::array();
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const TileInfo& t : ctx_->store.tiles()) {
      nlohmann::json j = {{"id", t.id},
                          {"source", t.key.source},
                          {"stream", t.key.stream},
                          {"kind", t.kind},
                          {"device", t.key.device},
                          {"rank", t.key.rank},
                          {"mode", t.key.mode},
                          {"pid", t.producer_pid},
                          {"frames", t.frames_total},
                          {"live", t.newest_seq != 0}};
      if (t.newest_seq != 0) {
        j["step"] = t.newest_step;
        j["age_ms"] = now > t.newest_render_unix_ns ? (now - t.newest_render_unix_ns) / 1000000 : 0;
        j["kept_from"] = t.history_first_step;
        lo = std::min(lo, t.history_first_step);
        hi = std::max(hi, t.newest_step);
      }
      tiles.push_back(std::move(j));
    }
    for (const auto& f : ctx_->files) {
      for (const auto& e : f->entries()) {
        lo = std::min(lo, e.first_step);
        hi = std::max(hi, e.last_step);
      }
    }
    nlohmann::json steps = lo <= hi ? nlohmann::json{{"min", lo}, {"max", hi}} : nlohmann::json();
    return dump_json({{"type", "tiles"}, {"files_version", ctx_->files_version}, {"steps", steps}, {"tiles", tiles}});
  }

  std::string health_json() {
    nlohmann::json sources = nlohmann::json::array();
    nlohmann::json status;
    {
      std::lock_guard<std::mutex> lock(ctx_->health_mu);
      status = ctx_->daemon_status;
    }
    for (size_t i = 0; i < ctx_->options.sources.size(); ++i) {
      const SessionSource& s = ctx_->options.sources[i];
      nlohmann::json j = {{"source", i},
                          {"dir", s.session_dir},
                          {"session", s.session},
                          {"label", s.label},
                          {"index_error", ctx_->files[i]->last_error()},
                          {"videos", ctx_->files[i]->entries().size()}};
      if (i < status.size()) j["daemon"] = status[i];
      sources.push_back(std::move(j));
    }
    nlohmann::json server = {{"frames_read", ctx_->frames_read.load()}, {"frames_lost", ctx_->frames_lost.load()},
                             {"frames_sent", ctx_->frames_sent.load()}, {"boards", ctx_->boards.load()},
                             {"store_bytes", ctx_->store.bytes()},      {"store_cap", ctx_->options.history_bytes},
                             {"evicted", ctx_->store.evicted()},        {"connections", ctx_->connections.load()},
                             {"requests", ctx_->requests.load()},       {"rejected", ctx_->rejected.load()}};
    return dump_json({{"type", "health"}, {"sources", sources}, {"server", server}});
  }

  bool wait_for(int ms) {
    std::unique_lock<std::mutex> lock(stop_mu_);
    return !stop_cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
  }

  void poll_boards() {
    BoardPoller poller(ctx_->options.sources, &ctx_->store);
    while (wait_for(ctx_->options.board_poll_ms)) {
      size_t moved = 0;
      try {
        moved = poller.poll();
      } catch (const std::exception& e) {
        TS_LOG_ERROR("view: reading live boards: {}", e.what());
      }
      ctx_->frames_read.store(poller.frames_read(), std::memory_order_relaxed);
      ctx_->frames_lost.store(poller.frames_lost(), std::memory_order_relaxed);
      ctx_->boards.store(poller.boards(), std::memory_order_relaxed);
      if (moved == 0) continue;
      net::post(ioc_, [this] {
        for (auto& weak : ctx_->pages) {
          if (auto page = weak.lock()) page->frames_arrived();
        }
      });
    }
  }

  void poll_status() {
    do {
      nlohmann::json all = nlohmann::json::array();
      for (const SessionSource& s : ctx_->options.sources) {
        if (s.session.empty()) {
          all.push_back({{"error", "no session name: files only"}});
          continue;
        }
        auto reply = query_daemon_status(s.runtime_dir, s.session, 1000);
        if (!reply) {
          all.push_back({{"error", reply.message()}});
          continue;
        }
        nlohmann::json& r = *reply;
        nlohmann::json brief = {{"pid", r.value("pid", 0)},
                                {"uptime_ms", r.value("uptime_ms", 0)},
                                {"output", r.value("output", nlohmann::json::object())},
                                {"workers", nlohmann::json::array()},
                                {"producers", r.value("producers", nlohmann::json::array())}};
        for (const auto& w : r.value("workers", nlohmann::json::array())) {
          const nlohmann::json stats = w.value("stats", nlohmann::json::object());
          brief["workers"].push_back({{"index", w.value("index", 0)},
                                      {"pid", w.value("pid", 0)},
                                      {"alive", w.value("alive", false)},
                                      {"restarts", w.value("restarts", 0)},
                                      {"queue_depth", stats.value("queue_depth", 0)},
                                      {"render_errors", stats.value("render_errors", 0)},
                                      {"invalid", stats.value("invalid", 0)}});
        }
        all.push_back(std::move(brief));
      }
      std::lock_guard<std::mutex> lock(ctx_->health_mu);
      ctx_->daemon_status = std::move(all);
    } while (wait_for(ctx_->options.status_poll_ms));
  }

  std::shared_ptr<ServerContext> ctx_;
  net::io_context ioc_{1};
  tcp::acceptor acceptor_;
  net::steady_timer tick_;
  std::thread io_thread_, poll_thread_, status_thread_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool watch_warned_ = false;
};

StatusOr<std::unique_ptr<ViewServer>> ViewServer::start(ViewServerOptions options) {
  if (options.sources.empty()) return Status::error("view: no session to show");
  if (options.max_connections < 1) return Status::error("view: max_connections must be at least 1");
  if (options.page_timeout_ms < 100) return Status::error("view: page_timeout_ms must be at least 100");
  if (options.board_poll_ms < 1 || options.status_poll_ms < 1)
    return Status::error("view: poll periods must be positive");
  std::string token = options.token;
  if (token.empty()) {
    auto made = make_token();
    if (!made) return made.status();
    token = *made;
  }
  auto names = allowed_host_names(options.bind_address, options.allowed_hosts);
  auto ctx = std::make_shared<ServerContext>(std::move(options), std::move(token), std::move(names));
  auto impl = std::make_unique<Impl>(ctx);
  if (Status s = impl->listen(); !s) return s;
  impl->run();
  return std::unique_ptr<ViewServer>(new ViewServer(std::move(impl)));
}

ViewServer::ViewServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ViewServer::~ViewServer() { stop(); }

void ViewServer::stop() {
  if (impl_) impl_->stop();
}

int ViewServer::port() const { return impl_->context().port; }
const std::string& ViewServer::token() const { return impl_->context().token; }

std::string ViewServer::url() const {
  std::string host = impl_->context().options.bind_address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port()) + "/#t=" + token();
}

ViewServer::Counters ViewServer::counters() const {
  ServerContext& c = impl_->context();
  Counters out;
  out.frames_read = c.frames_read.load();
  out.frames_sent = c.frames_sent.load();
  out.requests = c.requests.load();
  out.rejected = c.rejected.load();
  out.connections = c.connections.load();
  out.store_bytes = c.store.bytes();
  out.tiles = c.store.tiles().size();
  return out;
}

}  // namespace tensorscope::view
