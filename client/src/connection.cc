#include "connection.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "tensorscope/shared/device_pool_table.h"
#include "tensorscope/shared/logging.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {
namespace {

std::atomic<uint64_t> g_fork_generation{0};

void on_fork_child() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

void install_fork_handler() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &on_fork_child); });
}

uint64_t now_unix_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

constexpr int kRegisterTimeoutMs = 3000;

// Touches every page of a fresh segment here, on the background thread, so that the
// training thread's first lap through the ring does not pay for page faults.
void prefault(uint8_t* data, uint64_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
  for (uint64_t offset = 0; offset < bytes; offset += static_cast<uint64_t>(page)) {
    reinterpret_cast<volatile uint8_t*>(data)[offset] = 0;
  }
}
constexpr int kRefusedBackoffMs = 5000;

}  // namespace

uint64_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }

Connection::Connection(ConnectionConfig config)
    : config_(std::move(config)), pid_(static_cast<long>(::getpid())) {
  install_fork_handler();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = new std::thread([this] { run(); });
}

Connection::~Connection() {
  if (static_cast<long>(::getpid()) != pid_) {
    return;  // forked child: the thread and the segment belong to the parent
  }
  stop_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  thread_->join();
  delete thread_;
  retire("client closed");
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Connection::wait_ms(int ms) {
  pollfd p{wake_fd_, POLLIN, 0};
  ::poll(&p, 1, ms);
}

void Connection::run() {
  while (!stop_.load()) {
    try {
      if (active_.load() == nullptr) {
        try_connect();
        if (active_.load() == nullptr && !stop_.load()) {
          wait_ms(refusal_backoff_ms_ > 0 ? refusal_backoff_ms_ : config_.reconnect_interval_ms);
        }
      } else {
        watch();
      }
    } catch (const std::exception& e) {
      // Nothing may escape this thread (it would terminate the training process).
      TS_LOG_WARN("tensorscope client: connection error: {}", e.what());
      retire("connection error");
      wait_ms(kRefusedBackoffMs);
    } catch (...) {
      retire("connection error");
      wait_ms(kRefusedBackoffMs);
    }
  }
}

void Connection::try_connect() {
  refusal_backoff_ms_ = 0;
  const std::string socket_path = session_socket_path(config_.runtime_dir, config_.session);
  if (::access(socket_path.c_str(), F_OK) != 0) return;  // no daemon yet: stay quiet
  auto report = [this](const std::string& message) {
    if (message != last_error_) TS_LOG_WARN("tensorscope client: {}", message);
    last_error_ = message;
  };
  Status dir = ensure_private_dir(config_.runtime_dir);
  if (!dir) return report(dir.message());
  auto fd = connect_unix(socket_path);
  if (!fd) return;  // stale socket, daemon starting or gone
  MessageChannel channel(*fd);
  auto cred = peer_credentials(channel.fd());
  if (!cred || cred->uid != ::geteuid()) {
    return report("daemon socket " + socket_path + " is not served by our user; not connecting");
  }
  auto layout = plan_segment_layout(config_.shm_budget, config_.ring_slots);
  if (!layout) return report(layout.message());

  std::string path = segment_file_path(config_.runtime_dir, config_.session, pid_, generation_++);
  auto segment = SharedSegment::create(
      path, *layout,
      SegmentIdentity{pid_, static_cast<uint32_t>(::geteuid()), config_.rank, config_.session});
  if (!segment && errno == EEXIST) {  // left by a dead process that had our pid
    ::unlink(path.c_str());
    segment = SharedSegment::create(
        path, *layout,
        SegmentIdentity{pid_, static_cast<uint32_t>(::geteuid()), config_.rank, config_.session});
  }
  if (!segment) return report(segment.message());
  prefault((*segment)->data(), (*segment)->data_capacity());

  nlohmann::json hello = {{"type", "register"},
                          {"abi", wire::kAbiVersion},
                          {"pid", pid_},
                          {"rank", config_.rank},
                          {"session", config_.session},
                          {"segment", segment_file_name(config_.session, pid_, generation_ - 1)},
                          {"segment_size", (*segment)->size()}};
  if (config_.run_info.is_object()) hello["run_info"] = config_.run_info;
  Status sent = channel.send(hello);
  auto reply = sent ? channel.receive(kRegisterTimeoutMs) : StatusOr<nlohmann::json>(sent);
  auto string_field = [](const nlohmann::json& j, const char* key) {
    const auto it = j.is_object() ? j.find(key) : j.end();
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string refusal;
  if (!reply) {
    refusal = "registration failed: " + reply.message();
    refusal_backoff_ms_ = kRefusedBackoffMs;  // a daemon that does not answer: go slow
  } else if (string_field(*reply, "type") != "registered") {
    const std::string message = string_field(*reply, "message");
    refusal = "daemon refused registration: " + (message.empty() ? std::string("no reason given") : message);
    refusal_backoff_ms_ = kRefusedBackoffMs;
  }
  if (!refusal.empty()) {
    (void)(*segment)->unlink_file();
    return report(refusal);
  }
  auto* active = new Active();
  active->segment = std::move(*segment);
  active->writer = std::make_unique<RingWriter>(active->segment.get());
  active->serial = connections_.load(std::memory_order_relaxed) + 1;
  const auto ipc = reply->find("cuda_ipc");
  active->cuda_ipc = ipc != reply->end() && ipc->is_boolean() && ipc->get<bool>();
  active->cuda_note = string_field(*reply, "cuda_note");
  const auto tree = reply->find("module_tree");
  active->module_tree = tree != reply->end() && tree->is_boolean() && tree->get<bool>();
  channel_ = std::move(channel);
  last_error_.clear();
  connections_.fetch_add(1, std::memory_order_relaxed);
  active_.store(active, std::memory_order_seq_cst);
  TS_LOG_INFO("tensorscope client: connected to session '{}' (segment {})", config_.session, path);
}

void Connection::watch() {
  Active* active = active_.load();
  pollfd fds[2] = {{channel_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int rc = ::poll(fds, 2, 100);
  if (stop_.load()) return;
  active->segment->header()->heartbeat_unix_ns.store(now_unix_ns(), std::memory_order_relaxed);
  if (rc > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    Status st = channel_.read_available();
    nlohmann::json message;
    while (channel_.pop(&message)) {
    }  // the daemon sends nothing we act on yet
    if (!st) return retire("daemon connection " + st.message());
  }
  if (active->segment->header()->consumer_state.load(std::memory_order_acquire) ==
      wire::kConsumerPoisoned) {
    retire("daemon found our segment corrupt; registering a fresh one");
  }
}

void Connection::retire(const std::string& why) {
  Active* old = active_.exchange(nullptr, std::memory_order_seq_cst);
  channel_.close();
  if (old == nullptr) return;
  // Pinned-host copies in flight hold guards until their GPU copy is done.
  for (int spins = 0; inflight_.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // A worker of the old daemon may still be copying device blocks: it drops what it
  // copied once it sees the pools revoked, before we reuse them for a new registration.
  revoke_pools(old->segment->pool(0));
  (void)old->segment->unlink_file();
  delete old;
  if (!stop_.load()) TS_LOG_INFO("tensorscope client: disconnected ({})", why);
}

}  // namespace tensorscope
