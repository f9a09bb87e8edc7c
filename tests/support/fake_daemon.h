// fake_daemon.h — an in-process stand-in for the daemon, for transport benchmarks and
// the client's tests.
//
// Listens on the session socket, accepts registrations exactly as the supervisor does
// (framed JSON, segment opened and validated) and drains every ring on its own thread
// without rendering, so a benchmark measures the client's push cost and not the
// renderer. An optional callback sees each valid record before it is released (tests
// use it to check what arrived). With a FetchDevice function the sink tells clients it
// reads CUDA IPC payloads and fetches them with it (a DevicePayloadReader, in a process
// of its own: CUDA IPC handles cannot be opened by the process that exported them);
// without one, clients send CUDA tensors through pinned host memory. Thread safety: start() and stop() from one thread;
// draining, and the callback, run on the sink's thread.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/shared_segment.h"

namespace tensorscope::testing {

class FakeDaemon {
 public:
  using OnRecord = std::function<void(const RecordView&)>;
  // Points view->payload at a host copy of a device payload, or says why it cannot.
  using FetchDevice = std::function<Status(uint64_t producer, const SharedSegment&, RecordView*)>;
  FakeDaemon(std::string runtime_dir, std::string session, OnRecord on_record = nullptr,
             FetchDevice fetch_device = nullptr)
      : runtime_dir_(std::move(runtime_dir)),
        session_(std::move(session)),
        on_record_(std::move(on_record)),
        fetch_device_(std::move(fetch_device)) {}
  ~FakeDaemon() { stop(); }

  Status start() {
    Status dir = ensure_private_dir(runtime_dir_);
    if (!dir) return dir;
    auto fd = listen_unix(session_socket_path(runtime_dir_, session_));
    if (!fd) return fd.status();
    listen_fd_ = *fd;
    thread_ = std::thread([this] { run(); });
    return Status::ok();
  }

  void stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    thread_.join();
    ::close(listen_fd_);
    ::unlink(session_socket_path(runtime_dir_, session_).c_str());
  }

  // A busy daemon: each registration is answered only after `delay` (from start() on,
  // set before it), and refused when `refuse` is set.
  void set_registration(std::chrono::milliseconds delay, bool refuse = false) {
    registration_delay_ = delay;
    refuse_ = refuse;
  }

  uint64_t received() const { return received_.load(); }
  uint64_t dropped() const { return dropped_.load(); }

 private:
  struct Producer {
    MessageChannel channel;
    std::unique_ptr<SharedSegment> segment;
    std::unique_ptr<RingReader> reader;
  };

  void run() {
    std::vector<Producer> producers;
    while (!stop_.load()) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        Producer p{MessageChannel(fd), nullptr, nullptr};
        auto hello = p.channel.receive(2000);
        if (registration_delay_.count() > 0) std::this_thread::sleep_for(registration_delay_);
        if (hello && refuse_) {
          (void)p.channel.send({{"type", "refused"}, {"message", "this test daemon refuses every producer"}});
        } else if (hello && hello->is_object()) {
          auto seg = SharedSegment::open(runtime_dir_ + "/" + hello->value("segment", ""));
          if (seg) {
            p.segment = std::move(*seg);
            p.reader = std::make_unique<RingReader>(p.segment.get(), UINT64_MAX);
            (void)p.channel.send({{"type", "registered"},
                                  {"producer_id", producers.size() + 1},
                                  {"cuda_ipc", static_cast<bool>(fetch_device_)},
                                  {"module_tree", true},
                                  {"summaries", true}});
            producers.push_back(std::move(p));
          }
        }
      }
      bool any = false;
      for (size_t id = 0; id < producers.size(); ++id) {
        Producer& p = producers[id];
        RecordView v;
        for (int k = 0; k < 256; ++k) {
          const auto r = p.reader->next(&v);
          if (r == RingReader::Result::kEmpty || r == RingReader::Result::kPoisoned) break;
          any = true;
          if (r == RingReader::Result::kRecord && (v.header.flags & wire::kRecordDevicePayload) != 0) {
            Status fetched = fetch_device_ ? fetch_device_(id + 1, *p.segment, &v)
                                           : Status::error("this sink reads no device payloads");
            if (!fetched) {
              p.reader->drop(v, fetched.message());
              dropped_.fetch_add(1);
              continue;
            }
          }
          if (r == RingReader::Result::kRecord) {
            if (on_record_) on_record_(v);
            p.reader->release(v);
            received_.fetch_add(1);
          }
        }
      }
      if (!any) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const std::string runtime_dir_, session_;
  const OnRecord on_record_;
  const FetchDevice fetch_device_;
  int listen_fd_ = -1;
  std::chrono::milliseconds registration_delay_{0};
  bool refuse_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

// Waits up to `timeout` for `client` (a tensorscope::Client) to register with the sink.
template <typename ClientT>
bool wait_connected(const ClientT& client, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!client.connected() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return client.connected();
}

}  // namespace tensorscope::testing
