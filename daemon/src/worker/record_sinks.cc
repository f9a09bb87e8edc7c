#include "worker/record_sinks.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "tensorscope/recording/file_naming.h"
#include "tensorscope/recording/hdf5_sink.h"
#include "tensorscope/recording/npy_file.h"
#include "tensorscope/recording/stats_table.h"
#include "tensorscope/recording/tree_log.h"
#include "tensorscope/base/logging.h"

namespace tensorscope::daemon {
namespace {

constexpr size_t kMaxCachedStreams = 1 << 16;  // stream names remembered with their sinks
constexpr auto kPollInterval = std::chrono::milliseconds(500);

std::regex compile(const std::string& pattern) {
  // Validated with the config; "" matches nothing.
  return pattern.empty() ? std::regex("$^") : std::regex(pattern, std::regex::ECMAScript);
}

bool is_module_tree(const RecordView& view) {
  return view.header.kind == static_cast<uint8_t>(wire::TensorKind::kModuleTree);
}

// Creates `dir` and its parents with mode 0755 (as the video directory); false on error.
bool make_dirs(const std::string& dir, std::string* why) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) *why = "cannot create " + dir + ": " + ec.message();
  return !ec;
}

// A tensor's row labels beside its .npy dump (file_naming.h's npy_labels_path).
Status write_labels(const std::string& path, const RowLabels& labels) {
  const int64_t rows = static_cast<int64_t>(labels.values.size());
  Status st = recording::write_npy(path, wire::DType::kInt64, {rows}, labels.values.data(),
                                   labels.values.size() * sizeof(int64_t));
  if (!st || labels.names.empty()) return st;
  std::string names;
  for (const std::string& name : labels.names) names += name + "\n";
  const std::string text_path = path.substr(0, path.size() - 4) + ".txt";
  std::ofstream out(text_path, std::ios::binary | std::ios::trunc);
  out << names;
  out.close();
  return out ? Status::ok() : Status::error(text_path + ": cannot write the label names");
}

}  // namespace

struct RecordSinks::Job {
  uint64_t producer = 0;
  int64_t pid = 0;
  uint8_t sinks = 0;
  bool finish = false;  // finalize the producer's files (no record)
  recording::StatsRowMeta meta;
  std::vector<uint8_t> payload;
  std::shared_ptr<const RowLabels> row_labels;  // the .npy sink writes them beside the tensor
};

struct RecordSinks::ProducerFiles {
  std::unique_ptr<recording::StatsTableWriter> stats;
  std::unique_ptr<recording::Hdf5Sink> hdf5;
  std::unique_ptr<recording::TreeLogWriter> tree;
  bool stats_failed = false;  // logged once; no more attempts for this producer
  bool hdf5_failed = false;
  bool tree_failed = false;
  std::set<std::string> logged;  // error messages already logged
};

RecordSinks::RecordSinks(const RecordConfig& config, std::string session_dir)
    : config_(config),
      session_dir_(std::move(session_dir)),
      video_(compile(config.video)),
      stats_(compile(config.stats)),
      npy_(compile(config.npy)),
      hdf5_(compile(config.hdf5)),
      tree_(compile(config.tree)),
      thread_([this] { run(); }) {}

RecordSinks::~RecordSinks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint8_t RecordSinks::wants(const std::string& stream) {
  const auto it = selection_.find(stream);
  if (it != selection_.end()) return it->second;
  uint8_t sinks = 0;
  if (std::regex_search(stream, video_)) sinks |= kVideo;
  if (std::regex_search(stream, stats_)) sinks |= kStats;
  if (std::regex_search(stream, npy_)) sinks |= kNpy;
  if (std::regex_search(stream, hdf5_)) sinks |= kHdf5;
  if (std::regex_search(stream, tree_)) sinks |= kTree;
  if (selection_.size() < kMaxCachedStreams) selection_.emplace(stream, sinks);
  return sinks;
}

void RecordSinks::record(uint64_t producer_id, int64_t pid, const RecordView& view, uint8_t sinks) {
  // A module tree record goes to the tree log only; tensors never do.
  sinks &= is_module_tree(view) ? static_cast<uint8_t>(kTree) : static_cast<uint8_t>(kStats | kNpy | kHdf5);
  if (sinks == 0 || view.payload == nullptr) return;
  const wire::RecordHeader& h = view.header;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued_bytes_ + h.payload_bytes > static_cast<uint64_t>(config_.queue_bytes)) {
      if (dropped_.fetch_add(1, std::memory_order_relaxed) % 1000 == 0) {
        TS_LOG_WARN("recording sinks are behind ({} bytes queued): records dropped from them", queued_bytes_);
      }
      return;
    }
    queued_bytes_ += h.payload_bytes;
  }
  auto job = std::make_unique<Job>();
  job->producer = producer_id;
  job->pid = pid;
  job->sinks = sinks;
  job->meta.step = h.step;
  job->meta.stream = h.name;
  job->meta.kind = wire::tensor_kind_name(static_cast<wire::TensorKind>(h.kind));
  job->meta.rank = h.rank;
  job->meta.device = h.device;
  job->meta.dtype = static_cast<wire::DType>(h.dtype);
  job->meta.shape.assign(h.shape, h.shape + h.ndim);
  job->payload.assign(view.payload, view.payload + h.payload_bytes);
  job->row_labels = view.row_labels;
  queued_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void RecordSinks::finish_producer(uint64_t producer_id) {
  auto job = std::make_unique<Job>();
  job->producer = producer_id;
  job->finish = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

nlohmann::json RecordSinks::counters() const {
  return {{"queued", queued_.load()},
          {"written", written_.load()},
          {"dropped_queue_full", dropped_.load()},
          {"failed", failed_.load()},
          {"files_finished", files_finished_.load()},
          {"hdf5_skipped_unchanged", hdf5_skipped_.load()},
          {"hdf5_stored_over_cap", hdf5_over_cap_.load()},
          {"hdf5_partials_recovered", hdf5_recovered_.load()},
          {"hdf5_partials_removed", hdf5_removed_.load()}};
}

void RecordSinks::run() {
  for (;;) {
    std::unique_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, kPollInterval, [this] { return stop_ || !queue_.empty(); });
      if (!queue_.empty()) {
        job = std::move(queue_.front());
        queue_.pop_front();
      } else if (stop_) {
        break;
      }
    }
    if (job) {
      write(*job);
      std::lock_guard<std::mutex> lock(mutex_);
      queued_bytes_ -= job->payload.size();
    }
    for (auto& [id, files] : files_) {  // HDF5 rotation by time
      if (files->hdf5) {
        Status st = files->hdf5->poll();
        if (!st) TS_LOG_WARN("HDF5 rotation or flush: {}", st.message());
      }
    }
  }
  for (auto& [id, files] : files_) {
    if (files->hdf5) {
      Status st = files->hdf5->finalize();
      if (!st) TS_LOG_WARN("HDF5 finalize: {}", st.message());
      files_finished_.fetch_add(files->hdf5->finished_files().size(), std::memory_order_relaxed);
    }
  }
  files_.clear();
}

RecordSinks::ProducerFiles& RecordSinks::files_of(const Job& job) {
  auto& slot = files_[job.producer];
  if (!slot) slot = std::make_unique<ProducerFiles>();
  return *slot;
}

void RecordSinks::write(Job& job) {
  if (job.finish) {
    const auto it = files_.find(job.producer);
    if (it == files_.end()) return;
    if (it->second->hdf5) {
      Status st = it->second->hdf5->finalize();
      if (!st) TS_LOG_WARN("HDF5 finalize: {}", st.message());
      files_finished_.fetch_add(it->second->hdf5->finished_files().size(), std::memory_order_relaxed);
    }
    files_.erase(it);
    return;
  }
  ProducerFiles& files = files_of(job);
  const std::string owner = "rank" + std::to_string(job.meta.rank) + "_pid" + std::to_string(job.pid);
  bool ok = true;
  auto fail = [&](const std::string& message) {
    ok = false;
    if (files.logged.size() < 32 && files.logged.insert(message).second) {
      TS_LOG_WARN("recording '{}': {}", job.meta.stream, message);
    }
  };
  const uint64_t numel =
      job.meta.dtype == wire::DType::kInvalid ? 0 : job.payload.size() / wire::dtype_size(job.meta.dtype);

  if ((job.sinks & kTree) != 0 && !files.tree_failed) {
    if (!files.tree) {
      auto opened = recording::TreeLogWriter::open(session_dir_ + "/tree/" + owner + ".log");
      if (opened) {
        files.tree = std::move(*opened);
      } else {
        files.tree_failed = true;
        fail(opened.message());
      }
    }
    if (files.tree) {
      Status st =
          files.tree->append(job.meta.stream, job.meta.step,
                             std::string_view(reinterpret_cast<const char*>(job.payload.data()), job.payload.size()));
      if (!st) fail(st.message());
    }
  }

  if ((job.sinks & kStats) != 0 && !files.stats_failed) {
    if (!files.stats) {
      std::string why;
      const std::string dir = session_dir_ + "/stats";
      auto opened = make_dirs(dir, &why) ? recording::StatsTableWriter::open(dir + "/" + owner + ".csv")
                                         : StatusOr<recording::StatsTableWriter>(Status::error(why));
      if (opened) {
        files.stats = std::make_unique<recording::StatsTableWriter>(std::move(*opened));
      } else {
        files.stats_failed = true;
        fail(opened.message());
      }
    }
    if (files.stats) {
      Status st =
          files.stats->append(job.meta, recording::compute_stats_row(job.meta.dtype, job.payload.data(), numel));
      if (!st) fail(st.message());
    }
  }

  if ((job.sinks & kNpy) != 0) {
    std::string why;
    const std::string path =
        session_dir_ + "/" + recording::npy_dump_path(job.meta.stream, job.meta.step, job.meta.rank);
    if (make_dirs(path.substr(0, path.rfind('/')), &why)) {
      Status st = recording::write_npy(path, job.meta.dtype, job.meta.shape, job.payload.data(), job.payload.size());
      if (!st) fail(st.message());
      if (st && job.row_labels) {
        st =
            write_labels(session_dir_ + "/" + recording::npy_labels_path(job.meta.stream, job.meta.step, job.meta.rank),
                         *job.row_labels);
        if (!st) fail(st.message());
      }
    } else {
      fail(why);
    }
  }

  if ((job.sinks & kHdf5) != 0 && !files.hdf5_failed) {
    if (!files.hdf5) {
      std::string why;
      const std::string dir = session_dir_ + "/hdf5";
      recording::Hdf5SinkOptions options;
      options.dtype = std::string(choice_name(config_.hdf5_dtype));
      options.gzip_level = config_.hdf5_gzip;
      options.change_detection = config_.hdf5_change_detection;
      options.rotate_bytes = static_cast<uint64_t>(config_.hdf5_rotate_bytes);
      options.rotate_seconds = static_cast<int>(config_.hdf5_rotate_interval.count());
      options.flush_seconds = static_cast<int>(config_.hdf5_flush_interval.count());
      if (!hdf5_budget_) {
        hdf5_budget_ = std::make_shared<recording::Hdf5ChangeBudget>(
            static_cast<uint64_t>(std::max<int64_t>(config_.hdf5_change_detection_bytes, 0)));
      }
      options.change_budget = hdf5_budget_;
      if (!hdf5_recovery_done_) {  // once: partials of dead writers (tensorscope/recording/hdf5_sink.h)
        hdf5_recovery_done_ = true;
        auto recovery = recording::recover_stale_partials(dir);
        if (recovery) {
          hdf5_recovered_.fetch_add(recovery->recovered.size(), std::memory_order_relaxed);
          hdf5_removed_.fetch_add(recovery->removed.size(), std::memory_order_relaxed);
        } else {
          TS_LOG_WARN("HDF5 recovery: {}", recovery.message());
        }
      }
      auto opened = make_dirs(dir, &why) ? recording::Hdf5Sink::open(dir, owner, options)
                                         : StatusOr<std::unique_ptr<recording::Hdf5Sink>>(Status::error(why));
      if (opened) {
        files.hdf5 = std::move(*opened);
      } else {
        files.hdf5_failed = true;
        fail(opened.message());
      }
    }
    if (files.hdf5) {
      recording::Hdf5Record r;
      r.stream = job.meta.stream;
      r.kind = job.meta.kind;
      r.device = job.meta.device;
      r.rank = job.meta.rank;
      r.step = job.meta.step;
      r.dtype = job.meta.dtype;
      r.shape = job.meta.shape;
      r.data = job.payload.data();
      r.bytes = job.payload.size();
      const uint64_t skipped = files.hdf5->skipped_unchanged();
      const uint64_t over_cap = files.hdf5->stored_over_cap();
      Status st = files.hdf5->append(r);
      if (!st) fail(st.message());
      hdf5_skipped_.fetch_add(files.hdf5->skipped_unchanged() - skipped, std::memory_order_relaxed);
      hdf5_over_cap_.fetch_add(files.hdf5->stored_over_cap() - over_cap, std::memory_order_relaxed);
    }
  }
  (ok ? written_ : failed_).fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tensorscope::daemon
