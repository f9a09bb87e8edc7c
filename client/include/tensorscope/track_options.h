// track_options.h — TrackOptions: what Client::track_model / track_layer capture, with
// chained setters (`TrackOptions().include("conv").every_n(100)`), one per line of
// track_option_list.h, and TrackKinds.
//
// Used in the training process. Thread safety: a value type; the Client copies it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tensorscope/call_stacking.h"
#include "tensorscope/client_options.h"
#include "tensorscope/evaluation_calls.h"
#include "tensorscope/option_setter.h"
#include "tensorscope/render_mode.h"
#include "tensorscope/track_option_list.h"
#include "tensorscope/shared/cast_formats.h"

namespace tensorscope {

// What a track sends, as a bit set: TrackKinds::kOutput | TrackKinds::kParameter.
enum class TrackKinds : uint32_t {
  kDefault = 0,                  // the method's own kind: track_model kOutput, track_layer kOutputGradient
  kOutput = 1u << 0,             // each module's forward output        (stream "<name>.<path>")
  kOutputGradient = 1u << 1,     // the gradient at each module's output (stream "<name>.<path>.grad")
  kParameter = 1u << 2,          // each parameter's value, with the module's first call of a step
                                 //                                       (stream "<name>.<path>.<param>")
  kParameterGradient = 1u << 3,  // each parameter's gradient            (stream "<name>.<path>.<param>.grad")
};

constexpr TrackKinds operator|(TrackKinds a, TrackKinds b) {
  return static_cast<TrackKinds>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
constexpr bool has_kind(TrackKinds set, TrackKinds kind) {
  return (static_cast<uint32_t>(set) & static_cast<uint32_t>(kind)) != 0;
}

// The current batch's class labels, one per row (a 1-D integer tensor), for a track's
// `labels` option.
using LabelsFn = std::function<at::Tensor()>;

// One member per line of TENSORSCOPE_TRACK_OPTIONS (track_option_list.h, where each is
// explained): a chained setter and a getter.
#define TENSORSCOPE_TRACK_OPTION(Type, name, default_value, python_default) \
  TENSORSCOPE_OPTION_SETTER(TrackOptions, Type, name, default_value)

class TrackOptions {
  TENSORSCOPE_TRACK_OPTIONS(TENSORSCOPE_TRACK_OPTION)
};

#undef TENSORSCOPE_TRACK_OPTION

}  // namespace tensorscope
