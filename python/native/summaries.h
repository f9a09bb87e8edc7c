// summaries.h — tensor summaries for the Python tracks (shared/summary_format.h): computed
// by the client core (client/core/tensor_summary.h) from a DLPack capsule of a CPU tensor,
// and the entries a track collected, read back for Core.send_summaries.
//
//   summarize(capsule, as_bool[, cast])
//                               -> (numel, nan, inf, zeros, l2, max_abs, mean, std,
//                                  numerics, update ratio or None), or a str saying why
//                                  it cannot (a CUDA tensor, a bad capsule); cast a
//                                  CAST_FORMATS value (0: none)
//   PreviousValues()            a parameter's values at its last summarized step, in the
//                               core's memory (tensor_summary.h): OutputHooks.summarize
//                               takes the update ratio against them and keeps the new ones
//   update_ratio(now, before)   -> |now - before| / |before| of two capsules, or a str
//   summary_from_device_values(values, numel, scaled[, ratio, cast])
//                               -> (numel, nan, inf, zeros, l2, max_abs, mean, std,
//                                  update ratio or None, numerics) of a summary queued
//                                  on a GPU (client/core/tensor_summary.h: `values` in
//                                  the layout `ratio` and `cast` say), or a str
//   numerics: None, or (cast, underflow, overflow, min_abs_nonzero) with a cast format
//   DEVICE_SUMMARY_FIELDS, DEVICE_RATIO_FIELDS, DEVICE_NUMERICS_FIELDS: the order of
//   those values' names; CAST_FORMATS: {name: (value, underflow_at_most, overflow_from)}
//   (shared/cast_formats.h)
//   an entry: (name, kind, numel, nan, inf, zeros, l2, max_abs, mean, std, update_ratio
//              or None, numerics[, shard]), kind a wire TensorKind value (activation ..
//              parameter_gradient), shard None or (whole numel, ((placement, tensor dim,
//              coordinate, size) per mesh dimension)) of a DTensor's local part
//              (shared/shard_placement.h; MESH_PLACEMENTS' codes)
//
// Used by module.cc and output_hook.cc. Thread safety: call with the GIL held (released around long passes).
#pragma once

#include <Python.h>

#include <vector>

#include "tensor_ref.h"
#include "tensorscope/shared/summary_format.h"

namespace tensorscope::python {

PyObject* summarize(PyObject* module, PyObject* args);
// summarize()'s result for a capsule (kept alive by the caller); null only when out of memory.
PyObject* summary_of_capsule(PyObject* capsule, bool as_bool, CastFormat cast);
// The same for a CPU tensor's `ref` (its memory kept alive by the caller), with the update
// ratio against `previous` (a PreviousValues, or null), which then holds ref's values.
PyObject* summary_of_ref(const TensorRef& ref, CastFormat cast, PyObject* previous = nullptr);
// Whether `object` is a PreviousValues.
bool is_previous_values(PyObject* object);
PyObject* update_ratio(PyObject* module, PyObject* args);
PyObject* summary_from_device_values(PyObject* module, PyObject* args);
// Adds DEVICE_SUMMARY_FIELDS, DEVICE_RATIO_FIELDS, DEVICE_NUMERICS_FIELDS (tuples of str)
// and CAST_FORMATS; false with an error set.
bool add_device_summary_fields(PyObject* module);
// Adds the PreviousValues type; false with an error set.
bool add_previous_values(PyObject* module);

// Fills `out` from a list of entries; false with TypeError/ValueError set when one is
// malformed. Entries beyond kMaxSummaryEntries are left out.
bool summaries_from_python(PyObject* entries, std::vector<TensorSummary>* out);
// An entry's shard (None or a 2-tuple) into `shard`; false with an error set.
bool shard_from_python(PyObject* item, ShardPlacement* shard);
// An entry's numerics (None or a 4-tuple) into `s`; false with an error set.
bool numerics_from_python(PyObject* item, TensorSummary* s);

}  // namespace tensorscope::python
