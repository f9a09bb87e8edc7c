// core_type.h — tensorscope._native.Core, the Python face of ClientCore (a client's
// connection, gates, counters and copies), and PushGate, Client.push with its gate in C.
//
// Used by module.cc (PyInit) and, through core_of(), by the tree log and output hooks.
// Thread safety: call with the GIL held; a Core may be used from any thread, and copies
// of more than kReleaseGilBytes run without the GIL.
#pragma once

#include <Python.h>

#include "client_core.h"

namespace tensorscope::python {

// Adds the Core type to `module`; false with an exception set.
bool add_core(PyObject* module);

// The ClientCore of a Core (null when closed or not a Core).
ClientCore* core_of(PyObject* object);

}  // namespace tensorscope::python
