// client_options.h — ClientOptions: how a tensorscope::Client behaves, with chained
// setters in the style of libtorch's options (`ClientOptions().session("s").every_n(10)`);
// the options themselves are listed once, in client_option_list.h.
//
// Used in the training process. Thread safety: a value type; the Client copies it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "tensorscope/client_option_list.h"
#include "tensorscope/option_setter.h"

namespace tensorscope {

// Applied to a tensor before it is copied (e.g. reduce to per-channel std). Receives the
// stream name. An exception or an undefined result refuses the push (counted).
using TransformFn = std::function<at::Tensor(const std::string& stream, const at::Tensor&)>;

// Every option of tensorscope/client_option_list.h (with its meaning, default and bounds:
// a value out of bounds makes a client that refuses every push and says why in
// stats().connection_note), and the transform.
class ClientOptions {
#define TENSORSCOPE_CLIENT_OPTION(Type, name, default_value, rule) \
  TENSORSCOPE_OPTION_SETTER(ClientOptions, Type, name, default_value)
  TENSORSCOPE_CLIENT_OPTIONS(TENSORSCOPE_CLIENT_OPTION)
#undef TENSORSCOPE_CLIENT_OPTION
  // Applied to every tensor before copying; empty = none.
  TENSORSCOPE_OPTION_SETTER(ClientOptions, TransformFn, transform, nullptr)
};

}  // namespace tensorscope
