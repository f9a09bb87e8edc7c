// core_options_args.h — a client's options from Python: the dict Core(options) takes,
// read through the one table of options (client/core/core_option_table.h), and that
// options as a dict again: checked and normalised (paths as str), and the defaults for the
// Python package to compare its signature with.
//
// Used by module.cc. The errors are the Python package's: TypeError for a wrong type
// ("every_n must be an int, not str"), ValueError for a value out of bounds ("ring_slots
// must be between 1 and 1048576, not 0"), worded as the C++ client logs them.
// Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

#include "client_core.h"

namespace tensorscope::python {

// Fills *options from `dict` (keys: the table's options, and "framework_versions": a dict
// of str). Absent keys keep their defaults; an unknown key is a TypeError. False with a
// Python exception set on any problem.
bool read_core_options(PyObject* dict, CoreOptions* options);

// {name: value} of every option of the table in `options` (rank: None when unset), in the
// table's order; null with an exception set when out of memory. Of CoreOptions{}: the
// defaults (the extension's CLIENT_OPTIONS).
PyObject* core_options_dict(const CoreOptions& options);

}  // namespace tensorscope::python
