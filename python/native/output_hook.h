// output_hook.h — tensorscope._native.OutputHooks: the forward hooks a Python track puts
// on its modules' outputs, in C for the call every sent or summarised step makes most: the
// first call of a module in the step, with one plain CPU tensor as its output. That call
// costs no Python frame of its own: the module's tree log entry is closed, the call
// counted, the output admitted (max_hz), read where it is once (its dtype, shape, strides
// and data_ptr(): no DLPack export, no detach()), sent and summarised, and a gradient hook of the same kind put on it, which takes the gradient the
// same way in the backward pass. A summary is handed to the track for its bookkeeping (the
// one call back into Python). Every other call goes to the hook's fallback, the track's
// Python hook (_tracks.py), unchanged; a gradient the gradient hook cannot take goes to the
// track's grad_fallback.
//
//   OutputHooks(tensor_type, strided, dtype_samples, inert_hook[, cast_format[, parameter_type]])
//     tensor_type  torch.Tensor: only a value of exactly this type is taken here
//     strided      torch.strided
//     dtype_samples {dtype: a DLPack capsule of a CPU tensor of it} of the dtypes sent as
//                  they are (not bool, sent as uint8 by Python): the capsule says the
//                  dtype's wire dtype, as it would for a push
//     inert_hook   inert_hook() -> what a hook becomes in a copy or pickle
//     cast_format  the summaries' cast format (shared/cast_formats.h's value; 0: none)
//     parameter_type torch.nn.Parameter: summarize() reads these too, or None
//   hook(stream, fallback) -> a forward hook (module, inputs, output) for stream `stream`
//                  (its gradients: stream + ".grad"); fallback(module, inputs, output)
//                  takes every call not taken here
//   on(core, calls, tree, step, hint, outputs, gradients, send, summarised, grad_fallback[, training])
//                  from now on, first calls are taken here when they can be: core the
//                  Core (held weakly: a Client dropped without close() still frees and
//                  closes it); calls the track's dict stream -> calls in this step (a
//                  stream in it is not a first call); tree a TreeLog or None; step an int
//                  or None
//                  (the client's step); hint the track's render hint or 0; outputs,
//                  gradients: whether the outputs, the gradients at them are taken; send:
//                  whether the step sends whole tensors; summarised None or
//                  summarised(stream, tensor, summary, kind, step), the track's
//                  bookkeeping of a value's summary (summaries.h's summarize() of it);
//                  grad_fallback(stream, step, send, summarise, grad) for a gradient not
//                  taken here (None when gradients is false); training None or
//                  (model, torch.is_grad_enabled): a call with model.training false or
//                  gradients off (an evaluation forward, py_args.h) is left out, the
//                  fallback not called. None of the callables may raise.
//   off()          every call goes to the fallbacks (the track decides per step)
//   stop()         off(), and the gradient hooks still to run do nothing (a removed track)
//   summarize(tensor[, previous])
//                  the summary (summaries.h's summarize(), with the update ratio last) of
//                  a plain CPU tensor or parameter read the same way, with no operation
//                  dispatched; with `previous` (a PreviousValues) the update ratio against
//                  it, the tensor's values then kept in it; None for any other tensor
//   gather(batch, tensor[, before[, stream]])
//                  adds a plain, C-contiguous tensor or parameter on the CPU or a CUDA
//                  device (read the same way) to SummaryBatch `batch` on `stream` (a
//                  cudaStream_t as an int), with `before` (the track's copy of the same
//                  parameter's previous value on its device, which the pass then
//                  overwrites with the tensor's values) for the update ratio: its ticket;
//                  None for any other tensor
//
// The hooks never raise into the model's forward or backward and always return None (the
// value as it is): a tensor that cannot be read is a counted refusal of its stream.
// Thread safety: the GIL is held throughout, but released around a large copy.
#pragma once

#include <Python.h>

#include "client_core.h"

namespace tensorscope::python {

// Adds OutputHooks to `module`; `core_of` gives the ClientCore of a Core (null when
// closed or not a Core). False with an error set.
bool add_output_hooks(PyObject* module, ClientCore* (*core_of)(PyObject*));

}  // namespace tensorscope::python
