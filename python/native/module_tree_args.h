// module_tree_args.h — a ModuleTree (shared/module_tree_format.h) from the calls the
// Python tracks collected, so the payload is formatted by the same code as the C++
// client's.
//
//   calls:   a list of (thread, call, path, type, inputs, output[, value]) tuples
//            thread, call: non-negative ints; path, type: str
//            inputs: a list of tensor descriptions; output: one, or None
//            value: "=", "~", "?" or "" (ModuleTreeCall::value; any call with one makes the
//            payload version 2)
//   a tensor description: (dtype, shape, device), e.g. ("float32", (32, 784), "cpu"), or
//            its text as TreeLog.take_parts() gives it, e.g. "float32[32,784]@cpu"
//
// Used by module.cc (Core.send_module_tree). Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

#include <cstdint>

#include "tensorscope/shared/module_tree_format.h"

namespace tensorscope::python {

// Fills `out` from `calls`; false with TypeError/ValueError set when an item is malformed.
// Calls beyond ModuleTree::kMaxCalls and inputs beyond kMaxInputs are left out (the
// calls counted in `out->omitted`).
bool module_tree_from_python(PyObject* calls, uint64_t omitted, ModuleTree* out);

}  // namespace tensorscope::python
