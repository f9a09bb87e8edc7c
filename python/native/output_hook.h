// output_hook.h — tensorscope._native.OutputHooks: the forward hooks a Python track puts
// on its modules' outputs, in C for the call every sent step makes most: the first call of
// a module in the step, with one plain CPU tensor as its output, sent as it is. That call
// costs no Python frame of its own: the module's tree log entry is closed, the call
// counted, the stream admitted (max_hz), the tensor exported through DLPack and sent, all
// here (a summary, when the step takes one, is computed here too and handed to the track:
// the one call back into Python). Every
// other call goes to the hook's fallback, the track's Python hook (_tracks.py), unchanged.
//
//   OutputHooks(tensor_type, strided, dtypes, to_dlpack, detach, inert_hook)
//     tensor_type  torch.Tensor: only an output of exactly this type is sent here
//     strided      torch.strided
//     dtypes       the dtypes sent as they are (a set; not bool, sent as uint8 by Python)
//     to_dlpack    torch.utils.dlpack.to_dlpack
//     detach       whether to_dlpack needs a detached tensor (it refuses one that
//                  requires grad in some torch versions)
//     inert_hook   inert_hook() -> what a hook becomes in a copy or pickle of the model
//   hook(stream, fallback) -> a forward hook (module, inputs, output) for stream `stream`;
//                  fallback(module, inputs, output) takes every call not sent here
//   on(core, calls, tree, step, hint, send, summarise)   from now on, first calls are
//                  taken here when they can be: core the Core; calls the track's dict
//                  stream -> calls in this step (a stream in it is not a first call); tree
//                  a TreeLog or None; step an int or None (the client's step); hint the
//                  track's render hint or 0; send whether the output is sent whole;
//                  summarise None or summarise(stream, output, summary), the track's
//                  bookkeeping of the output's summary (summaries.h's summarize() of
//                  its values), which must not raise
//   off()          every call goes to the fallbacks (the track decides per step)
//
// The hooks never raise into the model's forward and always return None (the output as
// it is): a tensor that cannot be read is a counted refusal of its stream.
// Thread safety: the GIL is held throughout, but released around a large copy.
#pragma once

#include <Python.h>

#include "client_core.h"

namespace tensorscope::python {

// Adds OutputHooks to `module`; `core_of` gives the ClientCore of a Core (null when
// closed or not a Core). False with an error set.
bool add_output_hooks(PyObject* module, ClientCore* (*core_of)(PyObject*));

}  // namespace tensorscope::python
