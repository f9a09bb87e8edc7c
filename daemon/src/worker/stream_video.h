// stream_video.h — one stream's video: (producer, stream, device, rank, mode) -> files.
//
// Used inside a worker process. prepare() runs on the reader thread, straight on the
// payload in shared memory: its FrameRenderer (one per render mode) keeps only what the
// frame needs, so the ring slot can be released at once. The job it returns runs on the
// stream's render thread (its lane, render_queue.h): draws the frame, appends it to the
// open video (temporary hidden name), and after video.max_frames frames finalizes the file
// (rename to its final name) and reports it for index.json.
// Thread safety: prepare() on the reader thread only; jobs, finish() and suspend() on the
// stream's lane only; frames_total() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tensorscope/recording/separation_table.h"
#include "worker/frame_renderer.h"
#include "worker/live_publisher.h"
#include "supervisor/index_writer.h"
#include "worker/open_video_limit.h"
#include "worker/render_queue.h"
#include "output_health.h"
#include "video_journal.h"
#include "tensorscope/plotting/video_writer.h"
#include "config/daemon_config.h"
#include "tensorscope/shared/ring_reader.h"

namespace tensorscope::daemon {

struct StreamKey {
  uint64_t producer_id = 0;
  int64_t producer_pid = 0;  // the same for every key of one producer_id
  std::string stream;
  std::string device;
  int rank = 0;
  std::string mode;
  auto operator<=>(const StreamKey&) const = default;
};

using FileFinished = std::function<void(const IndexEntry&)>;

// Size and colours of frames under `config` (video.width/height, style.*).
plotting::FrameStyle frame_style(const DaemonConfig& config);

class StreamVideo : public std::enable_shared_from_this<StreamVideo> {
 public:
  // The stream's jobs run on render lane `lane`; `open_limit` (that lane's), `health` and
  // `live` (shared by the worker's streams) may be null.
  StreamVideo(StreamKey key, std::string kind, std::unique_ptr<FrameRenderer> renderer, const DaemonConfig& config,
              std::string session_dir, FileFinished on_finished, size_t lane, OpenVideoLimit* open_limit,
              OutputHealth* health = nullptr, LivePublisher* live = nullptr);
  ~StreamVideo();

  // Reader thread: reduces the record; the returned job renders it.
  RenderJob prepare(const RecordView& record);
  // A job that draws `draw` as the frame of `step` (a stream whose frames are not drawn
  // from one record, e.g. the overview; its renderer may be null).
  RenderJob frame_job(DrawFrame draw, int64_t step, uint64_t push_unix_ns);

  // On its lane: finalizes the open file, if any.
  void finish();
  // On its lane: closes the encoder and the file of the open segment, which the next
  // frame continues (OpenVideoLimit, when too many videos are open).
  void suspend();

  const StreamKey& key() const { return key_; }
  const std::string& kind() const { return kind_; }
  size_t lane() const { return lane_; }
  uint64_t frames_total() const { return frames_total_.load(std::memory_order_relaxed); }
  int64_t last_step() const { return last_step_seen_.load(std::memory_order_relaxed); }

 private:
  void render(const DrawFrame& draw, int64_t step, uint64_t push_unix_ns);
  bool open_segment(std::string* error, int* err);
  // A write to the output failed with `err`: counted by the worker's OutputHealth
  // (rate-limited log) when it is the file system's doing; otherwise thrown.
  void output_failed(int err, const std::string& what);
  IndexEntry entry_meta() const;  // the key's fields of this stream's index entries
  // A frame coloured by class: its row of the stream's separation table.
  void record_separation(int64_t step, const FrameNotes& notes);

  const StreamKey key_;
  const std::string kind_;
  const DaemonConfig& config_;
  const plotting::FrameStyle style_;  // frame_style(config_), made once: colours parsed once per stream
  const std::string session_dir_;
  const FileFinished on_finished_;
  const size_t lane_;
  OpenVideoLimit* const open_limit_;
  OutputHealth* const health_;
  LivePublisher* const live_;

  // Reader thread state (the renderer's prepare() side included).
  std::unique_ptr<FrameRenderer> renderer_;
  std::atomic<int64_t> last_step_seen_{0};

  // Render thread state.
  std::unique_ptr<plotting::VideoWriter> writer_;
  std::string final_name_;
  int segment_ = 0;
  int64_t first_step_ = 0, last_step_ = 0;
  bool open_failed_logged_ = false;
  VideoJournal journal_;  // the open segment's frame steps
  bool journal_failed_logged_ = false;
  std::optional<recording::SeparationTableWriter> separation_;  // frames coloured by class: their separation
  bool separation_failed_ = false;                              // logged once; not tried again
  std::atomic<uint64_t> frames_total_{0};
  int64_t live_last_ns_ = 0;  // when the live view last got a frame of this stream
};

}  // namespace tensorscope::daemon
