// summary_batch_type.h — tensorscope._native.SummaryBatch: a track's summaries gathered
// into fused passes (client/core/summary_batch.h). Tensors are added by the track's
// OutputHooks.gather (read where they are, output_hook.h).
//
//   SummaryBatch()        (a base class: a test's subclass can stand in for a failing device)
//   flush() -> ""         queues what was gathered (one pass per device and stream), or
//                         why a pass could not be (its tickets then fail with that)
//   cancel(ticket)        leaves a gathered ticket out (written in place since)
//   take(ticket) -> None while on the way; the values (tensor_summary.h's device layout,
//                   a list of float) once there; a str when the pass failed or the ticket
//                   is unknown. A ticket is taken once.
//   gathered, passes      tickets waiting for a flush; passes queued so far
//   FUSED_KERNEL          1 when this build has the CUDA kernel of the pass
//   FUSED_MAX_GATHERED    a track flushes at this many gathered tensors
//
// Used by module.cc and output_hook.cc. Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

#include "summary_batch.h"

namespace tensorscope::python {

// The batch of a SummaryBatch object, or null (no error set) for anything else.
fused::SummaryBatch* summary_batch_of(PyObject* object);
// Adds SummaryBatch to `module`; false with an error set.
bool add_summary_batch(PyObject* module);

}  // namespace tensorscope::python
