// overview_videos.h — the overview of each producer (one rank's training process): its
// summaries (recording/overview_history.h) drawn as a video per metric while training
// and, when the producer ends, a PNG of its whole run per metric, both listed in
// index.json (stream "overview", device "all", kind "summary", mode = the metric).
//
// Used by a worker: observe() and finish_producer() on the reader thread, which own the
// histories; the jobs they return run on the render threads (the drawing works on copies
// of the grids). A frame is due when overview.frame_every more steps were summarised and
// overview.min_frame_interval_ms passed; it shows the last overview.window_steps steps
// without the newest, which other tracks may still be filling. A PNG that cannot be
// written is logged; the videos go on. A producer's history starts from its summary table
// on disk (at most its last kReadBackBytes): after a restart of the daemon, or a worker
// that took the producer over, the whole run is drawn, not only the steps after it. The
// explosions and dead units the producer's summaries showed are framed and named on its
// frames and PNGs (the first NaN/Inf is found in the grid itself).
// Thread safety: as above.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/daemon_config.h"
#include "tensorscope/plotting/overview.h"
#include "tensorscope/recording/overview_history.h"
#include "worker/anomaly_detector.h"
#include "worker/stream_router.h"

namespace tensorscope::daemon {

class OverviewVideos {
 public:
  // `router` makes and finishes the videos; `on_finished` lists the PNGs.
  OverviewVideos(const DaemonConfig& config, std::string session_dir, StreamRouter* router, FileFinished on_finished);

  // The summaries of one record and the anomalies found in them; the render jobs of the
  // frames now due (often none).
  std::vector<RenderJob> observe(uint64_t producer_id, int64_t pid, int rank, int64_t step, uint64_t push_unix_ns,
                                 const std::vector<TensorSummary>& summaries, const std::vector<Anomaly>& anomalies,
                                 int64_t now_ms);
  // A job that writes the producer's PNGs (its videos end with StreamRouter::finish_producer);
  // empty when it summarised nothing.
  std::function<void()> finish_producer(uint64_t producer_id);
  std::function<void()> finish_all();

 private:
  struct Producer {
    Producer(int64_t pid_, int rank_, const OverviewConfig& c) : pid(pid_), rank(rank_), history(c.window_steps + 1) {}
    int64_t pid;
    int rank;
    recording::OverviewHistory history;
    int64_t frame_steps = 0;  // history.steps_seen() at the last frame
    int64_t frame_ms = INT64_MIN / 2;
    std::vector<plotting::OverviewMark> marks;  // the first kMaxMarks explosions and dead units
  };

  static constexpr size_t kMaxMarks = 8;

  static constexpr uint64_t kReadBackBytes = 64ull << 20;

  // The steps before `before_step` of the producer's summary table into its history.
  void read_back(Producer& p, int64_t before_step);
  std::function<void()> png_job(const Producer& p) const;

  const DaemonConfig& config_;
  const std::string session_dir_;
  StreamRouter* const router_;
  const FileFinished on_finished_;
  std::map<uint64_t, Producer> producers_;
};

}  // namespace tensorscope::daemon
