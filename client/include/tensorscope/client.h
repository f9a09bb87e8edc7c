// client.h — tensorscope::Client, the in-process side of tensorscope.
//
// Used inside the training process. push() copies a tensor into this process's shared-
// memory ring for the daemon of the same session; it never blocks, never throws, and
// reports what happened. When no daemon runs, pushes are counted as not connected; a
// background thread connects when the daemon appears and survives it being killed and
// restarted. Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tensorscope/client_options.h"
#include "tensorscope/push_result.h"
#include "tensorscope/render_mode.h"
#include "tensorscope/track_handle.h"
#include "tensorscope/track_options.h"

namespace torch::nn {
class Module;
template <typename Contained>
class ModuleHolder;
}  // namespace torch::nn
namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace tensorscope {

class ClientImpl;

class Client {
 public:
  explicit Client(ClientOptions options = ClientOptions());
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Explicit tap: pushes `tensor` as stream `name`. noexcept, never blocks.
  PushResult push(const std::string& name, const at::Tensor& tensor) noexcept;
  // The same with a class label for each row of `tensor` (its first dimension): `labels`
  // is a 1-D integer tensor of that length (a CUDA one is copied to the host: counted in
  // stats() as a synchronous copy). pca and tsne frames colour the points by label.
  // A wrong count, dtype or shape refuses the push (counted, the reason logged).
  PushResult push(const std::string& name, const at::Tensor& tensor, const at::Tensor& labels) noexcept;

  // Tracks the forward output of every submodule of `module` that owns parameters or
  // buffers (Linear, Conv, BatchNorm, LayerNorm, GroupNorm, Embedding, LSTM/GRU,
  // MultiheadAttention, user modules holding a parameter, ...), as stream
  // "<name>.<qualified path>" ("<name>" for the root), "#<k>" appended to the k-th call
  // (k >= 1) of a module within one step. libtorch modules have no hooks: every ATen op
  // is observed (at::RecordFunction) and an op whose inputs hold a module's parameter or
  // buffer, besides an activation, is that module's; its result is the module's output,
  // in-place ops on it that use the module's parameters (a bias add) included. A
  // module holding only parameter-free children (Sequential, ...) has no stream of its
  // own. A module's output is sent once its call is over: at the first op of another
  // module, an in-place op on the output, the start of backward, set_step/next_step or
  // TrackHandle::flush(). Backward ops, optimizer updates and views of weights are never
  // taken for outputs. Works under NoGradGuard and InferenceMode, on any thread.
  TrackHandle track_model(const std::string& name, const torch::nn::Module& module,
                          TrackOptions options = TrackOptions());
  // The same for a TorchScript module (torch::jit::load).
  TrackHandle track_model(const std::string& name, const torch::jit::Module& module,
                          TrackOptions options = TrackOptions());
  template <typename M>
  TrackHandle track_model(const std::string& name, const torch::nn::ModuleHolder<M>& module,
                          TrackOptions options = TrackOptions()) {
    return track_model(name, static_cast<const torch::nn::Module&>(*module), std::move(options));
  }
  template <typename M>
  TrackHandle track_model(const std::string& name, const std::shared_ptr<M>& module,
                          TrackOptions options = TrackOptions()) {
    return track_model(name, static_cast<const torch::nn::Module&>(*module), std::move(options));
  }

  // Tracks the gradient at each module's output in backward ("<name>.<path>.grad"): the
  // total gradient that reaches the op which produced the output. Same module selection
  // and options as track_model (kinds defaults to TrackKinds::kOutputGradient).
  TrackHandle track_layer(const std::string& name, const torch::nn::Module& module,
                          TrackOptions options = TrackOptions());
  TrackHandle track_layer(const std::string& name, const torch::jit::Module& module,
                          TrackOptions options = TrackOptions());
  template <typename M>
  TrackHandle track_layer(const std::string& name, const torch::nn::ModuleHolder<M>& module,
                          TrackOptions options = TrackOptions()) {
    return track_layer(name, static_cast<const torch::nn::Module&>(*module), std::move(options));
  }
  template <typename M>
  TrackHandle track_layer(const std::string& name, const std::shared_ptr<M>& module,
                          TrackOptions options = TrackOptions()) {
    return track_layer(name, static_cast<const torch::nn::Module&>(*module), std::move(options));
  }

  // Sends the gradient of `tensor` (not its value) as stream `name` each time backward
  // computes it. `tensor` must require grad. The handle does not keep `tensor` alive.
  TrackHandle track_tensor(const std::string& name, const at::Tensor& tensor, TrackOptions options = TrackOptions());

  // Every stream the live handles of this client may send.
  std::vector<TrackedStream> tracked() const;

  // How the daemon should draw `stream` from its next push on (kDefault: the daemon's
  // choice). The daemon's per-stream config rules still take precedence.
  void set_render_mode(const std::string& stream, RenderMode mode);

  // Text shown on every frame from now on (at most 127 bytes are kept).
  void set_label(const std::string& text);
  // Checked by every push and hook at run time; disabled pushes count as gated.
  void set_enabled(bool enabled);
  bool enabled() const;

  // The training step stamped on every record. Changing it also ends the current module
  // calls of tracked models (their outputs are sent) and restarts call indices.
  void set_step(int64_t step);
  int64_t step() const;
  // Advances the step by one and returns the new value.
  int64_t next_step();

  ClientStats stats() const;
  bool connected() const;
  const ClientOptions& options() const;
  int rank() const;

 private:
  std::shared_ptr<ClientImpl> impl_;
};

}  // namespace tensorscope
