#include "grad_hook.h"

#include <algorithm>

#include "client_impl.h"
#include "cost_meter.h"
#include "op_observer.h"

namespace tensorscope {

GradHook::GradHook(const at::Tensor& tensor, std::function<void(const at::Tensor&)> on_grad)
    : tensor_(tensor.getIntrusivePtr()) {
  index_ = tensor.register_hook([fn = std::move(on_grad)](const at::Tensor& grad) {
    const CostSpan span;
    fn(grad);
  });
}

GradHook::~GradHook() {
  auto impl = tensor_.lock();
  if (!impl) return;
  try {
    at::Tensor(std::move(impl)).remove_hook(index_);
  } catch (...) {
    // The tensor's autograd metadata is gone: so is the hook.
  }
}

int64_t track_every_n(const std::weak_ptr<ClientImpl>& client, const TrackOptions& options) {
  if (options.every_n() > 0) return options.every_n();
  auto c = client.lock();
  return c ? std::max<int64_t>(1, c->options_.every_n()) : 1;
}

double track_max_hz(const std::weak_ptr<ClientImpl>& client) {
  auto c = client.lock();
  return c ? c->options_.max_hz() : 0.0;
}

GradSender::GradSender(std::weak_ptr<ClientImpl> client, TrackOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      gate_(track_every_n(client_, options_), track_max_hz(client_)) {}

uint8_t GradSender::render_hint(ClientImpl& client, const std::string& stream) const {
  if (options_.render_mode() != RenderMode::kDefault) return static_cast<uint8_t>(options_.render_mode());
  return client.render_hint_for(stream);
}

void GradSender::send(const std::string& stream, const at::Tensor& grad, wire::TensorKind kind) {
  auto client = client_.lock();
  if (!client || !grad.defined()) return;
  if (!client->enabled() || !gate_.admit(stream).admitted) {
    client->count_gated();
    return;
  }
  ObserverPause pause;
  client->send(stream, grad, kind, render_hint(*client, stream), &options_.transform());
}

std::shared_ptr<Track> GradHookTrack::create(std::weak_ptr<ClientImpl> client, const std::string& name,
                                             const at::Tensor& tensor, TrackOptions options) {
  if (const std::string why = stream_name_refusal(name); !why.empty()) {
    return std::make_shared<FailedTrack>("track_tensor: " + why);
  }
  if (!tensor.defined()) return std::make_shared<FailedTrack>("track_tensor('" + name + "'): undefined tensor");
  if (!tensor.requires_grad()) {
    return std::make_shared<FailedTrack>("track_tensor('" + name +
                                         "'): the tensor does not require grad, so it never gets a gradient");
  }
  auto track = std::make_shared<GradHookTrack>(std::move(client), name, std::move(options));
  std::weak_ptr<GradHookTrack> weak = track;
  track->hook_ = std::make_unique<GradHook>(tensor, [weak](const at::Tensor& grad) {
    auto self = weak.lock();
    if (!self) return;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      if (self->stopped_) return;
    }
    self->sender_.send(self->name_, grad, wire::TensorKind::kGradient);
  });
  return track;
}

GradHookTrack::GradHookTrack(std::weak_ptr<ClientImpl> client, std::string name, TrackOptions options)
    : name_(std::move(name)), sender_(std::move(client), std::move(options)) {}

void GradHookTrack::stop() {
  std::unique_ptr<GradHook> hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    hook = std::move(hook_);
  }
}

std::vector<TrackedStream> GradHookTrack::streams() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return {};
  return {TrackedStream{name_, "gradient", ""}};
}

}  // namespace tensorscope
