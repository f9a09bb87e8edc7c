// push_calls.h — the two native steps of every push from Python, shared by Core's
// methods (module.cc) and the tracks' output hooks (output_hook.cc): the admission
// (the gate, then whether a send can go ahead now) and the send of a tensor (a DLPack
// capsule, or a TensorRef the output hooks read from the tensor's attributes).
//
// Thread safety: call with the GIL held; send_capsule releases it around large copies.
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>

#include "client_core.h"

namespace tensorscope::python {

// What an admission returns: the stream's render hint (>= 0) when a send would go ahead;
// -1 when the gate said no (counted as gated); -2 - code when the gate admitted it but a
// send cannot go ahead now (ready(): not connected, disabled, ...; counted). One call
// decides whether the tensor is exported at all.
long admission_code(ClientCore* core, const StreamGate::Admission& admission);

// Sends the tensor of DLPack `capsule` (kept alive by the caller) as stream `name`: the
// core's result, or a counted refusal when the capsule or its tensor cannot be sent.
// `labels` may be null. Large CPU copies run without the GIL (`name` must not change
// meanwhile: pass a string the caller owns).
PushResult send_capsule(ClientCore* core, const std::string& name, PyObject* capsule, wire::TensorKind kind,
                        uint8_t hint, std::optional<int64_t> step, bool as_bool, uintptr_t cuda_stream,
                        const RowLabels* labels);

// Sends `ref` (its memory kept alive by the caller) as send_capsule does, the GIL released
// around large CPU copies.
PushResult send_ref(ClientCore* core, const std::string& name, const TensorRef& ref, wire::TensorKind kind,
                    uint8_t hint, std::optional<int64_t> step, const RowLabels* labels);

}  // namespace tensorscope::python
