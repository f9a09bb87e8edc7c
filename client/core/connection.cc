#include "connection.h"

#include "tensorscope/base/clock.h"

#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime_dir_watch.h"
#include "tensorscope/shared/control_protocol.h"
#include "tensorscope/shared/device_pool_table.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/segment_cleanup.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {
namespace {

std::atomic<uint64_t> g_fork_generation{0};
// Segment names carry a generation that is unique in the process, so two Clients of one
// session in one process (a notebook cell run twice) never share a file name.
std::atomic<unsigned> g_segment_generation{0};

// Descriptors a forked child must not keep: the daemon takes a producer for gone when its
// control socket closes, so a child (a DataLoader worker, os.fork()) holding a copy kept a
// killed or closed parent registered for as long as the child lived. The fork handler
// closes them in the child; close() is async-signal-safe and the slots are lock-free.
// A descriptor may be listed more than once (remembered by two owners); each forget()
// takes one listing away.
constexpr size_t kForkClosedSlots = 64;
struct ForkClosedSlot {
  std::atomic<int> fd{-1};
};
std::array<ForkClosedSlot, kForkClosedSlots> g_fork_closed;  // constant-initialised

void remember_fork_closed(int fd) {
  if (fd < 0) return;
  for (auto& slot : g_fork_closed) {
    int empty = -1;
    if (slot.fd.compare_exchange_strong(empty, fd)) return;
  }  // more than 64 at once (many clients in one process): this one stays in a child
}

void forget_fork_closed(int fd) {
  if (fd < 0) return;
  for (auto& slot : g_fork_closed) {
    int expected = fd;
    if (slot.fd.compare_exchange_strong(expected, -1)) return;
  }
}

void on_fork_child() {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  for (auto& slot : g_fork_closed) {
    // A descriptor listed twice is closed twice: the second close fails (EBADF), harmless
    // here, before anything of the child's own can take the number.
    const int fd = slot.fd.exchange(-1, std::memory_order_relaxed);
    if (fd >= 0) ::close(fd);
  }
}

// The local socket of a registration attempt: listed while it lives.
struct ForkClosedListing {
  explicit ForkClosedListing(int fd) : fd(fd) { remember_fork_closed(fd); }
  ~ForkClosedListing() { forget_fork_closed(fd); }
  ForkClosedListing(const ForkClosedListing&) = delete;
  ForkClosedListing& operator=(const ForkClosedListing&) = delete;
  int fd;
};

void install_fork_handler() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &on_fork_child); });
}

std::string mib(uint64_t bytes) {
  const uint64_t m = bytes >> 20;
  return m > 0 ? std::to_string(m) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

constexpr int kRegisterTimeoutMs = 3000;
constexpr int kRefusedBackoffMs = 5000;
constexpr int kAutostartPollMs = 20;  // while a daemon we started comes up
// The constructor's wait for the segment that pushes wait in, past connect_timeout_ms:
// local work (a few milliseconds) that a busy machine may stretch.
constexpr int kSegmentWaitMs = 5000;

}  // namespace

uint64_t fork_generation() { return g_fork_generation.load(std::memory_order_relaxed); }

uint64_t kept_free_bytes(uint64_t total_bytes) { return std::min(total_bytes / 4, uint64_t{4} << 30); }

uint64_t fitting_segment_budget(uint64_t budget, uint64_t free_bytes, uint64_t total_bytes, uint64_t local_world_size) {
  const uint64_t keep = kept_free_bytes(total_bytes);
  uint64_t cap = free_bytes / 2;
  cap = std::min(cap, free_bytes > keep ? free_bytes - keep : 0);
  cap = std::min(cap, total_bytes / 2 / std::max<uint64_t>(1, local_world_size));
  if (budget <= cap) return budget;
  if (cap < kMinSegmentBudget) return 0;
  uint64_t fit = kMinSegmentBudget;
  while (fit * 2 <= cap) fit *= 2;
  return fit;
}

Connection::Connection(ConnectionConfig config) : config_(std::move(config)), pid_(static_cast<long>(::getpid())) {
  install_fork_handler();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (config_.autostart) autostart_ = std::make_unique<DaemonAutostart>(*config_.autostart);
  const std::string socket_path = session_socket_path(config_.runtime_dir, config_.session);
  const bool daemon_socket = ::access(socket_path.c_str(), F_OK) == 0;
  notes_.state =
      daemon_socket ? "connecting to the daemon of session '" + config_.session + "'" : no_daemon_note(socket_path);
  thread_ = new std::thread([this] { run(); });
  // A daemon is (or will be) there: wait a little for the first registration, so that
  // the pushes of the first steps are not lost. Without one, do not wait at all.
  if (config_.connect_timeout_ms > 0 && (daemon_socket || autostart_)) {
    wait_for_first_connection(config_.connect_timeout_ms);
  }
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
  autostart_.reset();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Connection::Notes Connection::notes() const {
  std::lock_guard<std::mutex> lock(notes_mutex_);
  return notes_;
}

std::string Connection::no_daemon_note(const std::string& socket_path) const {
  return "no daemon for session '" + config_.session + "' (no " + socket_path + ")";
}

void Connection::set_state(const std::string& state) {
  std::lock_guard<std::mutex> lock(notes_mutex_);
  notes_.state = state;
}

void Connection::refresh_autostart_note() {
  std::lock_guard<std::mutex> lock(notes_mutex_);
  notes_.autostart = autostart_->state();
}

void Connection::wait_for_first_connection(int timeout_ms) {
  std::unique_lock<std::mutex> lock(notes_mutex_);
  if (first_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return first_over_ || connected(); })) {
    return;
  }
  // Still registering (or our daemon still coming up): at least wait for the segment pushes
  // can wait in, however busy the machine, so that none of the first steps' is lost.
  first_cv_.wait_for(lock, std::chrono::milliseconds(std::max(timeout_ms, kSegmentWaitMs)),
                     [this] { return first_over_ || accepting(); });
}

void Connection::first_attempt_over() {
  {
    std::lock_guard<std::mutex> lock(notes_mutex_);
    if (first_over_) return;
    first_over_ = true;
  }
  first_cv_.notify_all();
}

void Connection::remove_leftover_segments() {
  const SegmentCleanup cleanup = remove_dead_segments(config_.runtime_dir);
  if (!cleanup.removed.empty()) {
    TS_LOG_INFO("tensorscope client: removed {} segment(s) of dead processes from {} ({} freed)",
                cleanup.removed.size(), config_.runtime_dir, mib(cleanup.bytes));
  }
}

void Connection::run() {
  // Signals are for the training program's own threads (Python handles them on its main
  // thread); here they would only interrupt a segment's reservation, over and over.
  sigset_t all;
  sigfillset(&all);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigdelset(&all, s);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  // The directory exists from now on, so a daemon's socket appearing in it can be watched.
  if (Status dir = ensure_private_dir(config_.runtime_dir); !dir) {
    TS_LOG_WARN("tensorscope client: {}", dir.message());
    set_state(dir.message());
  }
  remove_leftover_segments();
  RuntimeDirWatch dir_watch(config_.runtime_dir, config_.session + ".sock");
  while (!stop_.load()) {
    try {
      if (connected()) {
        watch();
        continue;
      }
      const Attempt attempt = try_connect();
      if (attempt == Attempt::kConnected) {
        first_cv_.notify_all();
        if (autostart_) {
          autostart_->on_connected(steady_time_ms());
          refresh_autostart_note();
        }
        // After the registration reply, while pushes already flow: never writes the ring.
        active_.load()->segment->prefault_data();
        continue;
      }
      bool launching = false;
      if (attempt == Attempt::kNoDaemon && autostart_) {
        const bool look_now = autostart_->step(steady_time_ms());
        launching = autostart_->in_progress();
        refresh_autostart_note();
        if (look_now && !retried_after_launch_) {
          retried_after_launch_ = true;  // once: the daemon should answer right away
          continue;
        }
      }
      retried_after_launch_ = false;
      if (launching) {
        (void)waiting_segment();  // pushes wait in it while our daemon comes up
      } else {
        retire("no daemon");  // a segment pushes waited in, given up
        first_attempt_over();
      }
      if (stop_.load()) break;
      const int wait = launching ? kAutostartPollMs
                                 : (refusal_backoff_ms_ > 0 ? refusal_backoff_ms_ : config_.reconnect_interval_ms);
      dir_watch.wait(wake_fd_, wait);
    } catch (const std::exception& e) {
      // Nothing may escape this thread (it would terminate the training process).
      TS_LOG_WARN("tensorscope client: connection error: {}", e.what());
      retire("connection error");
      first_attempt_over();
      dir_watch.wait(wake_fd_, kRefusedBackoffMs);
    } catch (...) {
      retire("connection error");
      first_attempt_over();
      dir_watch.wait(wake_fd_, kRefusedBackoffMs);
    }
  }
}

StatusOr<std::unique_ptr<SharedSegment>> Connection::create_segment() {
  // Free and total bytes of the runtime directory's filesystem (unknown: unlimited).
  auto space = [this](uint64_t* free_bytes, uint64_t* total_bytes) {
    struct statvfs fs {};
    *free_bytes = *total_bytes = UINT64_MAX;
    if (::statvfs(config_.runtime_dir.c_str(), &fs) == 0) {
      *free_bytes = static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
      *total_bytes = static_cast<uint64_t>(fs.f_blocks) * static_cast<uint64_t>(fs.f_frsize);
    }
  };
  uint64_t free_bytes = 0, total_bytes = 0;
  space(&free_bytes, &total_bytes);
  const std::string where = "runtime directory " + config_.runtime_dir;
  const std::string room = mib(free_bytes) + " free of " + mib(total_bytes);
  const std::string advice = "make it larger, e.g. docker --shm-size, or set TENSORSCOPE_RUNTIME_DIR";
  uint64_t budget = fitting_segment_budget(config_.shm_budget, free_bytes, total_bytes, config_.local_world_size);
  std::string failure;
  while (budget > 0) {
    auto layout = plan_segment_layout(budget, config_.ring_slots);
    if (!layout) {
      failure = layout.message();
      break;
    }
    const unsigned generation = g_segment_generation.fetch_add(1, std::memory_order_relaxed);
    const std::string path = segment_file_path(config_.runtime_dir, config_.session, pid_, generation);
    bool out_of_space = false;
    auto segment = SharedSegment::create(
        path, *layout, SegmentIdentity{pid_, static_cast<uint32_t>(::geteuid()), config_.rank, config_.session},
        &out_of_space);
    if (segment) {
      // Ranks sizing themselves at the same moment: whoever finds less than
      // kept_free_bytes left afterwards gives its segment back and takes a smaller one.
      uint64_t free_after = 0, total_after = 0;
      space(&free_after, &total_after);
      if (free_after < kept_free_bytes(total_after) && budget / 2 >= kMinSegmentBudget) {
        (void)(*segment)->unlink_file();
        budget /= 2;
        continue;
      }
      std::string note;
      if (budget < config_.shm_budget) {
        note = where + " has " + room + ": using a " + mib(layout->segment_size) + " segment instead of the " +
            mib(config_.shm_budget) + " shm_budget (larger tensors are refused; " + advice + ")";
      }
      if (note != last_shm_note_ && !note.empty()) TS_LOG_WARN("tensorscope client: {}", note);
      last_shm_note_ = note;
      std::lock_guard<std::mutex> lock(notes_mutex_);
      notes_.segment_bytes = layout->segment_size;
      notes_.shm_note = note;
      return segment;
    }
    failure = segment.message();
    if (!out_of_space || budget / 2 < kMinSegmentBudget) break;
    budget /= 2;  // the space went meanwhile (another producer): try a smaller one
  }
  if (failure.empty()) {
    failure = where + " has " + room + "; a segment of at least " + mib(kMinSegmentBudget) +
        " would leave too little for others: no tensors can be sent (" + advice + ")";
  }
  std::lock_guard<std::mutex> lock(notes_mutex_);
  notes_.shm_note = failure;
  return Status::error(failure);
}

StatusOr<Connection::Active*> Connection::waiting_segment() {
  if (Active* active = active_.load(); active != nullptr) return active;
  auto segment = create_segment();
  if (!segment) return Status::error(segment.message());
  auto* active = new Active();
  active->segment = std::move(*segment);
  active->writer = std::make_unique<RingWriter>(active->segment.get());
  active->serial = connections_.load(std::memory_order_relaxed) + 1;
  {
    std::lock_guard<std::mutex> lock(notes_mutex_);  // the constructor may wait for it
    active_.store(active, std::memory_order_seq_cst);
  }
  first_cv_.notify_all();
  return active;
}

Connection::Attempt Connection::try_connect() {
  refusal_backoff_ms_ = 0;
  const std::string socket_path = session_socket_path(config_.runtime_dir, config_.session);
  if (::access(socket_path.c_str(), F_OK) != 0) {  // no daemon yet: stay quiet
    set_state(no_daemon_note(socket_path));
    return Attempt::kNoDaemon;
  }
  auto report = [this](const std::string& message) {
    if (message != last_error_) TS_LOG_WARN("tensorscope client: {}", message);
    last_error_ = message;
    set_state(message);
    return Attempt::kFailed;
  };
  Status dir = ensure_private_dir(config_.runtime_dir);
  if (!dir) return report(dir.message());
  int connect_errno = 0;
  auto fd = connect_unix(socket_path, &connect_errno);
  if (!fd && connect_errno == EAGAIN) {  // a daemon whose backlog is full: it is there
    set_state("the daemon does not accept connections fast enough: " + fd.message());
    return Attempt::kFailed;
  }
  if (!fd) {  // stale socket of a daemon that died, or one shutting down
    set_state("no daemon answers on " + socket_path);
    return Attempt::kNoDaemon;
  }
  MessageChannel channel(*fd);
  const ForkClosedListing listed(channel.fd());  // from the socket's first moment
  auto cred = peer_credentials(channel.fd());
  if (!cred || cred->uid != ::geteuid()) {
    return report("daemon socket " + socket_path + " is not served by our user; not connecting");
  }
  auto waiting = waiting_segment();
  if (!waiting) {
    refusal_backoff_ms_ = kRefusedBackoffMs;
    return report(waiting.message());
  }
  Active* active = *waiting;
  const SharedSegment* segment = active->segment.get();
  nlohmann::json hello = {{control::kType, control::kRegister},
                          {"abi", wire::kAbiVersion},
                          {control::kProtocol, control::kControlProtocolVersion},
                          {"pid", pid_},
                          {"rank", config_.rank},
                          {"session", config_.session},
                          {"segment", segment->path().substr(segment->path().find_last_of('/') + 1)},
                          {"segment_size", segment->size()}};
  if (config_.run_info.is_object()) hello["run_info"] = config_.run_info;
  if (!config_.reference.empty()) hello["reference"] = config_.reference;
  Status sent = channel.send(hello);
  auto reply = sent ? channel.receive(kRegisterTimeoutMs) : StatusOr<nlohmann::json>(sent);
  auto string_field = [](const nlohmann::json& j, const char* key) {
    const auto it = j.is_object() ? j.find(key) : j.end();
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string refusal;
  const auto says = [&](const char* text) { return !reply && reply.message().find(text) != std::string::npos; };
  const bool closed = !reply && (reply.message() == "closed" || says("reset by peer") || says("Broken pipe"));
  if (closed && ++closed_in_registration_ == 1) {
    // Closed without a word: a daemon that stopped listening while we connected (idle
    // exit, shutdown). Not a refusal: look for (or start) the next one. Twice in a row
    // is a daemon that will not take us: a refusal, with its backoff.
    set_state("the daemon closed the connection during registration (it is stopping)");
    return Attempt::kNoDaemon;
  }
  if (!closed) closed_in_registration_ = 0;
  if (!reply) {
    refusal = "registration failed: " + reply.message();
    refusal_backoff_ms_ = kRefusedBackoffMs;  // a daemon that does not answer: go slow
  } else if (control::message_type(*reply) != control::kRegistered) {
    const std::string message = string_field(*reply, control::kMessage);
    refusal = "daemon refused registration: " +
        (message.empty() ? std::string("no reason given") : quote_for_message(message, 300));
    refusal_backoff_ms_ = kRefusedBackoffMs;
  }
  if (!refusal.empty()) return report(refusal);
  const auto ipc = reply->find("cuda_ipc");
  active->cuda_ipc = ipc != reply->end() && ipc->is_boolean() && ipc->get<bool>();
  active->cuda_note = string_field(*reply, "cuda_note");
  if (const std::string note = string_field(*reply, "reference_note"); !note.empty() && note != reference_note_) {
    reference_note_ = note;  // once, not at every registration
    TS_LOG_WARN("tensorscope client: reference run: {}", note);
  }
  const auto tree = reply->find("module_tree");
  active->module_tree = tree != reply->end() && tree->is_boolean() && tree->get<bool>();
  const auto summaries = reply->find("summaries");
  active->summaries = summaries != reply->end() && summaries->is_boolean() && summaries->get<bool>();
  channel_ = std::move(channel);
  remember_fork_closed(channel_.fd());  // for as long as the connection lasts (retire)
  last_error_.clear();
  closed_in_registration_ = 0;
  set_state("");
  connections_.fetch_add(1, std::memory_order_relaxed);
  {
    // Under the mutex the constructor waits on, so its wake-up is not missed; after the
    // reply's fields, which pushes read once they see it.
    std::lock_guard<std::mutex> lock(notes_mutex_);
    active->attached.store(true, std::memory_order_release);
  }
  TS_LOG_INFO("tensorscope client: connected to session '{}' (segment {})", config_.session, active->segment->path());
  return Attempt::kConnected;
}

void Connection::watch() {
  Active* active = active_.load();
  if (autostart_ && autostart_->in_progress()) {  // the launcher's outcome, and its lock
    autostart_->poll(steady_time_ms());
    refresh_autostart_note();
  }
  pollfd fds[2] = {{channel_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int rc = ::poll(fds, 2, 100);
  if (stop_.load()) return;
  active->segment->header()->heartbeat_unix_ns.store(unix_time_ns(), std::memory_order_relaxed);
  if (rc > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    Status st = channel_.read_available();
    nlohmann::json message;
    while (channel_.pop(&message)) {}  // the daemon sends nothing we act on yet
    if (!st) return retire("daemon connection " + st.message());
  }
  if (active->segment->header()->consumer_state.load(std::memory_order_acquire) == wire::kConsumerPoisoned) {
    retire("daemon found our segment corrupt; registering a fresh one");
  }
}

uint64_t Connection::dropped_by_daemon() {
  uint64_t n = retired_dropped_by_daemon_.load(std::memory_order_relaxed);
  Guard guard = acquire();
  if (guard) n += guard->segment->header()->dropped_by_daemon.load(std::memory_order_relaxed);
  return n;
}

void Connection::retire(const std::string& why) {
  Active* old = active_.exchange(nullptr, std::memory_order_seq_cst);
  forget_fork_closed(channel_.fd());
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
  const wire::SegmentHeader* header = old->segment->header();
  retired_dropped_by_daemon_.fetch_add(header->dropped_by_daemon.load(std::memory_order_relaxed),
                                       std::memory_order_relaxed);
  const bool attached = old->is_attached();
  const uint64_t lost = attached ? 0 : header->pushed.load(std::memory_order_relaxed);
  if (!attached) {  // no daemon read it: what waited in it was never sent
    unattached_lost_.fetch_add(lost, std::memory_order_relaxed);
    unattached_lost_bytes_.fetch_add(header->bytes_pushed.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  (void)old->segment->unlink_file();
  delete old;
  if (!attached) {
    if (lost > 0)
      TS_LOG_WARN("tensorscope client: {} push(es) waited for a daemon that never read them ({})", lost, why);
    return;
  }
  set_state("disconnected (" + why + ")");
  if (!stop_.load()) TS_LOG_INFO("tensorscope client: disconnected ({})", why);
}

}  // namespace tensorscope
