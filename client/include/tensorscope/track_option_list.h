// track_option_list.h — every option of a module track (Client::track_model /
// track_layer), once: X(Type, name, C++ default, Python default), the Python default as
// the literal of its keyword in track_model (`None`: the C++ default's meaning, spelt the
// Python way). TENSORSCOPE_PYTHON_TRACK_OPTIONS lists the keywords only the Python package
// has, with why: X(name, Python default).
//
// Everything else derives from these lists: TrackOptions' setters and getters
// (track_options.h), the extension's TRACK_OPTIONS {name: Python default}, which a test
// compares with track_model's and track_layer's keywords, and the keywords _client.py
// hands on to its tracks. A new option: a line here, its keyword in _client.py, and where
// it acts: the client core's track policy (client/core/track_policy.h) when it is
// bookkeeping, else the two front ends (docs/changing.md, "A track option").
// Thread safety: macros only.
#pragma once

// clang-format off
#define TENSORSCOPE_TRACK_OPTIONS(X)                                                                          \
  /* ECMAScript regex searched in each module's qualified path (as named_modules() gives it, "" for the     \
     root): only matching modules are tracked. "" tracks every module. */                                   \
  X(std::string, include, "", "None")                                                                          \
  /* Modules whose qualified path matches this regex are not tracked. "" excludes none. */                  \
  X(std::string, exclude, "", "None")                                                                          \
  /* Send steps 0, n, 2n, ... of the client (Client::set_step / next_step) whole; 0 = the client's every_n.  \
     Every module call of a sent step is sent; on the other steps the op observer is not even installed,     \
     so they cost nothing. For track_tensor and parameter gradients: every n-th call of each stream. */      \
  X(int64_t, every_n, 0, "None")                                                                               \
  /* What to send; kDefault = the method's own kind. The Python tracks also take "buffer" and "input" (a     \
     forward pre-hook sees what a module receives; the C++ tracks, which see ops, take neither). */          \
  X(TrackKinds, kinds, TrackKinds::kDefault, "None")                                                          \
  /* Applied to each tensor before it is copied (e.g. reduce to per-channel std); replaces the client's      \
     transform for this track. Empty = the client's transform. */                                             \
  X(TransformFn, transform, nullptr, "None")                                                                  \
  /* How the daemon should draw this track's streams (kDefault: the daemon's choice). */                     \
  X(RenderMode, render_mode, RenderMode::kDefault, "None")                                                    \
  /* track_model (kinds with kOutput): on each sent step, also send the step's module calls in order, with   \
     their input and output shapes, dtypes and devices (one small record per step, named after the track);  \
     the daemon writes them to its tree log (config `record.tree`). The step's list is sent when the step    \
     changes (Client::set_step / next_step) or the track stops. */                                           \
  X(bool, tree_log, true, "True")                                                                              \
  /* Every this many steps (0: never) each tracked tensor is also summarized where it lives (numel, L2       \
     norm, max |x|, mean, std, NaN/Inf counts, zeros; parameters their update ratio), one small record per   \
     step, for the daemon's summary table and anomaly reports. On a GPU without a host synchronization. */   \
  X(int64_t, stats_every, 1, "1")                                                                              \
  /* A module called many times a step keeps its first calls as streams of their own and stacks the step's  \
     calls into one calls x features matrix ("<stream>#calls"; tensorscope/call_stacking.h). */              \
  X(CallStacking, calls, CallStacking::kAuto, "'auto'")                                                        \
  /* Returns the current batch's class labels (e.g. `[&] { return target; }`); each output or output         \
     gradient whose first dimension is the batch's size is sent with them (Client::push with labels), so     \
     pca and tsne frames color its rows by class. Called once per tensor sent; one that throws or returns no \
     1-D integer tensor sends the tensor without labels. Empty: no labels. */                                \
  X(LabelsFn, labels, nullptr, "None")                                                                         \
  /* Forwards run with gradients off (NoGradGuard, InferenceMode: an evaluation between steps) are not       \
     tracked (kSkip), so they never take a training forward's place in the step; kTrack tracks them as calls \
     of the step (tensorscope/evaluation_calls.h). */                                                         \
  X(EvaluationCalls, evaluation, EvaluationCalls::kSkip, "'skip'")                                             \
  /* Each summary also measures the low-precision numerics against this format                               \
     (tensorscope/shared/cast_formats.h: kBf16, kFp16, kFp8E4m3, kFp8E5m2): the dynamic range (log2 of max   \
     |x| over the smallest non-zero |x|) and how many values a cast to the format would turn to zero         \
     (underflow) or to Inf/NaN (overflow). kNone (the default) measures none: on a GPU they cost a few more  \
     reductions per tensor. */                                                                                \
  X(CastFormat, cast_format, CastFormat::kNone, "None")

#define TENSORSCOPE_PYTHON_TRACK_OPTIONS(X)                                                                   \
  /* Python modules without parameters of their own (the root, Sequential, ReLU) run forward hooks too, so  \
     they can be tracked; libtorch's are seen only through the ops that touch their own tensors. */         \
  X(containers, "False")                                                                                       \
  /* tree_log="values" compares the values a forward computes with those of the first step's (rtol, atol);  \
     libtorch has no Python-level call of a module to compare at. */                                         \
  X(tree_log_tolerance, "(1e-05, 1e-08)")
// clang-format on
