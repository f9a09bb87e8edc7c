// record_fields.h — copying a record's descriptive fields into a claimed ring slot.
//
// Used by ClientCore and CudaStaging between a ring reservation and its commit: plain
// stores only. Thread safety: a free function over memory the caller owns.
#pragma once

#include <cstring>

#include "tensorscope/shared/wire_format.h"

namespace tensorscope {

// Copies every descriptive field of a record (step, timestamp, rank, dtype, kind, ndim,
// render hint, shape, name, device, label) from `from` into a claimed slot.
inline void copy_record_fields(const wire::RecordHeader& from, wire::RecordHeader* to) {
  to->step = from.step;
  to->timestamp_unix_ns = from.timestamp_unix_ns;
  to->rank = from.rank;
  to->dtype = from.dtype;
  to->kind = from.kind;
  to->ndim = from.ndim;
  to->render_hint = from.render_hint;
  std::memcpy(to->shape, from.shape, sizeof(to->shape));
  std::memcpy(to->name, from.name, sizeof(to->name));
  std::memcpy(to->device, from.device, sizeof(to->device));
  std::memcpy(to->label, from.label, sizeof(to->label));
}

}  // namespace tensorscope
