#include "ws_session.h"

#include "tensorscope/base/clock.h"

#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace tensorscope::view {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

constexpr size_t kMaxMessageBytes = 64 * 1024;
constexpr size_t kMaxWatched = 20000;
// A message that has not left in this long: the page does not read; it is closed.
constexpr auto kStalledSend = std::chrono::seconds(10);

class WsSession : public PageSink, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(beast::tcp_stream stream, std::shared_ptr<ServerContext> context)
      : ws_(std::move(stream)), ctx_(std::move(context)) {}
  ~WsSession() override { ctx_->connections.fetch_sub(1, std::memory_order_relaxed); }

  void start(http::request<http::string_body> upgrade) {
    beast::get_lowest_layer(ws_).expires_never();
    auto timeout = websocket::stream_base::timeout::suggested(beast::role_type::server);
    timeout.idle_timeout = std::chrono::milliseconds(ctx_->options.page_timeout_ms);
    timeout.keep_alive_pings = true;  // a page that answers none is closed
    ws_.set_option(timeout);
    ws_.read_message_max(kMaxMessageBytes);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "tensorscope"); }));
    ws_.async_accept(upgrade, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->ctx_->pages.push_back(self);
      self->open_ = true;
      if (self->ctx_->tiles_message) self->pending_text_.push_back(self->ctx_->tiles_message);
      if (self->ctx_->health_message) self->pending_text_.push_back(self->ctx_->health_message);
      self->pump();
      self->read();
    });
  }

  void frames_arrived() override { pump(); }

  void tick(std::shared_ptr<const std::string> tiles, std::shared_ptr<const std::string> health,
            bool files_changed) override {
    if (!open_) return;
    if (writing_ && std::chrono::steady_clock::now() - write_started_ > kStalledSend) {
      // A page that does not read (or cannot: a dead network) holds a slot: let it go.
      open_ = false;
      ctx_->rejected.fetch_add(1, std::memory_order_relaxed);
      beast::get_lowest_layer(ws_).close();
      return;
    }
    // Only the newest of each: a page that cannot keep up gets the latest lists.
    pending_text_.clear();
    pending_text_.push_back(std::move(tiles));
    pending_text_.push_back(std::move(health));
    if (files_changed) {
      files_answered_.clear();
      ++cursor_version_;  // a cursor answer may now come from a newer finished video
    }
    pump();
  }

 private:
  void read() {
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->open_ = false;
        return;
      }
      self->on_message();
      if (self->open_) self->read();
    });
  }

  void on_message() {
    const std::string text = beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
    if (!m.is_object() || m.value("type", std::string()) != "watch" || !m.contains("tiles") || !m["tiles"].is_array() ||
        m["tiles"].size() > kMaxWatched) {
      return fail("expected {\"type\": \"watch\", \"tiles\": [...], \"cursor\": null | step}");
    }
    std::vector<uint32_t> tiles;
    for (const auto& t : m["tiles"]) {
      if (!t.is_number_unsigned() || t.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
        return fail("tile ids are unsigned integers");
      }
      tiles.push_back(t.get<uint32_t>());
    }
    std::optional<int64_t> cursor;
    if (m.contains("cursor") && !m["cursor"].is_null()) {
      if (!m["cursor"].is_number_integer()) return fail("cursor: a step or null");
      cursor = m["cursor"].get<int64_t>();
    }
    watched_ = std::move(tiles);
    next_ = 0;
    if (cursor != cursor_) {
      cursor_ = cursor;
      ++cursor_version_;
      sent_seq_.clear();  // the page shows cursor frames now: live ones are sent again
      files_answered_.clear();
    }
    pump();
  }

  void fail(const char* why) {
    open_ = false;
    ctx_->rejected.fetch_add(1, std::memory_order_relaxed);
    ws_.async_close(websocket::close_reason(websocket::close_code::policy_error, why),
                    [self = shared_from_this()](beast::error_code) {});
  }

  // Sends the next message if none is in flight: lists first, then the next watched tile
  // whose state the page has not seen, round robin from where the last pass stopped.
  void pump() {
    if (!open_ || writing_) return;
    if (!pending_text_.empty()) {
      auto text = std::move(pending_text_.front());
      pending_text_.pop_front();
      if (text) return send(false, std::move(text));
    }
    for (size_t n = 0; n < watched_.size(); ++n) {
      const size_t i = (next_ + n) % watched_.size();
      const uint32_t id = watched_[i];
      if (auto message = next_message(id)) {
        next_ = i + 1;
        return send(message->first, std::move(message->second));
      }
    }
  }

  using Message = std::pair<bool, std::shared_ptr<const std::string>>;  // binary?, bytes

  std::optional<Message> frame_message(uint32_t id, const LiveFrame& f, uint64_t seq) {
    nlohmann::json fields = {{"tile", id},
                             {"step", f.step},
                             {"seq", seq},
                             {"push_ns", f.push_unix_ns},
                             {"render_ns", f.render_unix_ns},
                             {"sent_ns", unix_time_ns()}};
    if (!f.legend.empty()) {  // from the board: shown only when it is JSON
      nlohmann::json legend = nlohmann::json::parse(f.legend, nullptr, false);
      if (!legend.is_discarded() && legend.is_object()) fields["legend"] = std::move(legend);
    }
    const std::string header = dump_json(fields);
    auto bytes = std::make_shared<std::string>();
    const uint32_t length = static_cast<uint32_t>(header.size());
    const char le[4] = {static_cast<char>(length & 0xff), static_cast<char>((length >> 8) & 0xff),
                        static_cast<char>((length >> 16) & 0xff), static_cast<char>(length >> 24)};
    bytes->reserve(4 + header.size() + f.jpeg.size());
    bytes->append(le, 4).append(header).append(f.jpeg);
    ctx_->frames_sent.fetch_add(1, std::memory_order_relaxed);
    return Message{true, std::move(bytes)};
  }

  // What tile `id` needs now, if anything.
  std::optional<Message> next_message(uint32_t id) {
    if (!cursor_) {
      uint64_t seq = 0;
      FramePtr newest = ctx_->store.newest(id, &seq);
      if (newest) {
        uint64_t& sent = sent_seq_[id];
        if (seq <= sent) return std::nullopt;
        sent = seq;
        return frame_message(id, *newest, seq);
      }
      // No live frame (a finished session): the last frame of its finished videos.
      if (files_answered_.count(id) != 0) return std::nullopt;
      files_answered_.insert(id);
      return from_files(id, std::numeric_limits<int64_t>::max(), nullptr);
    }
    uint64_t& answered = cursor_answered_[id];
    if (answered == cursor_version_) return std::nullopt;
    answered = cursor_version_;
    FramePtr kept = ctx_->store.at_step(id, *cursor_);
    return from_files(id, *cursor_, kept);
  }

  // The frame at or before `step`: the kept one, or a finished video's when that one is
  // closer; or word that there is none.
  std::optional<Message> from_files(uint32_t id, int64_t step, const FramePtr& kept) {
    auto info = ctx_->store.tile(id);
    if (!info) return std::nullopt;
    std::optional<VideoFrameRef> video;
    const size_t source = static_cast<size_t>(info->key.source);
    if (source < ctx_->files.size()) {
      video = ctx_->files[source]->frame_at(info->key.stream, info->key.device, info->key.rank, info->key.mode, step);
    }
    if (kept && (!video || kept->step >= video->step)) return frame_message(id, *kept, 0);
    if (video) {
      return Message{false,
                     std::make_shared<const std::string>(dump_json({{"type", "video_frame"},
                                                                    {"tile", id},
                                                                    {"source", source},
                                                                    {"path", video->path},
                                                                    {"frame", video->frame},
                                                                    {"frames", video->frames},
                                                                    {"step", video->step}}))};
    }
    return Message{
        false,
        std::make_shared<const std::string>(dump_json(
            {{"type", "no_frame"}, {"tile", id}, {"cursor", cursor_ ? nlohmann::json(*cursor_) : nlohmann::json()}}))};
  }

  void send(bool binary, std::shared_ptr<const std::string> bytes) {
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    ws_.binary(binary);
    ws_.async_write(boost::asio::buffer(*bytes), [self = shared_from_this(), bytes](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) {
        self->open_ = false;
        return;
      }
      self->pump();
    });
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<ServerContext> ctx_;
  beast::flat_buffer in_;
  bool open_ = false;
  bool writing_ = false;
  std::chrono::steady_clock::time_point write_started_;
  std::deque<std::shared_ptr<const std::string>> pending_text_;
  std::vector<uint32_t> watched_;
  size_t next_ = 0;
  std::optional<int64_t> cursor_;
  uint64_t cursor_version_ = 1;
  std::map<uint32_t, uint64_t> sent_seq_;
  std::map<uint32_t, uint64_t> cursor_answered_;
  std::set<uint32_t> files_answered_;
};

}  // namespace

void start_ws_session(beast::tcp_stream stream, http::request<http::string_body> upgrade,
                      std::shared_ptr<ServerContext> context) {
  std::make_shared<WsSession>(std::move(stream), std::move(context))->start(std::move(upgrade));
}

}  // namespace tensorscope::view
