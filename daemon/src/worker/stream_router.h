// stream_router.h — routes validated records to their StreamVideo.
//
// Used inside a worker process (reader thread). Keeps one StreamVideo per (producer,
// stream, device, rank, mode), creates them on first sight (up to
// limits.max_streams_per_worker; records of streams beyond that are dropped and
// counted) and finalizes a producer's streams when it detaches. A new stream gets the
// render lane (render_queue.h) with the fewest streams, so that one producer's streams are
// drawn on every render thread. At most limits.max_open_videos_per_worker videos are open
// at once, shared evenly by the lanes (see open_video_limit.h).
// Thread safety: reader thread only, except stream_summaries() which copies atomics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/mode_selector.h"
#include "worker/stream_video.h"

namespace tensorscope::daemon {

class StreamRouter {
 public:
  // `live` (may be null): where drawn frames are offered to the live view; `lanes`: the
  // worker's render threads.
  StreamRouter(const DaemonConfig& config, std::string session_dir, FileFinished on_finished,
               LivePublisher* live = nullptr, size_t lanes = 1);

  // What route() made of a record: the job that draws it, or none; `over_limit` when the
  // record was dropped because limits.max_streams_per_worker streams exist (the producer
  // counts those in stats().dropped_by_daemon).
  struct Routed {
    RenderJob job;
    bool over_limit = false;
  };
  // The record of producer `producer_id` (process `producer_pid`), routed to its stream.
  Routed route(uint64_t producer_id, int64_t producer_pid, const RecordView& record);

  // The video of `key` whose frames are drawn elsewhere (StreamVideo::frame_job: the
  // overview), created on first use like any stream's and finished with its producer;
  // null beyond limits.max_streams_per_worker.
  std::shared_ptr<StreamVideo> video_for(const StreamKey& key, const std::string& kind);

  // Jobs, one per lane that has any (to run after the producer's frames), that finalize
  // every stream of `producer_id`; the streams are forgotten here at once.
  std::vector<RenderJob> finish_producer(uint64_t producer_id);
  std::vector<RenderJob> finish_all();

  uint64_t dropped_over_limit() const { return dropped_over_limit_; }
  // Whether the videos could be written (output_health.h), for the heartbeat.
  nlohmann::json output_summary() const { return output_health_.summary(); }
  // While the output is down: tries it with a small file of its own (output_health.h).
  void probe_output(int64_t now_ms) { output_health_.probe(session_dir_, now_ms); }
  nlohmann::json stream_summaries() const;

  // The render mode a record gets (ModeSelector's choice).
  RenderMode mode_for(const wire::RecordHeader& header) { return selector_.select(header); }

 private:
  const DaemonConfig& config_;
  const std::string session_dir_;
  const FileFinished on_finished_;
  LivePublisher* const live_;
  std::vector<std::unique_ptr<OpenVideoLimit>> open_limits_;  // one per lane (that lane's state)
  std::vector<size_t> lane_streams_;                          // streams per lane (reader thread)
  OutputHealth output_health_;  // written by the render thread, summarized by the heartbeat
  // A new stream's video, or null (counted) beyond the limit.
  std::shared_ptr<StreamVideo> add(const StreamKey& key, const std::string& kind,
                                   std::unique_ptr<FrameRenderer> renderer);
  // Takes the streams `pick` selects out of streams_; their finish jobs, one per lane.
  std::vector<RenderJob> finish_where(const std::function<bool(const StreamKey&)>& pick);

  ModeSelector selector_;
  mutable std::mutex mutex_;  // guards streams_ against stream_summaries()
  std::map<StreamKey, std::shared_ptr<StreamVideo>> streams_;
  uint64_t dropped_over_limit_ = 0;
};

}  // namespace tensorscope::daemon
