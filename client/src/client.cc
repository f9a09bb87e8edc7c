#include "tensorscope/client.h"

#include <torch/nn/module.h>
#include <torch/script.h>

#include "client_impl.h"
#include "cost_meter.h"
#include "grad_hook.h"
#include "module_index.h"
#include "module_track.h"
#include "track.h"
#include "tensorscope/base/logging.h"
#include "tensorscope/base/text_input.h"

namespace tensorscope {

const char* to_string(RenderMode mode) {
  if (mode == RenderMode::kDefault) return "default";
  return wire::render_mode_name(mode).data();  // names are literals: NUL-terminated
}

namespace {

TrackHandle make_handle(std::shared_ptr<Track> track, ClientImpl& client) {
  if (!track->ok()) {
    TS_LOG_ERROR("tensorscope: {}", track->error());
  } else {
    client.add_track(track);
  }
  return TrackHandle(std::move(track));
}

TrackKinds kinds_or(const TrackOptions& options, TrackKinds fallback) {
  return options.kinds() == TrackKinds::kDefault ? fallback : options.kinds();
}

// Setting up a track never throws into the training program: a failure gives an inert
// handle that says why.
template <typename Build>
TrackHandle guarded(ClientImpl& client, const std::string& what, Build&& build) {
  try {
    return make_handle(build(), client);
  } catch (const std::exception& e) {
    return make_handle(std::make_shared<FailedTrack>(what + ": " + e.what()), client);
  } catch (...) {
    return make_handle(std::make_shared<FailedTrack>(what + ": unknown exception"), client);
  }
}

}  // namespace

Client::Client(ClientOptions options) : impl_(std::make_shared<ClientImpl>(std::move(options))) {}
Client::~Client() { impl_->stop_tracks(); }

PushResult Client::push(const std::string& name, const at::Tensor& tensor) noexcept {
  const CostSpan span;
  try {
    return impl_->push(name, tensor);
  } catch (...) {
    impl_->count_refused(name, "push failed");
    return PushResult::kRefused;
  }
}

PushResult Client::push(const std::string& name, const at::Tensor& tensor, const at::Tensor& labels) noexcept {
  const CostSpan span;
  try {
    if (!labels.defined()) {
      impl_->count_refused(name, "labels: an undefined tensor");
      return PushResult::kRefused;
    }
    return impl_->push(name, tensor, labels);
  } catch (...) {
    impl_->count_refused(name, "push failed");
    return PushResult::kRefused;
  }
}

TrackHandle Client::track_model(const std::string& name, const torch::nn::Module& module, TrackOptions options) {
  return guarded(*impl_, "track_model(" + quote_for_message(name, 32) + ")", [&] {
    const TrackKinds kinds = kinds_or(options, TrackKinds::kOutput);
    return ModuleTrack::create(impl_, name, index_modules(module), std::move(options), kinds);
  });
}

TrackHandle Client::track_model(const std::string& name, const torch::jit::Module& module, TrackOptions options) {
  return guarded(*impl_, "track_model(" + quote_for_message(name, 32) + ")", [&] {
    const TrackKinds kinds = kinds_or(options, TrackKinds::kOutput);
    return ModuleTrack::create(impl_, name, index_modules(module), std::move(options), kinds);
  });
}

TrackHandle Client::track_layer(const std::string& name, const torch::nn::Module& module, TrackOptions options) {
  return guarded(*impl_, "track_layer(" + quote_for_message(name, 32) + ")", [&] {
    const TrackKinds kinds = kinds_or(options, TrackKinds::kOutputGradient);
    return ModuleTrack::create(impl_, name, index_modules(module), std::move(options), kinds);
  });
}

TrackHandle Client::track_layer(const std::string& name, const torch::jit::Module& module, TrackOptions options) {
  return guarded(*impl_, "track_layer(" + quote_for_message(name, 32) + ")", [&] {
    const TrackKinds kinds = kinds_or(options, TrackKinds::kOutputGradient);
    return ModuleTrack::create(impl_, name, index_modules(module), std::move(options), kinds);
  });
}

TrackHandle Client::track_tensor(const std::string& name, const at::Tensor& tensor, TrackOptions options) {
  return guarded(*impl_, "track_tensor(" + quote_for_message(name, 32) + ")",
                 [&] { return GradHookTrack::create(impl_, name, tensor, std::move(options)); });
}

std::vector<TrackedStream> Client::tracked() const { return impl_->tracked(); }

void Client::set_render_mode(const std::string& stream, RenderMode mode) {
  auto value = static_cast<uint8_t>(mode);
  if (value > wire::kMaxRenderHint) {
    TS_LOG_WARN("tensorscope client: unknown render mode {} for {}; using the default", value,
                quote_for_message(stream, 120));
    value = 0;
  }
  impl_->core().set_render_hint(stream, value);
}

void Client::set_label(const std::string& text) { impl_->core().set_label(text); }
void Client::set_enabled(bool enabled) { impl_->core().set_enabled(enabled); }
bool Client::enabled() const { return impl_->enabled(); }

void Client::set_step(int64_t step) {
  // Calls of the ending step are sent with its number.
  impl_->end_module_calls(step != impl_->step() ? std::optional<int64_t>(step) : std::nullopt);
  impl_->core().set_step(step);
}
int64_t Client::step() const { return impl_->step(); }
int64_t Client::next_step() {
  const CostSpan span;
  impl_->end_module_calls(impl_->step() + 1);
  return impl_->core().next_step();
}

ClientStats Client::stats() const { return impl_->core().stats(); }
bool Client::connected() const { return impl_->core().connected(); }
const ClientOptions& Client::options() const { return impl_->options_; }
int Client::rank() const { return impl_->core().rank(); }

}  // namespace tensorscope
