// vocabularies.h — the vocabularies the C++ side defines, for the package to derive its
// own from: RENDER_MODES, PUSH_RESULTS, TENSOR_KINDS, RECORD_KINDS, CLIENT_OPTIONS, the
// version and the table headers. (The tracks' vocabularies: track_policy_type.h.)
//
// Used by module.cc (PyInit). Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

namespace tensorscope::python {

// Adds them to `module`; false with an exception set.
bool add_vocabularies(PyObject* module);

}  // namespace tensorscope::python
