// track_options.h — TrackOptions: what Client::track_model / track_layer capture, with
// chained setters (`TrackOptions().include("conv").every_n(100)`), and TrackKinds.
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

#define TENSORSCOPE_TRACK_OPTION(Type, name, default_value) \
  TENSORSCOPE_OPTION_SETTER(TrackOptions, Type, name, default_value)

class TrackOptions {
  // ECMAScript regex searched in each module's qualified path (as named_modules() gives
  // it, "" for the root): only matching modules are tracked. "" tracks every module.
  TENSORSCOPE_TRACK_OPTION(std::string, include, "")
  // Modules whose qualified path matches this regex are not tracked. "" excludes none.
  TENSORSCOPE_TRACK_OPTION(std::string, exclude, "")
  // Send steps 0, n, 2n, ... of the client (Client::set_step / next_step) whole; 0 = the
  // client's every_n. Every module call of a sent step is sent; on the other steps the op
  // observer is not even installed, so they cost nothing. For track_tensor and parameter
  // gradients: every n-th call of each stream.
  TENSORSCOPE_TRACK_OPTION(int64_t, every_n, 0)
  // module tracks: every this many steps (0: never) each tracked tensor is also summarised
  // where it lives (numel, L2 norm, max |x|, mean, std, NaN/Inf counts, zeros; parameters
  // their update ratio), one small record per step, for the daemon's summary table and
  // anomaly reports. On a GPU without a host synchronisation.
  TENSORSCOPE_TRACK_OPTION(int64_t, stats_every, 1)
  // module tracks: each summary also measures the low-precision numerics against this
  // format (tensorscope/shared/cast_formats.h: kBf16, kFp16, kFp8E4m3, kFp8E5m2): the
  // dynamic range (log2 of max |x| over the smallest non-zero |x|) and how many values a
  // cast to the format would turn to zero (underflow) or to Inf/NaN (overflow). kNone
  // (the default) measures none: on a GPU they cost a few more reductions per tensor.
  TENSORSCOPE_TRACK_OPTION(CastFormat, cast_format, CastFormat::kNone)
  // Applied to each tensor before it is copied (e.g. reduce to per-channel std); replaces
  // the client's transform for this track. Empty = the client's transform.
  TENSORSCOPE_TRACK_OPTION(TransformFn, transform, nullptr)
  // How the daemon should draw this track's streams (kDefault: the daemon's choice).
  TENSORSCOPE_TRACK_OPTION(RenderMode, render_mode, RenderMode::kDefault)
  // What to send; kDefault = the method's own kind.
  TENSORSCOPE_TRACK_OPTION(TrackKinds, kinds, TrackKinds::kDefault)
  // track_model (kinds with kOutput): on each sent step, also send the step's module calls in
  // order, with their input and output shapes, dtypes and devices (one small record
  // per step, named after the track); the daemon writes them to its tree log
  // (config `record.tree`). The step's list is sent when the step changes
  // (Client::set_step / next_step) or the track stops.
  TENSORSCOPE_TRACK_OPTION(bool, tree_log, true)
  // module tracks: a module called many times a step keeps its first calls as streams of
  // their own and stacks the step's calls into one calls x features matrix
  // ("<stream>#calls"; tensorscope/call_stacking.h).
  TENSORSCOPE_TRACK_OPTION(CallStacking, calls, CallStacking::kAuto)
  // module tracks: forwards run with gradients off (NoGradGuard, InferenceMode: an
  // evaluation between steps) are not tracked (kSkip), so they never take a training
  // forward's place in the step; kTrack tracks them as calls of the step
  // (tensorscope/evaluation_calls.h).
  TENSORSCOPE_TRACK_OPTION(EvaluationCalls, evaluation, EvaluationCalls::kSkip)
  // module tracks: returns the current batch's class labels (e.g. `[&] { return target; }`);
  // each output or output gradient whose first dimension is the batch's size is sent with
  // them (Client::push with labels), so pca and tsne frames colour its rows by class.
  // Called once per tensor sent; one that throws or returns no 1-D integer tensor sends
  // the tensor without labels. Empty: no labels.
  TENSORSCOPE_TRACK_OPTION(LabelsFn, labels, nullptr)
};

#undef TENSORSCOPE_TRACK_OPTION

}  // namespace tensorscope
