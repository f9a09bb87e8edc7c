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

#include <ATen/core/Tensor.h>

#include "tensorscope/client_options.h"
#include "tensorscope/push_result.h"
#include "tensorscope/render_mode.h"

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

  // How the daemon should draw `stream` from its next push on (kDefault: the daemon's
  // choice). The daemon's per-stream config rules still take precedence.
  void set_render_mode(const std::string& stream, RenderMode mode);

  // Text shown on every frame from now on (at most 127 bytes are kept).
  void set_label(const std::string& text);
  // Checked by every push and hook at run time; disabled pushes count as gated.
  void set_enabled(bool enabled);
  bool enabled() const;

  // The training step stamped on every record.
  void set_step(int64_t step);
  int64_t step() const;
  // Advances the step by one and returns the new value.
  int64_t next_step();

  ClientStats stats() const;
  bool connected() const;
  const ClientOptions& options() const;
  int rank() const;

 private:
  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace tensorscope
