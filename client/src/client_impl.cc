#include "client_impl.h"

#include <algorithm>

#include <ATen/core/grad_mode.h>

#include "op_observer.h"
#include "tensor_staging.h"
#include "track.h"
#include "tensorscope/base/logging.h"

namespace tensorscope {

CoreOptions core_options(const ClientOptions& options) {
  CoreOptions core;
#define TENSORSCOPE_COPY_OPTION(Type, name, default_value, rule) core.name = options.name();
  TENSORSCOPE_CLIENT_OPTIONS(TENSORSCOPE_COPY_OPTION)
#undef TENSORSCOPE_COPY_OPTION
  core.framework_versions = {{"libtorch", libtorch_version()}};
  return core;
}

ClientImpl::ClientImpl(ClientOptions options) : options_(std::move(options)), core_(core_options(options_)) {}

PushResult ClientImpl::push(const std::string& name, const at::Tensor& tensor, const at::Tensor& labels) {
  const StreamGate::Admission admission = core_.admit(name);
  if (!admission.admitted) return PushResult::kGated;
  return stage(name, tensor, wire::TensorKind::kTensor, admission.render_hint, options_.transform(), labels);
}

namespace {

// The row labels of a 1-D integer tensor, or why not (a CUDA tensor is copied to the
// host: counted as a synchronous copy by the caller).
std::string row_labels_from_tensor(const at::Tensor& labels, RowLabels* out) {
  if (labels.dim() != 1)
    return "labels must be a 1-D tensor (one label per row), not " + std::to_string(labels.dim()) + "-D";
  if (!at::isIntegralType(labels.scalar_type(), /*includeBool=*/false)) {
    return std::string("labels must be an integer tensor, not ") + c10::toString(labels.scalar_type());
  }
  const at::Tensor host = labels.to(at::kCPU, at::kLong).contiguous();
  const int64_t* values = host.data_ptr<int64_t>();
  out->values.assign(values, values + host.numel());
  return {};
}

}  // namespace

PushResult ClientImpl::send(const std::string& name, const at::Tensor& tensor, wire::TensorKind kind,
                            uint8_t render_hint, const TransformFn* transform, const at::Tensor& labels) noexcept {
  try {
    if (!core_.pace(name).admitted) return PushResult::kGated;  // the daemon is behind: no copy
  } catch (...) {
    return core_.refuse(name, "pacing failed");
  }
  const TransformFn& chosen = transform != nullptr && *transform ? *transform : options_.transform();
  return stage(name, tensor, kind, render_hint, chosen, labels);
}

PushResult ClientImpl::stage(const std::string& name, const at::Tensor& input, wire::TensorKind kind,
                             uint8_t render_hint, const TransformFn& transform, const at::Tensor& labels) noexcept {
  const PushResult early = core_.ready();
  if (early != PushResult::kPushed) return early;
  std::string refusal;
  try {
    ObserverPause pause;  // our own ops (transform, contiguous, copies) are not the model's
    at::NoGradGuard no_grad;
    at::Tensor tensor = input;
    if (transform) {
      try {
        tensor = transform(name, input);
        if (!tensor.defined()) refusal = "transform returned an undefined tensor";
      } catch (const std::exception& e) {
        refusal = std::string("transform threw: ") + e.what();
      } catch (...) {
        refusal = "transform threw";
      }
    }
    if (refusal.empty()) refusal = staging_refusal(tensor);
    RowLabels row_labels;
    if (refusal.empty() && labels.defined()) {
      if (labels.is_cuda()) core_.count_sync_copy("row labels on a CUDA device are copied to the host");
      refusal = row_labels_from_tensor(labels, &row_labels);
    }
    if (refusal.empty()) {
      const StagedTensor staged(tensor);
      return core_.send(name, staged.ref(), kind, render_hint, std::nullopt, labels.defined() ? &row_labels : nullptr);
    }
  } catch (const std::exception& e) {
    refusal = std::string("copy failed: ") + e.what();
  } catch (...) {
    refusal = "copy failed: unknown exception";
  }
  return core_.refuse(name, refusal);
}

void ClientImpl::add_track(const std::shared_ptr<Track>& track) {
  std::lock_guard<std::mutex> lock(tracks_mutex_);
  tracks_.erase(
      std::remove_if(tracks_.begin(), tracks_.end(), [](const std::weak_ptr<Track>& t) { return t.expired(); }),
      tracks_.end());
  tracks_.push_back(track);
}

std::vector<std::shared_ptr<Track>> ClientImpl::live_tracks() const {
  std::vector<std::shared_ptr<Track>> live;
  std::lock_guard<std::mutex> lock(tracks_mutex_);
  for (const auto& weak : tracks_) {
    if (auto track = weak.lock()) live.push_back(std::move(track));
  }
  return live;
}

// Both run in the training loop (set_step, next_step) or a destructor: nothing may
// escape. A track that fails here is logged and left as it is.
void ClientImpl::end_module_calls(std::optional<int64_t> next) noexcept {
  try {
    for (const auto& track : live_tracks()) {
      try {
        track->end_calls();
        if (next) track->step_changed(*next);
      } catch (const std::exception& e) {
        TS_LOG_ERROR("tensorscope: ending a track's module calls failed: {}", e.what());
      }
    }
  } catch (...) {}
}

void ClientImpl::stop_tracks() noexcept {
  try {
    for (const auto& track : live_tracks()) {
      try {
        track->stop();
      } catch (const std::exception& e) {
        TS_LOG_ERROR("tensorscope: stopping a track failed: {}", e.what());
      }
    }
  } catch (...) {}
}

std::vector<TrackedStream> ClientImpl::tracked() const {
  std::vector<TrackedStream> out;
  for (const auto& track : live_tracks()) {
    for (auto& s : track->streams()) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tensorscope
