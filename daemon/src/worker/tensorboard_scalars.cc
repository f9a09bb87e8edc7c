// tensorboard_scalars.cc — see tensorboard_scalars.h.
#include "worker/tensorboard_scalars.h"

#include <chrono>

#include "tensorscope/base/logging.h"
#include "tensorscope/recording/tensorboard_export.h"
#include "tensorscope/shared/output_dir.h"

namespace tensorscope::daemon {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TensorBoardScalars::TensorBoardScalars(std::string session_dir, const ExportConfig& config)
    : session_dir_(std::move(session_dir)) {
  if (!config.tensorboard) return;
  try {
    metrics_ = std::regex(config.tensorboard_metrics);
    streams_ = std::regex(config.tensorboard_streams);
    on_ = true;
  } catch (const std::regex_error& e) {  // (the config's validation refuses them first)
    TS_LOG_ERROR("export.tensorboard: a pattern is not a regular expression: {}", e.what());
  }
}

void TensorBoardScalars::write(uint64_t id, int rank, int64_t pid, int64_t step,
                               const std::vector<TensorSummary>& summaries) {
  if (!on_) return;
  File& f = files_[id];
  if (f.failed) return;
  const double now = wall_seconds();
  if (!f.events) {
    auto made = recording::TensorBoardEvents::create(
        session_dir_ + "/tensorboard/" + run_info_base_name(rank, static_cast<long>(pid)), now);
    if (!made) {
      f.failed = true;
      TS_LOG_ERROR("producer {}: no TensorBoard export: {}", id, made.message());
      return;
    }
    f.events.emplace(std::move(*made));
  }
  const auto scalars = recording::export_scalars(summaries, metrics_, streams_);
  if (scalars.empty()) return;
  if (Status st = f.events->append({recording::event_scalars(now, step, scalars)}); !st) {
    f.failed = true;  // a full disk: said once, this producer's export stops
    TS_LOG_ERROR("producer {}: TensorBoard export stopped: {}", id, st.message());
  }
}

}  // namespace tensorscope::daemon
