// track_policy_type.h — the client core's track policy (client/core/track_policy.h) for
// the Python tracks: the StackLedger type, route_call() and step_gates(), and the
// vocabularies of tracks: CALL_STACKING, STACKED_CALLS, EVALUATION_CALLS, TRACK_POLICY
// and TRACK_REFUSALS.
//
// Used by module.cc (PyInit), for tensorscope/_tracks.py and _call_stacks.py.
// Thread safety: call with the GIL held; a StackLedger is thread safe besides.
#pragma once

#include <Python.h>

namespace tensorscope::python {

// Adds the type, the functions and the dicts to `module`; false with an exception set.
bool add_track_policy(PyObject* module);

}  // namespace tensorscope::python
