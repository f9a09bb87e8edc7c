// view_server_test.cc — the live view's server against well-behaved and hostile clients:
// token, Host, Origin, path traversal, ranges, malformed and oversized requests and
// messages, many clients, a client that goes away mid-frame; frames and cursor answers
// over the WebSocket.
#include "tensorscope/view/view_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "temp_dir.h"
#include "tensorscope/recording/video_steps.h"
#include "tensorscope/view/live_board.h"

namespace tensorscope::view {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

constexpr char kVideo[] = "a__cpu__rank0__pid1__line__0000.mp4";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string video_bytes() {
  std::string s(20000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7);
  return s;
}

// A TCP connection to the server on loopback; -1 when it cannot be made.
int connect_raw(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A raw exchange: sends `request` as is, returns what the server answered until it closed
// the connection, `ms` passed without a byte, or (when `header_only`) the response's
// header is complete.
std::string raw_exchange(int port, const std::string& request, int ms = 3000, bool header_only = false) {
  const int fd = connect_raw(port);
  if (fd < 0) return "connect failed";
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (header_only && out.find("\r\n\r\n") != std::string::npos) break;
  }
  ::close(fd);
  return out;
}

std::string get(int port, const std::string& target, const std::string& extra = "",
                const std::string& host = "127.0.0.1") {
  return raw_exchange(port,
                      "GET " + target + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                          "\r\nConnection: close\r\n" + extra + "\r\n");
}

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

class ViewServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_dir_ = dir_.path() + "/out/sess";
    runtime_ = dir_.path() + "/rt";
    std::filesystem::create_directories(session_dir_ + "/steps");
    std::filesystem::create_directories(runtime_);
    ::chmod(runtime_.c_str(), 0700);
    write_file(session_dir_ + "/" + kVideo, video_bytes());
    write_file(session_dir_ + "/secret.txt", "not listed");
    std::string steps = std::string(recording::kStepsMagic) +
        "\n{\"stream\":\"a\",\"kind\":\"output\",\"device\":\"cpu\",\"rank\":0,\"pid\":1,\"mode\":\"line\"}\n";
    for (int s = 0; s < 10; ++s) steps += std::to_string(s) + "\n";
    write_file(session_dir_ + "/steps/" + kVideo + ".steps", steps);
    write_file(session_dir_ + "/index.json",
               std::string("{\"files\":[{\"path\":\"") + kVideo +
                   "\",\"stream\":\"a\",\"kind\":\"output\",\"device\":\"cpu\",\"rank\":0,\"pid\":1,"
                   "\"mode\":\"line\",\"frames\":10,\"first_step\":0,\"last_step\":9}]}");
    auto board = LiveBoardWriter::create(runtime_ + "/" + live_board_file_name("sess", 0), 16 << 20, 0);
    ASSERT_TRUE(board.is_ok()) << board.message();
    board_ = std::move(*board);
  }

  void start(int max_connections = 64) {
    ViewServerOptions o;
    o.sources.push_back({session_dir_, "sess", runtime_, ""});
    o.board_poll_ms = 5;
    o.status_poll_ms = 50;
    o.max_connections = max_connections;
    auto server = ViewServer::start(o);
    ASSERT_TRUE(server.is_ok()) << server.message();
    server_ = std::move(*server);
    port_ = server_->port();
    token_ = server_->token();
  }

  void publish(const std::string& stream, int64_t step, const std::string& image) {
    LiveFrame m;
    m.stream = stream;
    m.kind = "output";
    m.device = "cpu";
    m.mode = "line";
    m.step = step;
    m.producer_pid = 1;
    m.width = 640;
    m.height = 480;
    ASSERT_TRUE(board_->append(m, image));
  }

  // Waits until /api/tiles lists a live tile for `stream` at `step`.
  void wait_for_step(const std::string& stream, int64_t step) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto tiles = nlohmann::json::parse(body_of(get(port_, "/api/tiles?t=" + token_)), nullptr, false);
      if (tiles.is_object()) {
        for (const auto& t : tiles["tiles"]) {
          if (t["stream"] == stream && t.value("step", int64_t{-1}) == step) return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "no live tile of " << stream << " at step " << step;
  }

  std::unique_ptr<websocket::stream<tcp::socket>> open_ws(const std::string& origin = "") {
    auto ws = std::make_unique<websocket::stream<tcp::socket>>(ioc_);
    tcp::resolver resolver(ioc_);
    boost::asio::connect(ws->next_layer(), resolver.resolve("127.0.0.1", std::to_string(port_)));
    ws->set_option(websocket::stream_base::decorator([origin](websocket::request_type& req) {
      if (!origin.empty()) req.set(beast::http::field::origin, origin);
    }));
    ws->handshake("127.0.0.1:" + std::to_string(port_), "/ws?t=" + token_);
    return ws;
  }

  // Reads messages until one satisfies `want` (text JSON or binary frame), within 10 s.
  struct Message {
    bool binary = false;
    nlohmann::json json;  // text, or a binary frame's header
    std::string payload;  // a binary frame's image
  };
  Message read_until(websocket::stream<tcp::socket>& ws, const std::function<bool(const Message&)>& want) {
    beast::get_lowest_layer(ws).non_blocking(false);
    for (int i = 0; i < 1000; ++i) {
      beast::flat_buffer buffer;
      ws.read(buffer);
      Message m;
      m.binary = ws.got_binary();
      std::string bytes = beast::buffers_to_string(buffer.data());
      if (m.binary) {
        const uint32_t n = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8 |
            static_cast<uint8_t>(bytes[2]) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(bytes[3])) << 24;
        m.json = nlohmann::json::parse(bytes.substr(4, n));
        m.payload = bytes.substr(4 + n);
      } else {
        m.json = nlohmann::json::parse(bytes);
      }
      if (want(m)) return m;
    }
    ADD_FAILURE() << "no wanted message";
    return {};
  }

  testing::TempDir dir_{"view"};
  std::string session_dir_, runtime_;
  std::unique_ptr<LiveBoardWriter> board_;
  std::unique_ptr<ViewServer> server_;
  int port_ = 0;
  std::string token_;
  boost::asio::io_context ioc_;
};

TEST_F(ViewServerTest, ThePageIsPublicEveryDataRequestNeedsTheToken) {
  start();
  const std::string page = get(port_, "/");
  EXPECT_EQ(status_of(page), 200) << page;
  EXPECT_NE(page.find("<title>tensorscope live view</title>"), std::string::npos);
  EXPECT_NE(page.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(status_of(get(port_, "/main.js")), 200);
  EXPECT_EQ(status_of(get(port_, "/style.css")), 200);
  for (const std::string& target :
       std::vector<std::string>{"/api/tiles", "/api/health", "/api/videos", std::string("/files/0/") + kVideo, "/ws"}) {
    EXPECT_EQ(status_of(get(port_, target)), 403) << target;
    EXPECT_EQ(status_of(get(port_, target + "?t=wrong")), 403) << target;
    EXPECT_EQ(status_of(get(port_, target + "?t=" + token_.substr(0, 31))), 403) << target;
  }
  EXPECT_EQ(status_of(get(port_, "/api/videos?t=" + token_)), 200);
  EXPECT_EQ(status_of(get(port_, "/nothing-here")), 404);
  EXPECT_EQ(server_->url(), "http://127.0.0.1:" + std::to_string(port_) + "/#t=" + token_);
}

TEST_F(ViewServerTest, AHostHeaderNamingAnotherServerIsRefused) {
  start();
  EXPECT_EQ(status_of(get(port_, "/", "", "evil.example")), 403);
  EXPECT_EQ(status_of(get(port_, "/api/tiles?t=" + token_, "", "evil.example")), 403);
  EXPECT_EQ(status_of(get(port_, "/", "", "localhost")), 200);
  EXPECT_EQ(status_of(raw_exchange(port_, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")), 403);  // no Host
}

TEST_F(ViewServerTest, OnlyFilesListedInTheIndexAreServed) {
  start();
  const std::string t = "?t=" + token_;
  for (const std::string& target :
       std::vector<std::string>{"/files/0/secret.txt", "/files/0/index.json", "/files/0/../sess/secret.txt",
                                "/files/0/%2e%2e/sess/secret.txt", "/files/0/steps/" + std::string(kVideo) + ".steps",
                                "/files/0//etc/passwd", "/files/1/" + std::string(kVideo),
                                "/files/x/" + std::string(kVideo), "/files/0", "/files/", "/files/00000/a"}) {
    const std::string r = get(port_, target + t);
    EXPECT_TRUE(status_of(r) == 404 || status_of(r) == 400) << target << ": " << r.substr(0, 40);
    EXPECT_EQ(r.find("not listed"), std::string::npos) << target;
  }
  const std::string whole = get(port_, std::string("/files/0/") + kVideo + t);
  EXPECT_EQ(status_of(whole), 200);
  EXPECT_EQ(body_of(whole), video_bytes());
}

TEST_F(ViewServerTest, VideosAreServedInRanges) {
  start();
  const std::string target = std::string("/files/0/") + kVideo + "?t=" + token_;
  const std::string part = get(port_, target, "Range: bytes=100-199\r\n");
  EXPECT_EQ(status_of(part), 206) << part.substr(0, 200);
  EXPECT_NE(part.find("Content-Range: bytes 100-199/20000"), std::string::npos);
  EXPECT_EQ(body_of(part), video_bytes().substr(100, 100));
  EXPECT_EQ(body_of(get(port_, target, "Range: bytes=19990-\r\n")), video_bytes().substr(19990));
  EXPECT_EQ(body_of(get(port_, target, "Range: bytes=-5\r\n")), video_bytes().substr(19995));
  EXPECT_EQ(status_of(get(port_, target, "Range: bytes=20000-\r\n")), 416);
  EXPECT_EQ(status_of(get(port_, target, "Range: bytes=5-1\r\n")), 416);
  EXPECT_EQ(status_of(get(port_, target, "Range: lines=1-2\r\n")), 416);
}

TEST_F(ViewServerTest, MalformedOversizedAndWritingRequestsGet4xxAndTheServerGoesOn) {
  start();
  EXPECT_EQ(status_of(raw_exchange(port_, "GARBAGE\r\n\r\n")), 400);
  EXPECT_EQ(status_of(raw_exchange(
                port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n")),
            413);
  EXPECT_EQ(
      status_of(raw_exchange(port_,
                             "POST /api/tiles?t=" + token_ +
                                 " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")),
      405);
  EXPECT_EQ(status_of(raw_exchange(
                port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n" + std::string(100, 'x'))),
            413);
  EXPECT_EQ(status_of(raw_exchange(port_, "GET /%zz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")), 400);
  EXPECT_EQ(status_of(raw_exchange(port_, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")), 400);  // TLS hello
  EXPECT_EQ(raw_exchange(port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", 300), "");  // slow: no answer yet, no crash
  EXPECT_EQ(status_of(get(port_, "/")), 200);
  EXPECT_GE(server_->counters().rejected, 5u);
}

TEST_F(ViewServerTest, TheNewestFrameOfAWatchedTileArrivesOverTheWebSocket) {
  start();
  publish("a", 100, "jpeg-100");
  wait_for_step("a", 100);
  auto ws = open_ws("http://127.0.0.1:" + std::to_string(port_));
  Message tiles = read_until(*ws, [](const Message& m) { return !m.binary && m.json["type"] == "tiles"; });
  uint32_t id = 0;
  for (const auto& t : tiles.json["tiles"]) {
    if (t["stream"] == "a" && t["live"] == true) id = t["id"];
  }
  ASSERT_NE(id, 0u);
  ws->write(boost::asio::buffer(nlohmann::json{{"type", "watch"}, {"tiles", {id}}, {"cursor", nullptr}}.dump()));
  Message frame = read_until(*ws, [](const Message& m) { return m.binary; });
  EXPECT_EQ(frame.json["tile"], id);
  EXPECT_EQ(frame.json["step"], 100);
  EXPECT_EQ(frame.payload, "jpeg-100");
  publish("a", 101, "jpeg-101");
  frame = read_until(*ws, [](const Message& m) { return m.binary; });
  EXPECT_EQ(frame.json["step"], 101);
  EXPECT_EQ(frame.payload, "jpeg-101");

  // The cursor: step 5 is older than every kept frame: frame 5 of the finished video.
  ws->write(boost::asio::buffer(nlohmann::json{{"type", "watch"}, {"tiles", {id}}, {"cursor", 5}}.dump()));
  Message at5 = read_until(*ws, [](const Message& m) { return !m.binary && m.json["type"] == "video_frame"; });
  EXPECT_EQ(at5.json["path"], kVideo);
  EXPECT_EQ(at5.json["frame"], 5);
  EXPECT_EQ(at5.json["frames"], 10);
  EXPECT_EQ(at5.json["step"], 5);
  // Step 100 is kept: the kept frame itself.
  ws->write(boost::asio::buffer(nlohmann::json{{"type", "watch"}, {"tiles", {id}}, {"cursor", 100}}.dump()));
  Message at100 = read_until(*ws, [](const Message& m) { return m.binary; });
  EXPECT_EQ(at100.json["step"], 100);
  EXPECT_EQ(at100.payload, "jpeg-100");
  // Before any frame: none.
  ws->write(boost::asio::buffer(nlohmann::json{{"type", "watch"}, {"tiles", {id}}, {"cursor", -3}}.dump()));
  Message none = read_until(*ws, [](const Message& m) { return !m.binary && m.json["type"] == "no_frame"; });
  EXPECT_EQ(none.json["tile"], id);
}

TEST_F(ViewServerTest, WorkersAreToldWhileAPageWatches) {
  start();
  const std::string watch = runtime_ + "/" + live_watch_file_name("sess");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_FALSE(watch_file_fresh(watch));  // no page yet: workers spend nothing
  auto ws = open_ws();
  read_until(*ws, [](const Message& m) { return !m.binary && m.json["type"] == "health"; });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!watch_file_fresh(watch) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(watch_file_fresh(watch));
  struct stat st {};
  ASSERT_EQ(::stat(watch.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ViewServerTest, UpgradesWithoutTokenOrFromAnotherOriginAreRefused) {
  start();
  const std::string upgrade = "GET /ws?t=%s HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  auto with = [&](const std::string& token, const std::string& extra) {
    std::string r = upgrade;
    r.replace(r.find("%s"), 2, token);
    return status_of(raw_exchange(port_, r + extra + "\r\n", 1000, /*header_only=*/true));
  };
  EXPECT_EQ(with("nope", ""), 403);
  EXPECT_EQ(with(token_, "Origin: http://evil.example\r\n"), 403);
  EXPECT_EQ(with(token_, "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n"), 101);
}

TEST_F(ViewServerTest, BadWebSocketMessagesCloseThatPageOnly) {
  start();
  for (const std::string& bad :
       std::vector<std::string>{std::string("not json"), std::string("{\"type\":\"watch\"}"),
                                std::string("{\"type\":\"watch\",\"tiles\":[-1]}"),
                                std::string("{\"type\":\"watch\",\"tiles\":[],\"cursor\":\"x\"}"),
                                std::string(70000, '['), std::string("{\"type\":\"drop tables\",\"tiles\":[]}")}) {
    auto ws = open_ws();
    ws->write(boost::asio::buffer(bad));
    beast::error_code ec;
    for (int i = 0; i < 100 && !ec; ++i) {
      beast::flat_buffer b;
      ws->read(b, ec);
    }
    EXPECT_TRUE(ec == websocket::error::closed || ec) << bad.substr(0, 30);
  }
  EXPECT_EQ(status_of(get(port_, "/")), 200);
  auto ws = open_ws();
  Message tiles = read_until(*ws, [](const Message& m) { return !m.binary && m.json["type"] == "tiles"; });
  EXPECT_TRUE(tiles.json["tiles"].is_array());
}

// Connections that have not shown the token cannot keep a viewer out: beyond the cap the
// oldest of them is let go for a newcomer. Only pages that showed the token fill the
// server for good; then a newcomer gets 503, and a slot again once one leaves.
TEST_F(ViewServerTest, SilentConnectionsMakeWayAndOnlyViewersFillTheServer) {
  start(/*max_connections=*/8);
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(connect_raw(port_));  // idle connections that say nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(status_of(get(port_, "/api/health?t=" + token_)), 200);
  EXPECT_EQ(status_of(get(port_, "/")), 200);
  for (int fd : held) ::close(fd);
  // Pages with the token fill every slot: a viewer's request, and the page itself, are
  // still served, up to the hard limit (2 x 8 + 16 connections); past it, 503.
  std::vector<std::unique_ptr<websocket::stream<tcp::socket>>> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(open_ws());
  EXPECT_EQ(status_of(get(port_, "/api/health?t=" + token_)), 200);
  EXPECT_EQ(status_of(get(port_, "/")), 200);
  for (int i = 8; i < 2 * 8 + 16; ++i) pages.push_back(open_ws());
  int status = 0;
  const auto full_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < full_by && (status = status_of(get(port_, "/"))) != 503) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // idle sockets still closing
  }
  EXPECT_EQ(status, 503);
  pages.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline && (status = status_of(get(port_, "/"))) != 200) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
}

// Slowloris: connections that send their headers a byte at a time hold no slot a viewer
// needs, and are dropped after the header deadline anyway.
TEST_F(ViewServerTest, DribbledHeadersDoNotKeepAViewerOut) {
  start(/*max_connections=*/8);
  std::vector<int> slow;
  for (int i = 0; i < 30; ++i) {
    const int fd = connect_raw(port_);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, "G", 1, MSG_NOSIGNAL), 1);
    slow.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    for (int fd : slow) (void)::send(fd, "E", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    const auto start_ask = std::chrono::steady_clock::now();
    EXPECT_EQ(status_of(get(port_, "/api/tiles?t=" + token_)), 200) << "round " << round;
    EXPECT_LT(std::chrono::steady_clock::now() - start_ask, std::chrono::seconds(10));  // not queued behind them
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  for (int fd : slow) ::close(fd);
}

// Pages that neither read nor write (a stopped tab, a dead network), while no frame flows:
// closed once they answer no ping, and a viewer with the token is served meanwhile.
TEST_F(ViewServerTest, IdlePagesThatAnswerNoPingAreClosed) {
  ViewServerOptions o;
  o.sources.push_back({session_dir_, "sess", runtime_, ""});
  o.max_connections = 4;
  o.page_timeout_ms = 1000;
  auto server = ViewServer::start(o);
  ASSERT_TRUE(server.is_ok()) << server.message();
  server_ = std::move(*server);
  port_ = server_->port();
  token_ = server_->token();
  std::vector<std::unique_ptr<websocket::stream<tcp::socket>>> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(open_ws());  // never read again
  EXPECT_EQ(status_of(get(port_, "/api/tiles?t=" + token_)), 200) << "a viewer is served past max_connections";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && server_->counters().connections > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(server_->counters().connections, 0u) << "pages that answer no ping still hold their slots";
}

// A page that never reads holds a slot only until a message has been stuck for 10 s.
TEST_F(ViewServerTest, APageThatDoesNotReadIsClosed) {
  start();
  publish("a", 1, std::string(256 << 10, 'x'));
  wait_for_step("a", 1);
  auto ws = std::make_unique<websocket::stream<tcp::socket>>(ioc_);
  ws->next_layer().open(tcp::v4());
  ws->next_layer().set_option(boost::asio::socket_base::receive_buffer_size(4096));
  ws->next_layer().connect(tcp::endpoint(boost::asio::ip::address_v4::loopback(), static_cast<uint16_t>(port_)));
  ws->handshake("127.0.0.1:" + std::to_string(port_), "/ws?t=" + token_);
  ws->write(boost::asio::buffer(std::string("{\"type\":\"watch\",\"tiles\":[1],\"cursor\":null}")));
  // New frames keep coming (about 8 MB/s) until the socket buffers, whatever their size,
  // are full and the page's message has been stuck for 10 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (int step = 2; std::chrono::steady_clock::now() < deadline && server_->counters().connections > 0; ++step) {
    publish("a", step, std::string(256 << 10, static_cast<char>('a' + step % 26)));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_EQ(server_->counters().connections, 0u) << "the page that reads nothing was not closed";
}

TEST_F(ViewServerTest, APageThatVanishesMidFrameHarmsNoOne) {
  start();
  const std::string big(200000, 'x');
  publish("a", 1, big);
  wait_for_step("a", 1);
  for (int round = 0; round < 5; ++round) {
    auto ws = open_ws();
    ws->write(boost::asio::buffer(std::string("{\"type\":\"watch\",\"tiles\":[1],\"cursor\":null}")));
    for (int s = 0; s < 20; ++s) publish("a", 2 + round * 20 + s, big);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::shutdown(ws->next_layer().native_handle(), SHUT_RDWR);  // gone, mid-frame most likely
    ws->next_layer().close();
  }
  auto ws = open_ws();
  ws->write(boost::asio::buffer(std::string("{\"type\":\"watch\",\"tiles\":[1],\"cursor\":null}")));
  Message frame = read_until(*ws, [](const Message& m) { return m.binary; });
  EXPECT_EQ(frame.payload.size(), big.size());
  EXPECT_EQ(status_of(get(port_, "/")), 200);
}

TEST_F(ViewServerTest, ManyPagesEachGetTheFrames) {
  start();
  publish("a", 7, "jpeg-7");
  wait_for_step("a", 7);
  std::vector<std::unique_ptr<websocket::stream<tcp::socket>>> pages;
  for (int i = 0; i < 24; ++i) {
    pages.push_back(open_ws());
    pages.back()->write(boost::asio::buffer(std::string("{\"type\":\"watch\",\"tiles\":[1],\"cursor\":null}")));
  }
  for (auto& ws : pages) {
    Message frame = read_until(*ws, [](const Message& m) { return m.binary; });
    EXPECT_EQ(frame.payload, "jpeg-7");
  }
  EXPECT_GE(server_->counters().connections, 24u);
}

TEST_F(ViewServerTest, SeveralSessionDirectoriesAreShownTogether) {
  const std::string other = dir_.path() + "/node1/sess";
  std::filesystem::create_directories(other);
  write_file(other + "/b.mp4", "video of node 1");
  write_file(other + "/index.json",
             "{\"files\":[{\"path\":\"b.mp4\",\"stream\":\"a\",\"kind\":\"output\",\"device\":\"cpu\","
             "\"rank\":8,\"pid\":2,\"mode\":\"line\",\"frames\":1,\"first_step\":0,\"last_step\":0}]}");
  ViewServerOptions o;
  o.sources.push_back({session_dir_, "sess", runtime_, ""});
  o.sources.push_back({other, "", "", ""});  // another node's session: its files only
  auto server = ViewServer::start(o);
  ASSERT_TRUE(server.is_ok()) << server.message();
  const int port = (*server)->port();
  const std::string t = "?t=" + (*server)->token();
  const auto tiles = nlohmann::json::parse(body_of(get(port, "/api/tiles" + t)));
  std::set<std::pair<int, int>> seen;  // (source, rank)
  for (const auto& tile : tiles["tiles"]) seen.insert({tile["source"].get<int>(), tile["rank"].get<int>()});
  EXPECT_TRUE(seen.count({0, 0})) << tiles.dump();
  EXPECT_TRUE(seen.count({1, 8})) << tiles.dump();
  EXPECT_EQ(body_of(get(port, "/files/1/b.mp4" + t)), "video of node 1");
  EXPECT_EQ(status_of(get(port, "/files/1/" + std::string(kVideo) + t)), 404);  // listed by source 0 only
  const auto videos = nlohmann::json::parse(body_of(get(port, "/api/videos" + t)));
  EXPECT_EQ(videos["sources"].size(), 2u);
}

TEST_F(ViewServerTest, OnlyLoopbackWithoutTheRemoteFlag) {
  ViewServerOptions o;
  o.sources.push_back({session_dir_, "sess", runtime_, ""});
  o.bind_address = "0.0.0.0";
  auto refused = ViewServer::start(o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("other machines"), std::string::npos) << refused.message();
  o.bind_address = "not an address";
  EXPECT_FALSE(ViewServer::start(o).is_ok());
  o.sources.clear();
  o.bind_address = "127.0.0.1";
  EXPECT_FALSE(ViewServer::start(o).is_ok());
}

}  // namespace
}  // namespace tensorscope::view
