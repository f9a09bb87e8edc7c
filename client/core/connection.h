// connection.h — the client's link to the daemon: registration socket, segment, ring.
//
// Used inside the training process. A background thread looks for the session's daemon,
// creates a fresh segment, registers it over the Unix socket and watches the socket;
// when the daemon goes away (killed, restarted) or poisons the segment, the segment is
// retired and a new registration starts. The training thread only calls acquire(),
// which never blocks: it returns an empty guard while not connected.
//
// Start-up: when a daemon's socket exists at construction (or autostart is on), the
// constructor waits, at most `connect_timeout_ms`, for the first registration; with no
// socket and no autostart it does not wait at all. A daemon that appears later is
// noticed at once (RuntimeDirWatch). While a registration is under way (and while a
// daemon we started comes up) the segment is already there, unattached: pushes wait in
// its ring (bounded: counted dropped_full when it fills) for the daemon to read them, so
// a slow start loses nothing. A segment given up unattached counts its records as
// not_connected (unattached_lost()). Segments:
// their bytes are reserved at creation; when the runtime directory has less room than
// the budget, a smaller segment that fits (fitting_segment_budget: other programs, e.g.
// DataLoader workers, need /dev/shm too) is used and notes() says so; the page tables
// are filled after the registration reply, so nothing slow comes before it.
// Thread safety: acquire(), connected(), notes() from any thread; the rest is internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon_autostart.h"
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
  int reconnect_interval_ms = 200;  // fallback poll when the runtime directory cannot be watched
  int connect_timeout_ms = 0;       // the constructor's wait for the first registration
  uint64_t local_world_size = 1;    // processes per machine sharing the runtime directory
  std::optional<AutostartConfig> autostart;
  nlohmann::json run_info;  // collect_run_info(): sent in every registration (null: none)
  std::string reference;    // the run to compare with, sent in every registration ("" : none)
};

// The smallest segment budget tried when the runtime directory is short of space.
inline constexpr uint64_t kMinSegmentBudget = uint64_t{1} << 20;

// What a producer leaves free on the runtime directory's filesystem for the others: a
// quarter of it, at most 4 GiB (16 MiB of Docker's 64 MiB /dev/shm; 4 GiB of a 250 GiB
// disk under /tmp, not 62).
uint64_t kept_free_bytes(uint64_t total_bytes);

// The segment budget to try first. One producer takes at most half of what is free, never
// leaves less than kept_free_bytes free, and never more than its share of half the
// filesystem among `local_world_size` ranks (LOCAL_WORLD_SIZE, as torchrun sets it):
// DataLoader workers and NCCL need /dev/shm too. `budget` when it fits, else the largest
// power of two that does, but not below kMinSegmentBudget (0 when even that does not fit).
uint64_t fitting_segment_budget(uint64_t budget, uint64_t free_bytes, uint64_t total_bytes, uint64_t local_world_size);

class Connection {
 public:
  struct Active {
    std::unique_ptr<SharedSegment> segment;
    std::unique_ptr<RingWriter> writer;
    uint64_t serial = 0;  // 1 for the first registration, then 2, 3 ...
    // The daemon replied and reads the segment. Until then pushes wait in the ring, and
    // the fields below (written before it turns true) are not to be read.
    std::atomic<bool> attached{false};
    bool cuda_ipc = false;     // the daemon's workers can read CUDA IPC payloads
    std::string cuda_note;     // why not, as the daemon said
    bool module_tree = false;  // the daemon reads kModuleTree records (older ones drop them)
    bool summaries = false;    // the daemon reads kSummary records (older ones refuse them)
    bool is_attached() const { return attached.load(std::memory_order_acquire); }
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

  // What a user should know about the link (ClientStats).
  struct Notes {
    uint64_t segment_bytes = 0;  // the segment in use (or last used); 0 before the first
    std::string shm_note;        // why the segment is smaller than the budget, or none could be made
    std::string state;           // why not connected, in words ("" while connected)
    std::string autostart;       // DaemonAutostart::state()
  };

  explicit Connection(ConnectionConfig config);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Guard acquire() {
    inflight_.fetch_add(1, std::memory_order_seq_cst);
    return Guard(this, active_.load(std::memory_order_seq_cst));
  }
  // Registered: a daemon reads the segment.
  bool connected() const {
    const Active* active = active_.load(std::memory_order_acquire);
    return active != nullptr && active->is_attached();
  }
  // Pushes are taken: registered, or a registration (or a daemon's start) under way.
  bool accepting() const { return active_.load(std::memory_order_acquire) != nullptr; }
  // Records (and their bytes) pushed into segments given up before a daemon attached.
  uint64_t unattached_lost() const { return unattached_lost_.load(std::memory_order_relaxed); }
  uint64_t unattached_lost_bytes() const { return unattached_lost_bytes_.load(std::memory_order_relaxed); }
  // Records the daemon accepted but dropped (SegmentHeader::dropped_by_daemon), summed
  // over every segment of this connection.
  uint64_t dropped_by_daemon();
  uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }
  Notes notes() const;

 private:
  enum class Attempt { kConnected, kNoDaemon, kFailed };

  void run();
  Attempt try_connect();
  StatusOr<std::unique_ptr<SharedSegment>> create_segment();
  // The unattached segment pushes wait in (made and published when there is none).
  StatusOr<Active*> waiting_segment();
  void watch();
  void retire(const std::string& why);
  void wait_for_first_connection(int timeout_ms);
  void first_attempt_over();
  void set_state(const std::string& state);
  void refresh_autostart_note();  // notes_.autostart = autostart_->state()
  std::string no_daemon_note(const std::string& socket_path) const;
  void remove_leftover_segments();

  const ConnectionConfig config_;
  const long pid_;
  std::atomic<Active*> active_{nullptr};
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> retired_dropped_by_daemon_{0};  // of the segments retired so far
  std::atomic<uint64_t> unattached_lost_{0}, unattached_lost_bytes_{0};
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;  // eventfd: wakes the thread's poll on shutdown
  bool retried_after_launch_ = false;
  int closed_in_registration_ = 0;  // consecutive registrations the daemon closed unanswered
  int refusal_backoff_ms_ = 0;
  std::string last_error_;      // logged once until it changes
  std::string reference_note_;  // the daemon's note on the reference, logged once
  std::string last_shm_note_;
  MessageChannel channel_;
  std::unique_ptr<DaemonAutostart> autostart_;  // the thread's own

  mutable std::mutex notes_mutex_;
  Notes notes_;
  std::condition_variable first_cv_;
  bool first_over_ = false;  // guarded by notes_mutex_

  std::thread* thread_ = nullptr;  // a pointer: a forked child must leak, not join, it
};

// Increments in every child created by fork(); a Client made before the fork stops
// using its segment in the child (the parent owns it).
uint64_t fork_generation();

}  // namespace tensorscope
