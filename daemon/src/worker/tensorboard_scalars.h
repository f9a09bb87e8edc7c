// tensorboard_scalars.h — a worker's summary records as TensorBoard scalars
// (`export.tensorboard`): an event file per producer in <session>/tensorboard/
// rank<r>_pid<p>/ (a TensorBoard run per training process), the chosen metrics of the
// chosen streams at each record's step (recording/tensorboard_export.h).
//
// Used by the worker's reader thread after the summary intake took a record. A file that
// cannot be created or written is said once per producer and that producer's export
// stops; the table and the videos go on. Thread safety: one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "config/daemon_config.h"
#include "tensorscope/recording/tensorboard_events.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::daemon {

class TensorBoardScalars {
 public:
  // Off unless config.tensorboard (or when its patterns are not regular expressions).
  TensorBoardScalars(std::string session_dir, const ExportConfig& config);

  // The scalars of one summary record of producer `id` (rank, pid), at `step`.
  void write(uint64_t id, int rank, int64_t pid, int64_t step, const std::vector<TensorSummary>& summaries);
  void finish_producer(uint64_t id) { files_.erase(id); }
  bool on() const { return on_; }

 private:
  struct File {
    std::optional<recording::TensorBoardEvents> events;
    bool failed = false;
  };
  const std::string session_dir_;
  bool on_ = false;
  std::regex metrics_, streams_;
  std::map<uint64_t, File> files_;
};

}  // namespace tensorscope::daemon
