// record_sinks.h — a worker's recording sinks: what is kept of each stream besides its
// video (config `record`): the statistics table, .npy dumps and HDF5 files.
//
// Used by a worker process. The reader thread asks which sinks want a stream (regexes
// from the config, decided once per stream name) and hands the record over with
// record(): its payload is copied into a queue bounded by record.queue_bytes (beyond
// it, the record is dropped from the sinks and counted; the video is not affected).
// A sink thread writes the queue in order:
//   <session>/stats/rank<r>_pid<p>.csv             a line per tensor, written at once
//   <session>/dumps/step_<n>/<stream>_rank<r>.npy  one file per tensor, atomically
//   <session>/hdf5/rank<r>_pid<p>.<k>.h5          rotated, each file finalized by rename
//                                                  (tensorscope/recording/hdf5_sink.h); before its first
//                                                  HDF5 file the worker runs
//                                                  recover_stale_partials() on hdf5/ once:
//                                                  partials of dead writers become
//                                                  <k>.recovered.h5 or are removed; the
//                                                  producers' HDF5 sinks share one
//                                                  change-detection memory cap
//                                                  (record.hdf5_change_detection_bytes)
//   <session>/tree/rank<r>_pid<p>.log              module tree log (tensorscope/recording/tree_log.h): the
//                                                  kModuleTree records of the tracks whose
//                                                  names match record.tree, a block per step
// A write error is logged (once per file) and counted, never fatal. finish_producer()
// finalizes the producer's files after its queued records; the destructor writes what
// is queued and finalizes everything.
// Thread safety: wants(), record(), finish_producer() and counters() from the reader
// thread (counters() from any); the sink thread is internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/daemon_config.h"
#include "tensorscope/shared/ring_reader.h"

namespace tensorscope::recording {
class Hdf5ChangeBudget;  // tensorscope/recording/hdf5_sink.h
}  // namespace tensorscope::recording

namespace tensorscope::daemon {

class RecordSinks {
 public:
  enum Sink : uint8_t { kVideo = 1, kStats = 2, kNpy = 4, kHdf5 = 8, kTree = 16 };

  RecordSinks(const RecordConfig& config, std::string session_dir);
  ~RecordSinks();
  RecordSinks(const RecordSinks&) = delete;
  RecordSinks& operator=(const RecordSinks&) = delete;

  // The sinks (Sink bits) that take records of `stream` (for a kModuleTree record, the
  // track's name: only kTree counts).
  uint8_t wants(const std::string& stream);

  // Queues `view` (a valid record with its payload in host memory) of producer
  // `producer_id` (process `pid`) for the recording sinks in `sinks` (kVideo ignored).
  void record(uint64_t producer_id, int64_t pid, const RecordView& view, uint8_t sinks);

  // The producer detached: its files are finalized after its queued records.
  void finish_producer(uint64_t producer_id);

  // Queued, written, dropped (queue full) and failed records; files finished; HDF5:
  // values skipped as unchanged, values stored for want of a kept copy (the memory
  // cap), partial files recovered and removed.
  nlohmann::json counters() const;

 private:
  struct Job;
  struct ProducerFiles;

  void run();
  void write(Job& job);
  ProducerFiles& files_of(const Job& job);

  const RecordConfig config_;
  const std::string session_dir_;
  std::regex video_, stats_, npy_, hdf5_, tree_;
  std::unordered_map<std::string, uint8_t> selection_;  // reader thread

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Job>> queue_;
  uint64_t queued_bytes_ = 0;
  bool stop_ = false;
  std::map<uint64_t, std::unique_ptr<ProducerFiles>> files_;  // sink thread

  std::atomic<uint64_t> queued_{0}, written_{0}, dropped_{0}, failed_{0}, files_finished_{0};
  // HDF5 (sink thread): the shared change-detection budget, whether hdf5/ was cleaned.
  std::shared_ptr<recording::Hdf5ChangeBudget> hdf5_budget_;
  bool hdf5_recovery_done_ = false;
  std::atomic<uint64_t> hdf5_skipped_{0}, hdf5_over_cap_{0}, hdf5_recovered_{0}, hdf5_removed_{0};
  std::thread thread_;  // last: started once every other member exists
};

}  // namespace tensorscope::daemon
