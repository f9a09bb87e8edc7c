// stream_router.h — routes validated records to their StreamVideo.
//
// Used inside a worker process (reader thread). Keeps one StreamVideo per (producer,
// stream, device, rank, mode), creates them on first sight (up to
// limits.max_streams_per_worker; records of streams beyond that are dropped and
// counted) and finalizes a producer's streams when it detaches. At most
// limits.max_open_videos_per_worker videos are open at once (see open_video_limit.h).
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
  // `live` (may be null): where drawn frames are offered to the live view.
  StreamRouter(const DaemonConfig& config, std::string session_dir, FileFinished on_finished,
               LivePublisher* live = nullptr);

  // A render job for the record of producer `producer_id` (process `producer_pid`), or an
  // empty function when it was dropped.
  std::function<void()> route(uint64_t producer_id, int64_t producer_pid, const RecordView& record);

  // The video of `key` whose frames are drawn elsewhere (StreamVideo::frame_job: the
  // overview), created on first use like any stream's and finished with its producer;
  // null beyond limits.max_streams_per_worker.
  std::shared_ptr<StreamVideo> video_for(const StreamKey& key, const std::string& kind);

  // A job (to run on the render thread after the producer's frames) that finalizes
  // every stream of `producer_id`; the streams are forgotten here at once.
  std::function<void()> finish_producer(uint64_t producer_id);
  std::function<void()> finish_all();

  uint64_t dropped_over_limit() const { return dropped_over_limit_; }
  // Whether the videos could be written (output_health.h), for the heartbeat.
  nlohmann::json output_summary() const { return output_health_.summary(); }
  // While the output is down: tries it with a small file of its own (output_health.h).
  void probe_output(int64_t now_ms) { output_health_.probe(session_dir_, now_ms); }
  nlohmann::json stream_summaries() const;

  // The render mode a record gets: ModeSelector's choice when this daemon can draw it,
  // else histogram (logged once per mode).
  std::string mode_for(const wire::RecordHeader& header);

 private:
  const DaemonConfig& config_;
  const std::string session_dir_;
  const FileFinished on_finished_;
  LivePublisher* const live_;
  OpenVideoLimit open_limit_;  // render-thread state, handed to every StreamVideo
  OutputHealth output_health_;  // written by the render thread, summarized by the heartbeat
  // A new stream's video, or null (counted) beyond the limit.
  std::shared_ptr<StreamVideo> add(const StreamKey& key, const std::string& kind, std::unique_ptr<FrameRenderer> renderer);

  ModeSelector selector_;
  std::set<std::string> unavailable_logged_;
  mutable std::mutex mutex_;  // guards streams_ against stream_summaries()
  std::map<StreamKey, std::shared_ptr<StreamVideo>> streams_;
  uint64_t dropped_over_limit_ = 0;
};

}  // namespace tensorscope::daemon
