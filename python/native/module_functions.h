// module_functions.h — the functions of tensorscope._native that need no Core: names and
// paths (session and stream names, the .npy sink's files), run info and the daemon's
// status, the module tree format, .npy writing, and the CPU summaries.
//
// Used by module.cc (PyInit). Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

namespace tensorscope::python {

// Adds the functions to `module`; false with an exception set.
bool add_module_functions(PyObject* module);

}  // namespace tensorscope::python
