#include "worker/worker.h"

#include "tensorscope/base/clock.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "tensorscope/shared/control_protocol.h"
#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {
namespace {

int64_t now_ms() { return steady_time_ms(); }

constexpr int kDrainBudget = 64;      // records per producer per round (fairness)
constexpr size_t kQueueCapacity = 8;  // reduced frames waiting, per render thread
constexpr int kMaxIdleSleepMs = 10;
constexpr int kKeepInTouchTickMs = 50;  // while waiting for the render thread

// render_threads, or when 0 one per CPU this process may run on, at most
// kMaxAutoRenderThreads (the worker's open videos are shared out among its threads:
// limits.max_open_videos_per_worker / threads each).
constexpr int kMaxAutoRenderThreads = 8;
size_t render_thread_count(int configured) {
  if (configured > 0) return static_cast<size_t>(configured);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(0, sizeof cpus, &cpus) != 0) return 1;
  return static_cast<size_t>(std::clamp(CPU_COUNT(&cpus), 1, kMaxAutoRenderThreads));
}

}  // namespace

Worker::Worker(int control_fd) : channel_(control_fd) {}

Worker::~Worker() {
  queue_.reset();  // joins the render thread before the router and videos go
  router_.reset();
  sinks_.reset();  // writes what is queued, finalizes the recording files
}

Status Worker::configure(const nlohmann::json& message) {
  auto config = daemon_config_from_json(message.value("config", nlohmann::json::object()));
  if (!config) return config.status();
  config_ = *config;
  session_dir_ = message.value("session_dir", "");
  index_ = message.value("worker_index", -1);
  if (session_dir_.empty()) return Status::error("no session_dir in worker config");
  (void)init_logging(std::string(choice_name(config_.log_level)), "worker-" + std::to_string(index_));
  live_ = LivePublisher::create(config_, index_);
  queue_ = std::make_unique<RenderQueue>(render_thread_count(config_.render_threads), kQueueCapacity);
  auto list_file = [this](const IndexEntry& e) { post({{control::kType, control::kFile}, {"entry", to_json(e)}}); };
  router_ = std::make_unique<StreamRouter>(config_, session_dir_, list_file, live_.get(), queue_->lanes());
  sinks_ = std::make_unique<RecordSinks>(config_.record, session_dir_);
  summaries_ = std::make_unique<SummaryIntake>(session_dir_, config_.anomalies, config_.reference,
                                               config_.record.summary_table_max_bytes);
  tensorboard_ = std::make_unique<TensorBoardScalars>(session_dir_, config_.export_);
  overview_ = std::make_unique<OverviewVideos>(config_, session_dir_, router_.get(), list_file);
  configured_ = true;
  return Status::ok();
}

void Worker::post(nlohmann::json message) {
  std::lock_guard<std::mutex> lock(outbox_mutex_);
  outbox_.push_back(std::move(message));
}

void Worker::flush_outbox() {
  std::vector<nlohmann::json> pending;
  {
    std::lock_guard<std::mutex> lock(outbox_mutex_);
    pending.swap(outbox_);
  }
  for (const auto& m : pending) {
    Status st = channel_.send(m);
    if (!st) TS_LOG_WARN("cannot report to the supervisor: {}", st.message());
  }
}

void Worker::send_heartbeat() {
  nlohmann::json stats = {{"records", records_},
                          {"invalid", invalid_},
                          {"render_errors", queue_ ? queue_->errors() : 0},
                          {"dropped_stream_limit", router_ ? router_->dropped_over_limit() : 0},
                          {"output", router_ ? router_->output_summary() : nlohmann::json::object()},
                          {"queue_depth", queue_ ? queue_->depth() : 0},
                          {"render_jobs", queue_ ? queue_->jobs_run() : std::vector<uint64_t>{}},  // per thread
                          {"live_frames", live_ ? live_->published() : 0},
                          {"recording", sinks_ ? sinks_->counters() : nlohmann::json::object()},
                          {"producers", producers_.size()},
                          {"reference", summaries_ ? summaries_->reference_status() : nlohmann::json::array()},
                          {"streams", router_ ? router_->stream_summaries() : nlohmann::json::array()}};
  (void)channel_.send({{control::kType, control::kHeartbeat}, {"stats", std::move(stats)}});
}

void Worker::keep_in_touch() {
  const int64_t now = now_ms();
  if (shed_at_ms_ > 0 && now >= shed_at_ms_ && queue_) {
    shed_at_ms_ = 0;  // once: what is pushed later is shed by the queue itself
    const size_t dropped = queue_->shed();
    TS_LOG_WARN("shutdown: the time to draw is up; {} queued frame(s) dropped, the videos are finalized", dropped);
  }
  if (router_) router_->probe_output(now);  // while the output is down, once a second
  if (configured_ && now >= next_heartbeat_ms_) {
    send_heartbeat();
    next_heartbeat_ms_ = now + config_.supervisor.heartbeat_interval.count();
  }
  flush_outbox();
}

void Worker::handle(const nlohmann::json& message, int fd) {
  const std::string type = control::message_type(message);
  if (type == control::kConfig) {
    Status st = configure(message);
    if (!st) {
      TS_LOG_ERROR("bad worker config: {}", st.message());
      stopping_ = true;
    }
  } else if (type == control::kAttach && configured_) {
    const uint64_t id = message.value(control::kProducerId, uint64_t{0});
    if (fd < 0) {
      TS_LOG_ERROR("attach of producer {} came without a segment descriptor", id);
      return;
    }
    auto segment = SharedSegment::open_descriptor(fd, "of producer " + std::to_string(id));
    ::close(fd);
    if (!segment) {
      TS_LOG_ERROR("cannot attach producer {}: {}", id, segment.message());
      post({{control::kType, control::kAttachFailed},
            {control::kProducerId, id},
            {control::kMessage, segment.message()}});
      return;
    }
    Attached attached;
    attached.segment = std::move(*segment);
    attached.reader =
        std::make_unique<RingReader>(attached.segment.get(), static_cast<uint64_t>(config_.limits.max_record_bytes));
    attached.segment->header()->consumer_state.store(wire::kConsumerAttached, std::memory_order_release);
    producers_[id] = std::move(attached);
    const std::string reference = message.value("reference", std::string());
    if (!reference.empty()) summaries_->set_reference(id, reference);
    TS_LOG_INFO("attached producer {} (pid {}, rank {})", id, producers_[id].segment->header()->producer_pid,
                producers_[id].segment->header()->rank);
  } else if (type == control::kDetach) {
    detach(message.value(control::kProducerId, uint64_t{0}));
  } else if (type == control::kShutdown) {
    stopping_ = true;
  } else {
    if (fd >= 0) ::close(fd);
    TS_LOG_WARN("ignoring control message of type '{}'", type);
  }
}

// How long a device payload may stay incomplete (the producer's GPU has not run the copy
// yet) before the record is dropped: a stalled or dead producer costs a drop, never a
// wedged ring.
constexpr int64_t kDevicePayloadDeadlineMs = 30000;

bool Worker::truncated(uint64_t id, Attached& p) {
  if (p.truncated) return true;
  if (!p.segment->truncated()) return false;
  p.truncated = true;
  TS_LOG_ERROR("producer {}: its segment {} was truncated under us; reading stopped, the producer is dropped", id,
               p.segment->path());
  // As for a segment that cannot be attached: the supervisor drops the producer, whose
  // client registers a fresh segment.
  post({{control::kType, control::kAttachFailed},
        {control::kProducerId, id},
        {control::kMessage, "segment truncated under the worker"}});
  return true;
}

int Worker::drain(uint64_t id, Attached& p, int budget) {
  int consumed = 0;
  RecordView view;
  while (consumed < budget) {
    if (truncated(id, p)) break;
    const RingReader::Result result = p.reader->next(&view);
    if (result == RingReader::Result::kEmpty) break;
    if (result == RingReader::Result::kPoisoned) {
      if (!p.poisoned_logged) {
        TS_LOG_ERROR("producer {}: segment corrupt, reading stopped: {}", id, p.reader->last_error());
      }
      p.poisoned_logged = true;
      ++invalid_;
      break;
    }
    ++consumed;
    if (result == RingReader::Result::kDropped) {
      ++invalid_;
      if (p.invalid_logged++ < 10) {
        TS_LOG_WARN("producer {}: dropped an invalid record: {}", id, p.reader->last_error());
      }
      continue;
    }
    if (result == RingReader::Result::kSkipped) continue;
    if ((view.header.flags & wire::kRecordDevicePayload) != 0) {
      std::string why;
      auto fetched = device_reader_.fetch(id, *p.segment, &view, std::chrono::milliseconds(0), &why);
      if (fetched == DevicePayloadReader::Result::kPending) {
        // The producer's GPU has not finished the copy: read the other producers and
        // come back (the record stays at the head of this ring).
        const int64_t now = now_ms();
        if (p.pending_position != view.position || p.pending_since_ms == 0) {
          p.pending_position = view.position;
          p.pending_since_ms = now;
        }
        if (now - p.pending_since_ms < kDevicePayloadDeadlineMs) {
          --consumed;
          break;
        }
        fetched = DevicePayloadReader::Result::kFailed;
        why =
            "the producer's GPU copy did not complete within " + std::to_string(kDevicePayloadDeadlineMs / 1000) + " s";
      }
      p.pending_since_ms = 0;
      if (fetched == DevicePayloadReader::Result::kFailed) {
        p.reader->drop(view, why);
        ++invalid_;
        if (p.invalid_logged++ < 10) {
          TS_LOG_WARN("producer {}: dropped device payload '{}': {}", id, view.header.name, why);
        }
        continue;
      }
    }
    if (view.header.kind == static_cast<uint8_t>(wire::TensorKind::kSummary)) {
      if (!take_summaries(id, p, view)) {
        p.reader->drop(view, "summary record refused");
        ++invalid_;
        continue;
      }
      // Its anomalies reach the supervisor before the record counts as read: a client that
      // waited until its records were read (wait_until_read) then finds them reported.
      keep_in_touch();
      p.reader->release(view);
      ++records_;
      continue;
    }
    RenderJob job;
    try {
      const uint8_t sinks = sinks_->wants(view.header.name);
      const int64_t pid = p.segment->header()->producer_pid;
      sinks_->record(id, pid, view, sinks);
      const bool module_tree = view.header.kind == static_cast<uint8_t>(wire::TensorKind::kModuleTree);
      if (!module_tree && (sinks & RecordSinks::kVideo) != 0) {
        StreamRouter::Routed routed = router_->route(id, pid, view);
        job = std::move(routed.job);
        if (routed.over_limit) {  // the producer sees it in stats()
          p.segment->header()->dropped_by_daemon.fetch_add(1, std::memory_order_relaxed);
        }
      }
    } catch (const std::exception& e) {
      TS_LOG_ERROR("producer {}: cannot reduce '{}': {}", id, view.header.name, e.what());
    }
    if (truncated(id, p)) {  // what this record read may be zeros: not drawn, not counted
      job = {};
      break;
    }
    p.reader->release(view);
    ++records_;
    if (job) {
      // Counted in the segment until drawn: if this process dies first, the supervisor
      // counts it lost. The job keeps the mapping (a detach may come before it runs).
      std::shared_ptr<SharedSegment> segment = p.segment;
      segment->header()->in_render.fetch_add(1, std::memory_order_relaxed);
      const size_t lane = job.lane;
      const bool frame = job.frame;
      queue_->push(
          {lane,
           [job = std::move(job.run), segment] {
             struct Drawn {
               SharedSegment* segment;
               ~Drawn() { segment->header()->in_render.fetch_sub(1, std::memory_order_relaxed); }
             } drawn{segment.get()};
             job();
           },
           frame},
          [this] { keep_in_touch(); }, kKeepInTouchTickMs);
    }
    keep_in_touch();
  }
  return consumed;
}

bool Worker::take_summaries(uint64_t id, Attached& p, const RecordView& view) {
  std::vector<Anomaly> anomalies;
  std::vector<TensorSummary> summaries;
  std::string why;
  const int64_t pid = p.segment->header()->producer_pid;
  bool taken = false;
  try {
    taken = summaries_->take(id, pid, view, &summaries, &anomalies, &why);
  } catch (const std::exception& e) {  // out of memory: the record is dropped, the worker lives on
    why = e.what();
  }
  if (!taken) {
    if (p.invalid_logged++ < 10) TS_LOG_WARN("producer {}: refused a summary record: {}", id, why);
    return false;
  }
  post_anomalies(anomalies);
  tensorboard_->write(id, view.header.rank, pid, view.header.step, summaries);
  for (auto& job : overview_->observe(id, pid, view.header.rank, view.header.step, view.header.timestamp_unix_ns,
                                      summaries, anomalies, now_ms())) {
    render_later(std::move(job));
  }
  return true;
}

void Worker::post_anomalies(const std::vector<Anomaly>& anomalies) {
  for (const Anomaly& a : anomalies) post({{control::kType, control::kAnomaly}, {"anomaly", a.to_json()}});
}

void Worker::render_later(RenderJob job) {
  queue_->push(
      std::move(job), [this] { keep_in_touch(); }, kKeepInTouchTickMs);
}

void Worker::render_after_all(std::function<void()> job) {
  queue_->push_after_all(
      std::move(job), [this] { keep_in_touch(); }, kKeepInTouchTickMs);
}

void Worker::detach(uint64_t id) {
  auto it = producers_.find(id);
  if (it == producers_.end()) {
    post({{control::kType, control::kDetached}, {control::kProducerId, id}});
    return;
  }
  while (drain(id, it->second, 1 << 30) > 0) {}
  // Each lane finalizes its videos of the producer after drawing their frames; the
  // supervisor hears "detached" once every lane has.
  for (RenderJob& finish : router_->finish_producer(id)) render_later(std::move(finish));
  auto pngs = overview_->finish_producer(id);
  sinks_->finish_producer(id);
  post_anomalies(summaries_->finish_producer(id));
  tensorboard_->finish_producer(id);
  producers_.erase(it);
  device_reader_.forget_producer(id);
  render_after_all([this, id, pngs] {
    if (pngs) pngs();
    post({{control::kType, control::kDetached}, {control::kProducerId, id}});
  });
  TS_LOG_INFO("detached producer {}", id);
}

void Worker::shutdown() {
  if (!configured_) return;
  // The supervisor kills a worker still running shutdown_timeout after it asked. Within
  // the first half: read what is in each ring (at most one lap: a producer that keeps
  // pushing must not keep us from exiting) and draw it; then what is left is not drawn
  // (frames queued are shed, records unread stay unread: both counted, said) so that every
  // video is finalized, with every frame drawn, in the half left.
  const int64_t start = now_ms(), timeout = config_.supervisor.shutdown_timeout.count();
  const int64_t read_until = start + timeout / 2;
  shed_at_ms_ = read_until;  // keep_in_touch sheds from then on, a push waiting for room too
  for (auto& [id, p] : producers_) {
    int budget = static_cast<int>(p.segment->slot_count());
    while (budget > 0 && now_ms() < read_until) {
      const int consumed = drain(id, p, std::min(budget, kDrainBudget));
      if (consumed == 0) break;
      budget -= consumed;
    }
    const wire::SegmentHeader* h = p.segment->header();
    const uint64_t unread = h->slot_head.load() - h->slot_tail.load();
    if (unread > 0) TS_LOG_WARN("producer {}: {} records left unread at shutdown", id, unread);
  }
  producers_.clear();
  for (RenderJob& finish : router_->finish_all()) render_later(std::move(finish));
  render_later({0, overview_->finish_all()});
  while (!queue_->drain_for(50)) keep_in_touch();  // report files as they are finalized
  sinks_.reset();                                  // writes what is queued, finalizes the recording files
  if (const uint64_t shed = queue_->shed_frames(); shed > 0) {
    TS_LOG_WARN(
        "shutdown: {} frame(s) not drawn within half of supervisor.shutdown_timeout_ms ({} ms; the backlog "
        "of a daemon behind); every frame drawn is in a finalized, listed video",
        shed, timeout / 2);
  }
  flush_outbox();
}

int Worker::run() {
  int idle_ms = 0;
  while (!stopping_) {
    pollfd p{channel_.fd(), POLLIN, 0};
    const int rc = ::poll(&p, 1, idle_ms);
    if (rc > 0) {
      Status st = channel_.read_available();
      nlohmann::json message;
      int fd = -1;
      while (channel_.pop(&message, &fd)) {
        try {
          handle(message, fd);
        } catch (const std::exception& e) {
          TS_LOG_ERROR("bad control message from the supervisor: {}", e.what());
        }
      }
      if (!st) {
        TS_LOG_WARN("supervisor channel {}: finalizing and exiting", st.message());
        stopping_ = true;
        break;
      }
    }
    int consumed = 0;
    if (configured_) {
      for (auto& [id, producer] : producers_) consumed += drain(id, producer, kDrainBudget);
      // Summaries that wait for a still-running reference: compared as it catches up.
      if (const int64_t now = now_ms(); now >= next_reference_poll_ms_) {
        next_reference_poll_ms_ = now + kReferencePollMs;
        try {
          post_anomalies(summaries_->poll());
        } catch (const std::exception& e) {  // out of memory: compared at the next poll
          TS_LOG_ERROR("comparing with the reference run: {}", e.what());
        }
      }
    }
    idle_ms = consumed > 0 ? 0 : std::min(kMaxIdleSleepMs, idle_ms * 2 + 1);
    keep_in_touch();
  }
  shutdown();
  (void)channel_.send({{control::kType, control::kBye}});
  return 0;
}

}  // namespace tensorscope::daemon
