// connection.h — the client's link to the daemon: registration socket, segment, ring.
//
// Used inside the training process. A background thread looks for the session's daemon,
// creates a fresh segment, registers it over the Unix socket and watches the socket;
// when the daemon goes away (killed, restarted) or poisons the segment, the segment is
// retired and a new registration starts. The training thread only calls acquire(),
// which never blocks: it returns an empty guard while not connected.
// Thread safety: acquire() from any thread; the rest is internal to the thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/ring_writer.h"
#include "tensorscope/shared/shared_segment.h"

namespace tensorscope {

struct ConnectionConfig {
  std::string session;
  std::string runtime_dir;
  uint64_t shm_budget = 0;
  uint32_t ring_slots = 0;
  int rank = 0;
  int reconnect_interval_ms = 200;
  nlohmann::json run_info;  // collect_run_info(): sent in every registration (null: none)
};

class Connection {
 public:
  struct Active {
    std::unique_ptr<SharedSegment> segment;
    std::unique_ptr<RingWriter> writer;
    uint64_t serial = 0;     // 1 for the first registration, then 2, 3 ...
    bool cuda_ipc = false;   // the daemon's workers can read CUDA IPC payloads
    std::string cuda_note;   // why not, as the daemon said
    bool module_tree = false;  // the daemon reads kModuleTree records (older ones drop them)
  };

  // Keeps the segment mapped while held.
  class Guard {
   public:
    Guard(Connection* owner, Active* active) : owner_(owner), active_(active) {}
    ~Guard() { owner_->inflight_.fetch_sub(1, std::memory_order_seq_cst); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    explicit operator bool() const { return active_ != nullptr; }
    Active* operator->() const { return active_; }

   private:
    Connection* owner_;
    Active* active_;
  };

  explicit Connection(ConnectionConfig config);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Guard acquire() {
    inflight_.fetch_add(1, std::memory_order_seq_cst);
    return Guard(this, active_.load(std::memory_order_seq_cst));
  }
  bool connected() const { return active_.load(std::memory_order_acquire) != nullptr; }
  uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }

 private:
  void run();
  void try_connect();
  void watch();
  void retire(const std::string& why);
  void wait_ms(int ms);

  const ConnectionConfig config_;
  const long pid_;
  std::atomic<Active*> active_{nullptr};
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;  // eventfd: wakes the thread's poll on shutdown
  unsigned generation_ = 0;
  int refusal_backoff_ms_ = 0;
  std::string last_error_;  // logged once until it changes
  MessageChannel channel_;
  std::thread* thread_ = nullptr;  // a pointer: a forked child must leak, not join, it
};

// Increments in every child created by fork(); a Client made before the fork stops
// using its segment in the child (the parent owns it).
uint64_t fork_generation();

}  // namespace tensorscope
