// tensorboard_events.h — TensorBoard event files, written without TensorFlow or protobuf:
// what the daemon exports when `export.tensorboard` is on (the chosen summary metrics of
// every tracked tensor as scalars, every anomaly as text with a link to the live page),
// so that findings show in the dashboard a team already runs (`tensorboard --logdir
// <session>/tensorboard`).
//
// The format TensorBoard reads: a file named events.out.tfevents.<unix s>.<host>.<pid>
// (one per run directory and writer) of TFRecords — a little-endian uint64 length, the
// masked CRC-32C of those 8 bytes, the record, the masked CRC-32C of the record — each
// record an `Event` protocol buffer (tensorflow/core/util/event.proto): wall_time (1,
// double), step (2, int64), file_version (3, "brain.Event:2", the first record) or
// summary (5: repeated Value value = 1; a Value's tag = 1, simple_value = 2 (float), or
// metadata = 9 (plugin "text") with tensor = 8 (a DT_STRING scalar: dtype 1 = 7,
// string_val 8)). Encoded by hand here: the few fields above, nothing else.
//
// Each append() is one write() of whole records, so a reader (TensorBoard polls the
// files) never sees half a record but at a crash. Thread safety: one owner.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorscope/base/posix_file.h"
#include "tensorscope/base/status.h"

namespace tensorscope::recording {

// CRC-32C (Castagnoli) of `data`, and TFRecord's mask of it.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

// One TFRecord: length, its masked CRC, `record`, its masked CRC.
std::string tfrecord(std::string_view record);

// The Event records (protocol buffer bytes, not framed).
std::string event_file_version(double wall_time);
std::string event_scalars(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
std::string event_text(double wall_time, int64_t step, const std::string& tag, const std::string& markdown);

class TensorBoardEvents {
 public:
  // A new event file in `run_dir` (made with its parents), its first record written.
  static StatusOr<TensorBoardEvents> create(const std::string& run_dir, double wall_time);

  // The Event records, framed, in one write.
  Status append(const std::vector<std::string>& events);
  const std::string& path() const { return path_; }

 private:
  TensorBoardEvents(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

}  // namespace tensorscope::recording
