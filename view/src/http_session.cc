#include "http_session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <cstdio>

#include "tensorscope/base/clock.h"
#include "tensorscope/base/posix_file.h"
#include "tensorscope/recording/anomaly_firsts.h"
#include "tensorscope/recording/overview_scale.h"
#include "tensorscope/view/request_guard.h"
#include "web_assets.h"
#include "ws_session.h"

namespace tensorscope::view {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// A request's headers must arrive whole within this (a viewer's arrive in milliseconds;
// a connection that dribbles them a byte a second is let go).
constexpr auto kReadTimeout = std::chrono::seconds(5);
constexpr size_t kHeaderLimit = 8 * 1024;
constexpr size_t kBodyLimit = 4 * 1024;
constexpr uint64_t kMaxRangeBytes = 4ull << 20;  // a video is sent in pieces of at most this

std::string_view content_type(std::string_view path) {
  auto ends = [&path](std::string_view s) {
    return path.size() >= s.size() && path.substr(path.size() - s.size()) == s;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".json")) return "application/json";
  if (ends(".mp4")) return "video/mp4";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

// Parses "bytes=a-b" / "bytes=a-" / "bytes=-n" against a file of `size` bytes.
bool parse_range(std::string_view header, uint64_t size, uint64_t* first, uint64_t* last) {
  constexpr std::string_view kUnit = "bytes=";
  if (header.substr(0, kUnit.size()) != kUnit || size == 0) return false;
  std::string_view spec = header.substr(kUnit.size());
  if (spec.find(',') != std::string_view::npos) return false;  // one range only
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return false;
  auto number = [](std::string_view s, uint64_t* out) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    *out = v;
    return true;
  };
  uint64_t a = 0, b = 0;
  if (dash == 0) {  // the last n bytes
    if (!number(spec.substr(1), &b) || b == 0) return false;
    *first = b >= size ? 0 : size - b;
    *last = size - 1;
    return true;
  }
  if (!number(spec.substr(0, dash), &a) || a >= size) return false;
  *first = a;
  *last = size - 1;
  if (dash + 1 < spec.size()) {
    if (!number(spec.substr(dash + 1), &b) || b < a) return false;
    *last = std::min(b, size - 1);
  }
  return true;
}

class HttpSession : public WaitingConnection, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, std::shared_ptr<ServerContext> context)
      : stream_(std::move(socket)), ctx_(std::move(context)) {
    ctx_->connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~HttpSession() override {
    if (!handed_over_) ctx_->connections.fetch_sub(1, std::memory_order_relaxed);
  }

  void start() {
    const uint64_t open = ctx_->connections.load(std::memory_order_relaxed);
    const auto soft = static_cast<uint64_t>(ctx_->options.max_connections);
    if (open > soft && !let_the_oldest_waiting_go() && open > 2 * soft + 16) {
      // Every other connection has shown the token (viewers', not intruders'), and there
      // are so many that even a viewer's request waits: the hard limit.
      refuse_and_close(http::status::service_unavailable, "too many connections\n");
      return;
    }
    auto& waiting = ctx_->waiting;
    if (waiting.size() > 2 * static_cast<size_t>(ctx_->options.max_connections) + 16) {
      std::erase_if(waiting, [](const std::weak_ptr<WaitingConnection>& w) { return w.expired(); });
    }
    waiting.push_back(weak_from_this());
    read();
  }

  bool let_go() override {
    if (authenticated_ || handed_over_) return false;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();  // the pending read ends with an error: the session goes
    return true;
  }

 private:
  // Lets the oldest connection that has not shown the token go; false when there is none.
  bool let_the_oldest_waiting_go() {
    auto& waiting = ctx_->waiting;
    while (!waiting.empty()) {
      auto oldest = waiting.front().lock();
      waiting.pop_front();
      if (oldest && oldest->let_go()) return true;
    }
    return false;
  }

  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kBodyLimit);
    stream_.expires_after(kReadTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == boost::asio::error::eof ||
        ec == boost::asio::error::connection_reset || ec == boost::asio::error::operation_aborted) {
      return close();
    }
    if (ec) {
      const bool too_large =
          ec == http::error::header_limit || ec == http::error::body_limit || ec == http::error::buffer_overflow;
      return refuse_and_close(too_large ? http::status::payload_too_large : http::status::bad_request,
                              too_large ? "request too large\n" : "malformed request\n");
    }
    ctx_->requests.fetch_add(1, std::memory_order_relaxed);
    handle(parser_->release());
  }

  void handle(http::request<http::string_body> req) {
    const std::string_view host(req[http::field::host].data(), req[http::field::host].size());
    if (!host_allowed(host, ctx_->host_names, ctx_->port)) {
      return refuse(req, http::status::forbidden, "this server answers only to the names it is bound to\n");
    }
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return refuse(req, http::status::method_not_allowed, "read-only: GET and HEAD only\n");
    }
    auto target = parse_target(std::string_view(req.target().data(), req.target().size()));
    if (!target) return refuse(req, http::status::bad_request, target.message() + "\n");
    const std::string& path = target->path;

    if (path == "/" || path == "/index.html") return send_asset(req, "/index.html");
    for (const WebAsset& a : web_assets()) {
      if (path == a.path) return send_asset(req, a.path);
    }
    const auto t = target->query.find("t");
    const bool token_ok = t != target->query.end() && constant_time_equal(t->second, ctx_->token);
    if (path == "/ws" || path.rfind("/api/", 0) == 0 || path.rfind("/files/", 0) == 0) {
      if (!token_ok) return refuse(req, http::status::forbidden, "missing or wrong token\n");
      authenticated_ = true;  // never let go for a newcomer
    } else {
      return refuse(req, http::status::not_found, "not found\n");
    }
    if (path == "/ws") {
      if (!beast::websocket::is_upgrade(req))
        return refuse(req, http::status::bad_request, "expected a WebSocket upgrade\n");
      const std::string_view origin(req[http::field::origin].data(), req[http::field::origin].size());
      if (!origin_allowed(origin, ctx_->host_names, ctx_->port)) {
        return refuse(req, http::status::forbidden, "WebSocket from another origin\n");
      }
      handed_over_ = true;
      start_ws_session(std::move(stream_), std::move(req), ctx_);
      return;
    }
    if (path == "/api/tiles") return send_text(req, ctx_->tiles_message, "application/json");
    if (path == "/api/health") return send_text(req, ctx_->health_message, "application/json");
    if (path == "/api/videos") return send_videos(req);
    if (path == "/api/overview") return send_overview(req, target->query);
    if (path == "/api/overview/ranks") return send_ranks(req, target->query);
    return send_file(req, path.substr(std::string_view("/files/").size()));
  }

  template <class Response>
  void common_headers(Response& res, std::string_view type, bool cache) {
    res.set(http::field::server, "tensorscope");
    res.set(http::field::content_type, beast::string_view(type.data(), type.size()));
    res.set(http::field::cache_control, cache ? "private, max-age=3600" : "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.set("Referrer-Policy", "no-referrer");
    res.set("X-Frame-Options", "DENY");
  }

  template <class Body>
  void write(std::shared_ptr<http::response<Body>> res, bool close_after = false) {
    if (close_after) res->keep_alive(false);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->read();
    });
  }

  void refuse(const http::request<http::string_body>& req, http::status status, std::string body) {
    ctx_->rejected.fetch_add(1, std::memory_order_relaxed);
    auto res = std::make_shared<http::response<http::string_body>>(status, req.version());
    common_headers(*res, "text/plain; charset=utf-8", false);
    res->keep_alive(req.keep_alive());
    if (req.method() != http::verb::head) res->body() = std::move(body);
    write(res, status == http::status::bad_request);
  }

  void refuse_and_close(http::status status, std::string body) {
    ctx_->rejected.fetch_add(1, std::memory_order_relaxed);
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    common_headers(*res, "text/plain; charset=utf-8", false);
    res->body() = std::move(body);
    write(res, true);
  }

  void send_asset(const http::request<http::string_body>& req, std::string_view name) {
    for (const WebAsset& a : web_assets()) {
      if (a.path != name) continue;
      auto res = std::make_shared<http::response<http::string_body>>(http::status::ok, req.version());
      common_headers(*res, content_type(a.path), false);
      if (a.path == "/index.html") {
        res->set("Content-Security-Policy",
                 "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
                 "connect-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'");
      }
      res->keep_alive(req.keep_alive());
      if (req.method() != http::verb::head) res->body().assign(a.data, a.size);
      return write(res);
    }
    refuse(req, http::status::not_found, "not found\n");
  }

  void send_text(const http::request<http::string_body>& req, const std::shared_ptr<const std::string>& text,
                 std::string_view type) {
    auto res = std::make_shared<http::response<http::string_body>>(http::status::ok, req.version());
    common_headers(*res, type, false);
    res->keep_alive(req.keep_alive());
    if (req.method() != http::verb::head) res->body() = text ? *text : std::string("{}");
    write(res);
  }

  void send_videos(const http::request<http::string_body>& req) {
    nlohmann::json sources = nlohmann::json::array();
    for (size_t i = 0; i < ctx_->files.size(); ++i) {
      nlohmann::json files = nlohmann::json::array();
      for (const auto& e : ctx_->files[i]->entries()) files.push_back(recording::to_json(e));
      sources.push_back({{"source", i},
                         {"dir", ctx_->files[i]->dir()},
                         {"error", ctx_->files[i]->last_error()},
                         {"files", std::move(files)}});
    }
    send_text(req, std::make_shared<const std::string>(dump_json({{"sources", std::move(sources)}})),
              "application/json");
  }

  // The overview of one metric in every session (parse_overview_query).
  void send_overview(const http::request<http::string_body>& req, const std::map<std::string, std::string>& query) {
    const StatusOr<OverviewQuery> q = parse_overview_query(query);
    if (!q) return refuse(req, http::status::bad_request, q.message() + "\n");
    refresh_summaries();
    nlohmann::json metrics = nlohmann::json::array(), sources = nlohmann::json::array();
    std::vector<float> cells;  // every cell of every table: one color scale, so ranks and sessions compare
    for (size_t i = 0; i < ctx_->summaries.size(); ++i) {
      nlohmann::json o = ctx_->summaries[i]->overview(q->metric, q->columns, &cells, only_tables(*q, i));
      o["source"] = i;
      const std::string& label = ctx_->options.sources[i].label;
      o["name"] = label.empty() ? "session " + std::to_string(i) : label;
      sources.push_back(std::move(o));
    }
    // The whole tensors of sharded runs, merged from the ranks' parts (whole_tables.h).
    nlohmann::json whole = ctx_->whole.overview(q->metric, q->columns, &cells);
    const recording::OverviewScale scale = recording::overview_scale(q->metric, cells);
    const nlohmann::json scale_json =
        scale.valid ? nlohmann::json{{"log", scale.log}, {"lo", scale.lo}, {"hi", scale.hi}} : nlohmann::json(nullptr);
    // The metrics some session has rows of (every one while none has any).
    const auto shown = [this](size_t m) {
      return std::any_of(ctx_->summaries.begin(), ctx_->summaries.end(), [m](const auto& s) { return s->has_rows(m); });
    };
    bool any = false;
    for (size_t m = 0; m < recording::kOverviewMetrics.size(); ++m) any = any || shown(m);
    for (size_t m = 0; m < recording::kOverviewMetrics.size(); ++m) {
      const auto& metric = recording::kOverviewMetrics[m];
      if (!any || shown(m))
        metrics.push_back({{"name", metric.name}, {"title", metric.title}, {"log", metric.log_scale}});
    }
    // The first report of each anomaly type over every session (recording/anomaly_firsts.h).
    recording::AnomalyFirsts firsts;
    for (const auto& source : sources) {
      const auto& a = source["anomalies"];
      if (a.contains("first") && a["first"].is_object()) {
        for (const auto& [type, report] : a["first"].items()) firsts.note(report);
      }
    }
    send_text(req,
              std::make_shared<const std::string>(dump_json({{"metrics", std::move(metrics)},
                                                             {"sources", std::move(sources)},
                                                             {"whole", std::move(whole)},
                                                             {"whole_left_out", ctx_->whole.jobs_left_out()},
                                                             {"scale", scale_json},
                                                             {"firsts", firsts.all()}})),
              "application/json");
  }

  // The tables of source `source` the query names (null: every one).
  static std::optional<std::set<std::pair<int, int64_t>>> only_tables(const OverviewQuery& q, size_t source) {
    if (!q.tables) return std::nullopt;
    std::set<std::pair<int, int64_t>> mine;
    for (const auto& [s, rank, pid] : *q.tables) {
      if (s == source) mine.emplace(rank, pid);
    }
    return mine;
  }

  // One metric at one step over every rank of every session (summary_tables.h: ranks_overview).
  void send_ranks(const http::request<http::string_body>& req, const std::map<std::string, std::string>& query) {
    const StatusOr<RanksQuery> q = parse_ranks_query(query);
    if (!q) return refuse(req, http::status::bad_request, q.message() + "\n");
    refresh_summaries();
    std::vector<const SummaryTables*> sessions;
    for (const auto& s : ctx_->summaries) sessions.push_back(s.get());
    std::vector<float> cells;
    nlohmann::json o = ranks_overview(sessions, *q, &cells);
    const recording::OverviewScale scale = recording::overview_scale(q->metric, cells);
    o["scale"] =
        scale.valid ? nlohmann::json{{"log", scale.log}, {"lo", scale.lo}, {"hi", scale.hi}} : nlohmann::json(nullptr);
    send_text(req, std::make_shared<const std::string>(dump_json(o)), "application/json");
  }

  // Reads what the sessions' summary tables gained, unless a request did within 300 ms
  // (the pages of several viewers share a read).
  void refresh_summaries() {
    const int64_t now = steady_time_ms();
    if (now - ctx_->summaries_read_ms < 300) return;
    ctx_->summaries_read_ms = now;
    std::vector<SummaryTables*> sessions;
    for (const auto& s : ctx_->summaries) sessions.push_back(s.get());
    ctx_->whole.refresh(sessions);
  }

  // "/files/<source>/<path listed in that source's index.json>", with one byte range.
  void send_file(const http::request<http::string_body>& req, const std::string& rest) {
    const size_t slash = rest.find('/');
    size_t source = SIZE_MAX;
    if (slash != std::string::npos && slash > 0 && slash < 4) {
      source = 0;
      for (size_t i = 0; i < slash; ++i) {
        if (rest[i] < '0' || rest[i] > '9') return refuse(req, http::status::not_found, "not found\n");
        source = source * 10 + static_cast<size_t>(rest[i] - '0');
      }
    }
    if (source >= ctx_->files.size()) return refuse(req, http::status::not_found, "no such session\n");
    const std::string file = rest.substr(slash + 1);
    SessionFiles& files = *ctx_->files[source];
    if (!recording::validate_index_path(file) || !files.listed(file)) {
      return refuse(req, http::status::not_found, "not a file listed in index.json\n");
    }
    const std::string full = files.dir() + "/" + file;
    UniqueFd fd(::open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return refuse(req, http::status::not_found, "the file is gone\n");
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    uint64_t first = 0, last = size == 0 ? 0 : size - 1;
    const auto range = req[http::field::range];
    const bool ranged = !range.empty();
    if (ranged && !parse_range(std::string_view(range.data(), range.size()), size, &first, &last)) {
      auto res =
          std::make_shared<http::response<http::string_body>>(http::status::range_not_satisfiable, req.version());
      common_headers(*res, "text/plain; charset=utf-8", false);
      res->set(http::field::content_range, "bytes */" + std::to_string(size));
      res->keep_alive(req.keep_alive());
      ctx_->rejected.fetch_add(1, std::memory_order_relaxed);
      return write(res);
    }
    if (size > 0) last = std::min(last, first + kMaxRangeBytes - 1);
    const bool partial = ranged || (size > 0 && last + 1 < size);
    auto res = std::make_shared<http::response<http::string_body>>(
        partial ? http::status::partial_content : http::status::ok, req.version());
    common_headers(*res, content_type(file), true);
    res->set(http::field::accept_ranges, "bytes");
    if (partial) {
      res->set(http::field::content_range,
               "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(size));
    }
    res->keep_alive(req.keep_alive());
    if (req.method() != http::verb::head && size > 0) {
      std::string body(last - first + 1, '\0');
      if (!pread_exact(fd.get(), body.data(), body.size(), first, full)) {
        return refuse(req, http::status::internal_server_error, "cannot read the file\n");
      }
      res->body() = std::move(body);
    }
    write(res);
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kHeaderLimit + kBodyLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<ServerContext> ctx_;
  bool handed_over_ = false;
  bool authenticated_ = false;  // showed the token: not let go for a newcomer
};

}  // namespace

void start_http_session(tcp::socket socket, std::shared_ptr<ServerContext> context) {
  std::make_shared<HttpSession>(std::move(socket), std::move(context))->start();
}

}  // namespace tensorscope::view
