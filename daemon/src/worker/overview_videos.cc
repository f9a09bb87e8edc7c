// overview_videos.cc — see overview_videos.h.
#include "worker/overview_videos.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "tensorscope/base/logging.h"
#include "tensorscope/plotting/image_encoding.h"
#include "tensorscope/plotting/overview.h"
#include "tensorscope/recording/summary_table.h"

namespace tensorscope::daemon {
namespace {

using recording::kOverviewMetrics;
using recording::OverviewGrid;

std::string where_text(int rank, int64_t pid) {
  return "rank " + std::to_string(rank) + " | pid " + std::to_string(pid);
}

// The grid without its newest column (still being filled by other tracks' records).
OverviewGrid settled(OverviewGrid g) {
  const size_t cols = g.columns();
  if (cols < 2) return g;
  std::vector<float> values;
  std::vector<uint8_t> nonfinite;
  values.reserve(g.rows.size() * (cols - 1));
  nonfinite.reserve(g.rows.size() * (cols - 1));
  for (size_t r = 0; r < g.rows.size(); ++r) {
    values.insert(values.end(), g.values.begin() + static_cast<std::ptrdiff_t>(r * cols),
                  g.values.begin() + static_cast<std::ptrdiff_t>(r * cols + cols - 1));
    nonfinite.insert(nonfinite.end(), g.nonfinite.begin() + static_cast<std::ptrdiff_t>(r * cols),
                     g.nonfinite.begin() + static_cast<std::ptrdiff_t>(r * cols + cols - 1));
  }
  g.values = std::move(values);
  g.nonfinite = std::move(nonfinite);
  g.first_steps.pop_back();
  g.last_steps.pop_back();
  return g;
}

}  // namespace

OverviewVideos::OverviewVideos(const DaemonConfig& config, std::string session_dir, StreamRouter* router,
                               FileFinished on_finished)
    : config_(config), session_dir_(std::move(session_dir)), router_(router), on_finished_(std::move(on_finished)) {}

std::vector<RenderJob> OverviewVideos::observe(uint64_t producer_id, int64_t pid, int rank, int64_t step,
                                               uint64_t push_unix_ns, const std::vector<TensorSummary>& summaries,
                                               const std::vector<Anomaly>& anomalies, int64_t now_ms) {
  std::vector<RenderJob> jobs;
  if (config_.overview.frame_every <= 0) return jobs;
  auto [at, first] = producers_.try_emplace(producer_id, pid, rank, config_.overview);
  Producer& p = at->second;
  if (first) read_back(p, step);
  for (const Anomaly& a : anomalies) {
    if (a.type == "non_finite" || p.marks.size() >= kMaxMarks) continue;  // (the grid shows the first NaN/Inf)
    p.marks.push_back({a.type == "dead_units" ? "dead units" : a.type, a.stream, a.step});
  }
  if (!p.history.observe(step, summaries)) return jobs;
  const int64_t seen = p.history.steps_seen();
  if (seen - p.frame_steps < config_.overview.frame_every || seen < 2 ||
      now_ms - p.frame_ms < config_.overview.min_frame_interval.count()) {
    return jobs;
  }
  p.frame_steps = seen;
  p.frame_ms = now_ms;
  const std::string where = where_text(rank, pid);
  for (size_t m = 0; m < kOverviewMetrics.size(); ++m) {
    if (!p.history.has_rows(m)) continue;
    OverviewGrid grid = settled(p.history.window(m));
    const int64_t frame_step = grid.last_steps.empty() ? step : grid.last_steps.back();
    auto video = router_->video_for(StreamKey{producer_id, pid, recording::kOverviewStream, recording::kOverviewDevice,
                                              rank, kOverviewMetrics[m].name},
                                    recording::kOverviewKind);
    if (!video) continue;
    const std::string span = "last " + std::to_string(config_.overview.window_steps) + " summarised steps";
    jobs.push_back(video->frame_job(
        [grid = std::move(grid), where, span, marks = p.marks](const plotting::FrameStyle& style, FrameNotes*) {
          return plotting::draw_overview_frame(grid, where, span, style, marks);
        },
        frame_step, push_unix_ns));
  }
  return jobs;
}

void OverviewVideos::read_back(Producer& p, int64_t before_step) {
  // Its table holds what an earlier daemon (or worker) was sent: a restart or a worker that
  // took over the producer draws the whole run, not only the steps after it.
  const std::string path = recording::summary_table_path(session_dir_, p.rank, p.pid);
  int64_t rows = 0;
  auto read = recording::read_summary_table(path, kReadBackBytes, [&](const recording::SummaryTableRow& row) {
    if (row.step >= before_step || row.rank != p.rank) return;
    p.history.observe(row.step, {row.summary}, row.steps);
    ++rows;
  });
  if (read && rows > 0) {
    TS_LOG_INFO("rank {} pid {}: the overview starts from {} summaries read back from {}", p.rank, p.pid, rows, path);
  }
}

std::function<void()> OverviewVideos::png_job(const Producer& p) const {
  struct Png {
    std::string name;
    OverviewGrid grid;
  };
  std::vector<Png> pngs;
  for (size_t m = 0; m < kOverviewMetrics.size(); ++m) {
    if (p.history.has_rows(m)) pngs.push_back({recording::overview_png_name(p.rank, p.pid, m), p.history.whole_run(m)});
  }
  if (pngs.empty()) return {};
  plotting::FrameStyle style = frame_style(config_);
  style.width = std::max(style.width, 1280);
  return [pngs = std::move(pngs), style, dir = session_dir_, where = where_text(p.rank, p.pid), rank = p.rank,
          pid = p.pid, marks = p.marks, on_finished = on_finished_]() mutable {
    for (const Png& png : pngs) {
      // Tall enough for a readable label per row, up to 4096 pixels.
      style.height = std::clamp(static_cast<int>(png.grid.rows.size()) * 16 + 260, 720, 4096);
      const cv::Mat image = plotting::draw_overview_frame(png.grid, where, "whole run", style, marks);
      const std::string path = dir + "/" + png.name;
      const std::string temp = dir + "/.png-tmp-" + std::to_string(::getpid()) + "-" + png.name;
      const StatusOr<std::string> encoded = plotting::encode_png(image);
      bool ok = encoded.is_ok();
      if (!ok) TS_LOG_ERROR("overview {}: cannot encode the PNG: {}", png.name, encoded.message());
      if (ok) {
        const std::string& bytes = *encoded;
        std::FILE* f = std::fopen(temp.c_str(), "wb");
        ok = f != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
        if (f != nullptr) ok = std::fclose(f) == 0 && ok;
        ok = ok && std::rename(temp.c_str(), path.c_str()) == 0;
        if (!ok) {
          TS_LOG_ERROR("overview {}: cannot write {}", png.name, path);
          std::remove(temp.c_str());
        }
      }
      if (!ok || png.grid.first_steps.empty()) continue;
      IndexEntry entry;
      entry.path = png.name;
      entry.stream = recording::kOverviewStream;
      entry.kind = recording::kOverviewKind;
      entry.device = recording::kOverviewDevice;
      entry.rank = rank;
      entry.pid = pid;
      entry.mode = kOverviewMetrics[png.grid.metric].name;
      entry.frames = 1;
      entry.first_step = png.grid.first_steps.front();
      entry.last_step = png.grid.last_steps.back();
      on_finished(entry);
    }
  };
}

std::function<void()> OverviewVideos::finish_producer(uint64_t producer_id) {
  auto it = producers_.find(producer_id);
  if (it == producers_.end()) return {};
  std::function<void()> job = png_job(it->second);
  producers_.erase(it);
  return job;
}

std::function<void()> OverviewVideos::finish_all() {
  std::vector<std::function<void()>> jobs;
  for (const auto& [id, p] : producers_) {
    if (auto job = png_job(p)) jobs.push_back(std::move(job));
  }
  producers_.clear();
  return [jobs = std::move(jobs)] {
    for (const auto& job : jobs) job();
  };
}

}  // namespace tensorscope::daemon
