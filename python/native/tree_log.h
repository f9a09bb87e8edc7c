// tree_log.h — tensorscope._native.TreeLog: the module tree log of a Python track
// (tensorscope/_tree.py says what it lists), kept in C so that the forward pre-hook of
// every tracked module and the output's description cost no Python frame.
//
//   TreeLog(core, tensor_type, skip_ids, stamp, leaves, inert_hook[, training])
//     core         the Core whose enabled() gates each call (None: always on); held
//                  weakly: once a Client dropped without close() frees it, nothing is
//                  logged
//     tensor_type  torch.Tensor
//     skip_ids     ids of the model's parameters and buffers: never listed
//     stamp        stamp() -> the step the log is stamped with, asked at a step's first
//                  call; None: nothing is logged until the next take()/take_parts()
//     leaves       leaves(value) -> the tensors of an argument or output that is neither
//                  a tensor nor a tuple or list of tensors
//     inert_hook   inert_hook() -> what a hook becomes in a copy or pickle of the model
//     training     None, or (model, torch.is_grad_enabled): a call with model.training
//                  false or gradients off (an evaluation forward the track leaves out,
//                  py_args.h) is not listed
//   hook(path, type_name) -> a forward pre-hook (module, args) that calls begin()
//   begin(path, type_name, module, args)   a call of `module` begins
//   end(module, output) -> (index, tensor): the call ended, and the output tensor it was
//                  described by; None when that call's begin was not logged or it has
//                  no output tensor
//   take() -> (payload, step): the step's record (shared/module_tree_format.h, bytes),
//             or None when nothing was logged; a fresh log
//   take_parts(ends) -> [(calls, omitted)]: the log split before each position in `ends`
//             (ascending), each part numbered as a step of its own, calls as
//             module_tree_args.h reads them (tensor descriptions as text); a fresh log
//   step (int or None), empty, position (calls listed so far)
//
// Never raises from a hook, begin() or end(): what cannot be read is described as "?".
// Thread safety: every method runs with the GIL held and does not release it, so each
// is atomic for Python threads; calls are numbered per thread as the C++ client does.
#pragma once

#include <Python.h>

#include "client_core.h"

namespace tensorscope::python {

// Adds TreeLog to `module`; `core_of` gives the ClientCore of a Core (null when closed,
// or when the object is not a Core). False with an error set.
bool add_tree_log(PyObject* module, ClientCore* (*core_of)(PyObject*));

// Whether `object` is an initialised TreeLog.
bool is_tree_log(PyObject* object);

// TreeLog `log`'s end(module, output), for a native output hook; never raises (nothing
// when `log` is not an initialised TreeLog).
void tree_log_end(PyObject* log, PyObject* module, PyObject* output);

}  // namespace tensorscope::python
