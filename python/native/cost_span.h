// cost_span.h — the Python tracks' share of the process's cost meter (client/core/
// cost_meter.h): the time in their hooks and entry points.
//
//   TimedCall(fn, *bound)   a callable (a base class: the tracks' _Hook adds what a copy of
//                           the model makes of it) that calls fn(*bound, *args, **kwargs)
//                           as one span of the meter, with no Python frame of its own
//   CostSpan()              a context manager: its with-block is one span
//   own_cost() -> (share of the wall time in tensorscope over the last window, or -1;
//                  what was said of a window over the limit, or "")
//
// Used by module.cc. Thread safety: call with the GIL held; spans are per thread.
#pragma once

#include <Python.h>

namespace tensorscope::python {

// Adds TimedCall, CostSpan and own_cost to `module`; false with an error set.
bool add_cost_span(PyObject* module);

}  // namespace tensorscope::python
