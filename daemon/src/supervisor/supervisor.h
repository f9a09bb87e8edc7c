// supervisor.h — the tensorscoped main process: registration, workers, index, status.
//
// Listens on the session's Unix socket (mode 0600 in a 0700 runtime directory),
// accepts producers whose uid matches ours (SO_PEERCRED), opens and checks their
// segment, and hands each producer to one worker process (started by its WorkerLauncher:
// fork+exec of this binary in tensorscoped).
// Watches workers by waitpid and heartbeat, restarts a dead one with exponential backoff
// and re-attaches its producers (their unread records are still in the ring). Owns
// index.json: workers report finished files, the supervisor rewrites it atomically.
// On SIGINT/SIGTERM every worker finalizes its videos; then run() returns 0.
// Start-up: the session lock (file_lock.h on <runtime>/<session>.lock) makes it the one
// daemon of its session (a second one exits with kDaemonExitAlreadyRunning, or waits while the
// previous one finishes); segments that dead producers left are removed; the socket is
// published only once the workers run. With supervisor.idle_exit_ms it exits by itself,
// as on SIGTERM, once no producer has been connected for that long (autostarted daemons).
// Thread safety: single-threaded event loop.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/anomaly_log.h"
#include "supervisor/index_writer.h"
#include "supervisor/output_budget.h"
#include "output_health.h"
#include "supervisor/worker_launcher.h"
#include "supervisor/worker_restart_policy.h"
#include "config/daemon_config.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/shared_segment.h"

namespace tensorscope::daemon {

struct StartMode {
  bool autostarted = false;  // started by a client (shown by `tensorscope status`)
  int ready_fd = -1;         // written one byte and closed once the socket is published
  // Called once the socket is published (may be empty); returns the address of the live
  // page the daemon serves (with its token; "": none), for status and the exports' links.
  std::function<std::string()> on_started;
};

class Supervisor {
 public:
  // `launcher` starts every worker (and restarts them).
  Supervisor(DaemonConfig config, std::unique_ptr<WorkerLauncher> launcher, StartMode mode = {});
  ~Supervisor();
  int run();

 private:
  struct WorkerSlot {
    int index = 0;
    pid_t pid = -1;
    MessageChannel channel;
    bool alive = false;
    WorkerRestartPolicy policy;
    bool stopped_logged = false;  // said once that it is stopped (a debugger), not hung
    bool starved = false;         // silent past its deadline, but runnable or using CPU
    uint64_t starved_episodes = 0;
    nlohmann::json stats = nlohmann::json::object();
  };
  struct Producer {
    uint64_t id = 0;
    MessageChannel connection;  // closed when the producer went away
    pid_t pid = 0;
    int rank = 0;
    std::string segment_path;
    int segment_fd = -1;
    std::unique_ptr<SharedSegment> segment;  // status counters; what a dead worker lost
    int worker = -1;
    bool detaching = false;
    int64_t registered_ms = 0;
    std::string reference;  // the run its summaries are compared with ("" : none)
  };
  struct Pending {  // an accepted connection that has not registered yet
    MessageChannel connection;
    int64_t accepted_ms = 0;
  };
  struct Replying {  // a reply being written to a client that reads it slowly (or never)
    MessageChannel connection;
    int64_t deadline_ms = 0;
  };

  Status start();
  Status take_session_lock();
  void stop_listening();
  void spawn_worker(WorkerSlot& worker);
  void on_worker_exit(WorkerSlot& worker, const std::string& why);
  void reap_children();
  void check_workers(int64_t now);
  void attach(Producer& producer);
  int pick_worker() const;
  void accept_connections();
  void handle_pending(Pending& pending, bool* done);
  void handle_register(MessageChannel& connection, const nlohmann::json& message);
  void handle_worker_message(WorkerSlot& worker, const nlohmann::json& message);
  void dispatch_worker_message(WorkerSlot& worker, const nlohmann::json& message);
  void abandon_worker(WorkerSlot& worker);
  // Writes index.json when entries changed, at most every kIndexWriteIntervalMs unless
  // `now` (a producer left: its files are listed before status stops showing it; or
  // shutdown).
  void flush_index(bool now = false);
  // Sends `message` and closes the connection, without ever waiting for the client: what
  // the socket does not take now is written as it drains, for kReplyDeadlineMs at most.
  void reply_and_close(MessageChannel& connection, const nlohmann::json& message);
  void flush_replies(const std::vector<pollfd>& fds, size_t first, size_t count, int64_t now);
  // A gap in the main loop (the daemon was stopped, or starved of CPU) is ours, not the
  // workers': their heartbeat deadlines start again.
  void notice_own_stall(int64_t now);
  // The session directory was deleted while running: made again (every second at most),
  // index.json keeping only the files still there.
  void keep_session_dir();
  // The session within output_budget_mb (output_budget.h): measured every
  // kBudgetIntervalMs, its oldest videos deleted (and unlisted) past it.
  void keep_within_budget();
  // The state of the output: index.json's and the workers' (OutputHealth summaries), and
  // the disk the session takes.
  nlohmann::json output_status() const;
  void producer_gone(Producer& producer);
  void forget_producer(uint64_t id);
  nlohmann::json status_json() const;
  void shutdown_workers();
  // Recovers (video_recovery.h) the temporary videos whose names start with `prefix`
  // and lists them; `whose` names their writer in the log.
  void recover_videos(const std::string& prefix, const std::string& whose);

  DaemonConfig config_;
  const std::unique_ptr<WorkerLauncher> launcher_;
  StartMode mode_;
  bool already_running_ = false;
  int session_lock_fd_ = -1;
  int64_t last_producer_ms_ = 0;  // idle exit: when a producer was last connected
  std::string runtime_dir_;
  std::string session_dir_;
  std::string live_url_;  // the live page this daemon serves ("" : none)
  std::string socket_path_;
  int listen_fd_ = -1;
  std::vector<WorkerSlot> workers_;
  std::map<uint64_t, Producer> producers_;
  std::vector<Pending> pending_;
  std::vector<Replying> replying_;
  StallDetector own_stall_;  // a gap in the main loop is ours, not the workers'
  uint64_t next_producer_id_ = 1;
  std::unique_ptr<IndexWriter> index_;
  OutputHealth index_health_{"index.json"};  // whether index.json could be written
  int64_t session_dir_checked_ms_ = 0;
  static constexpr int64_t kBudgetIntervalMs = 10000;
  static constexpr int64_t kEvidenceSteps = 16;  // videos this near an anomaly's step stay
  int64_t next_budget_check_ms_ = 0;
  SessionUsage usage_;          // the last measure
  uint64_t rotated_files_ = 0;  // videos deleted for the budget, and their bytes
  uint64_t rotated_bytes_ = 0;
  bool over_budget_logged_ = false;  // said once until the session is under it again
  int64_t started_ms_ = 0;
  uint64_t registrations_refused_ = 0;
  std::unique_ptr<AnomalyLog> anomalies_;  // made with the session directory
  bool index_dirty_ = false;
  int64_t index_written_ms_ = 0;
  int64_t accept_paused_until_ms_ = 0;
};

}  // namespace tensorscope::daemon
