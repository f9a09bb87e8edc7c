// worker.h — a worker process: reads its producers' rings and renders their streams.
//
// Started by the supervisor (`tensorscoped --worker-fd N`); talks to it over a framed
// JSON channel (config, attach with the segment's fd, detach, shutdown in; heartbeat,
// finished files, detached, bye out). The main (reader) thread drains the rings,
// validating every record (RingReader) and reducing it on the spot; render threads (one
// per CPU unless render_threads says otherwise; render_queue.h) draw and encode, each
// stream on one of them; the recording sinks (record_sinks.h) write raw values and
// statistics on a thread of their own. When the supervisor goes away or asks to shut down, every open
// video is finalized before exit.
// Thread safety: run() owns the process; the render threads only touch their streams'
// StreamVideos, the live publisher and the outbox (locked).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/device_payload_reader.h"
#include "worker/live_publisher.h"
#include "worker/overview_videos.h"
#include "worker/record_sinks.h"
#include "worker/render_queue.h"
#include "worker/stream_router.h"
#include "worker/summary_intake.h"
#include "worker/tensorboard_scalars.h"
#include "config/daemon_config.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/shared_segment.h"

namespace tensorscope::daemon {

class Worker {
 public:
  explicit Worker(int control_fd);
  ~Worker();
  int run();

 private:
  struct Attached {
    std::shared_ptr<SharedSegment> segment;  // shared with the render jobs of its records
    std::unique_ptr<RingReader> reader;
    bool detaching = false;
    bool poisoned_logged = false;
    bool truncated = false;  // its file was truncated under us: no longer read
    uint64_t invalid_logged = 0;
    uint64_t pending_position = 0;  // slot of a device payload still being copied
    int64_t pending_since_ms = 0;   // 0: none pending
  };

  Status configure(const nlohmann::json& message);
  void handle(const nlohmann::json& message, int fd);
  // A summary record (kSummary): to the summary table, the anomaly detector and the
  // overview; the anomalies go to the supervisor. False when it is refused (counted invalid).
  bool take_summaries(uint64_t producer_id, Attached& producer, const RecordView& view);
  // Reads up to `budget` records of a producer; returns how many slots were consumed.
  int drain(uint64_t producer_id, Attached& producer, int budget);
  // True (and the supervisor told, once) when the producer's segment file was truncated
  // under the mapping (sigbus_guard.h): its ring is not read any more.
  bool truncated(uint64_t producer_id, Attached& producer);
  void detach(uint64_t producer_id);
  void shutdown();
  void post(nlohmann::json message);  // render threads -> supervisor, via the outbox
  void post_anomalies(const std::vector<Anomaly>& anomalies);
  void render_later(RenderJob job);  // to its render lane (waits while that is full)
  // After every job queued so far, on every lane (waits while a lane is full).
  void render_after_all(std::function<void()> job);
  void flush_outbox();
  void send_heartbeat();
  // Heartbeat and outbox, when due: called between records so that a worker busy
  // draining a long backlog still reports (and is not taken for hung).
  void keep_in_touch();

  MessageChannel channel_;
  DaemonConfig config_;
  std::string session_dir_;
  int index_ = -1;
  bool configured_ = false;
  static constexpr int64_t kReferencePollMs = 500;
  int64_t next_reference_poll_ms_ = 0;
  bool stopping_ = false;
  std::unique_ptr<LivePublisher> live_;  // the live view's board (null: off)
  std::unique_ptr<RenderQueue> queue_;
  std::unique_ptr<StreamRouter> router_;
  std::unique_ptr<RecordSinks> sinks_;               // stats table, .npy dumps, HDF5
  std::unique_ptr<SummaryIntake> summaries_;         // summary records: table and anomalies
  std::unique_ptr<TensorBoardScalars> tensorboard_;  // ... and their scalars (export.tensorboard)
  std::unique_ptr<OverviewVideos> overview_;         // ... and the overview videos and PNGs
  std::map<uint64_t, Attached> producers_;
  DevicePayloadReader device_reader_;  // CUDA IPC payloads (declared after producers_:
                                       // its handles close before the segments unmap)
  std::mutex outbox_mutex_;
  std::vector<nlohmann::json> outbox_;
  int64_t next_heartbeat_ms_ = 0;
  int64_t shed_at_ms_ = 0;  // shutdown: from then on frames are shed (0: not shutting down)
  uint64_t records_ = 0;
  uint64_t invalid_ = 0;
};

}  // namespace tensorscope::daemon
