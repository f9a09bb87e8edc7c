#include "worker/stream_router.h"

#include <algorithm>

#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {

StreamRouter::StreamRouter(const DaemonConfig& config, std::string session_dir, FileFinished on_finished,
                           LivePublisher* live, size_t lanes)
    : config_(config),
      session_dir_(std::move(session_dir)),
      on_finished_(std::move(on_finished)),
      live_(live),
      lane_streams_(std::max<size_t>(lanes, 1), 0),
      output_health_("videos in " + session_dir_),
      selector_(config.render) {
  const size_t per_lane = static_cast<size_t>(config.limits.max_open_videos_per_worker) / lane_streams_.size();
  for (size_t i = 0; i < lane_streams_.size(); ++i) open_limits_.push_back(std::make_unique<OpenVideoLimit>(per_lane));
}

std::shared_ptr<StreamVideo> StreamRouter::add(const StreamKey& key, const std::string& kind,
                                               std::unique_ptr<FrameRenderer> renderer) {
  if (static_cast<int64_t>(streams_.size()) >= config_.limits.max_streams_per_worker) {
    if (dropped_over_limit_++ == 0) {
      TS_LOG_WARN(
          "stream limit of {} per worker reached (limits.max_streams_per_worker); records of "
          "further streams are not drawn (the producer counts them in stats().dropped_by_daemon)",
          config_.limits.max_streams_per_worker);
    }
    return nullptr;
  }
  const size_t lane =
      static_cast<size_t>(std::min_element(lane_streams_.begin(), lane_streams_.end()) - lane_streams_.begin());
  ++lane_streams_[lane];
  auto video = std::make_shared<StreamVideo>(key, kind, std::move(renderer), config_, session_dir_, on_finished_, lane,
                                             open_limits_[lane].get(), &output_health_, live_);
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_.emplace(key, std::move(video)).first->second;
}

StreamRouter::Routed StreamRouter::route(uint64_t producer_id, int64_t producer_pid, const RecordView& record) {
  const RenderMode mode = mode_for(record.header);
  StreamKey key{producer_id,          producer_pid,       record.header.name,
                record.header.device, record.header.rank, std::string(wire::render_mode_name(mode))};
  auto it = streams_.find(key);
  if (it != streams_.end()) return {it->second->prepare(record)};
  auto video = add(key, wire::tensor_kind_name(static_cast<wire::TensorKind>(record.header.kind)),
                   make_frame_renderer(mode, config_.render, config_.video.width, key.stream));
  if (!video) return {RenderJob{}, true};
  return {video->prepare(record)};
}

std::shared_ptr<StreamVideo> StreamRouter::video_for(const StreamKey& key, const std::string& kind) {
  auto it = streams_.find(key);
  return it != streams_.end() ? it->second : add(key, kind, nullptr);
}

std::vector<RenderJob> StreamRouter::finish_where(const std::function<bool(const StreamKey&)>& pick) {
  std::vector<std::vector<std::shared_ptr<StreamVideo>>> by_lane(lane_streams_.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (pick(it->first)) {
        const size_t lane = it->second->lane();
        --lane_streams_[lane];
        by_lane[lane].push_back(std::move(it->second));
        it = streams_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<RenderJob> jobs;
  for (size_t lane = 0; lane < by_lane.size(); ++lane) {
    if (by_lane[lane].empty()) continue;
    jobs.push_back({lane, [finishing = std::move(by_lane[lane])] {
                      for (const auto& video : finishing) video->finish();
                    }});
  }
  return jobs;
}

std::vector<RenderJob> StreamRouter::finish_producer(uint64_t producer_id) {
  return finish_where([producer_id](const StreamKey& key) { return key.producer_id == producer_id; });
}

std::vector<RenderJob> StreamRouter::finish_all() {
  return finish_where([](const StreamKey&) { return true; });
}

nlohmann::json StreamRouter::stream_summaries() const {
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, video] : streams_) {
    if (out.size() >= 2000) break;
    out.push_back({{"stream", key.stream},
                   {"device", key.device},
                   {"rank", key.rank},
                   {"mode", key.mode},
                   {"kind", video->kind()},
                   {"producer_id", key.producer_id},
                   {"frames", video->frames_total()},
                   {"last_step", video->last_step()}});
  }
  return out;
}

}  // namespace tensorscope::daemon
