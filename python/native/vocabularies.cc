// vocabularies.cc — see vocabularies.h.
#include "vocabularies.h"

#include <cstdint>
#include <string>

#include "core_options_args.h"
#include "tensorscope/push_result.h"
#include "tensorscope/recording/separation_table.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/recording/tensorboard_export.h"
#include "tensorscope/shared/shard_placement.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::python {

// The vocabularies the C++ side defines, for the package to derive its own from:
// RENDER_MODES {name: wire value} ("default" and every wire::RenderHint), PUSH_RESULTS
// (PushResult names by code), TENSOR_KINDS {name: wire::TensorKind value} of tensors,
// RECORD_KINDS {name: value} of every record (tensors, module trees, summaries),
// CLIENT_OPTIONS {name: default} (core_option_table.h: what Core(options) takes), WITH_CUDA,
// VERSION, SEPARATION_TABLE_HEADER, SUMMARY_TABLE_HEADER, MESH_PLACEMENTS {name: code}
// (shared/shard_placement.h), EXPORT_METRICS (recording/tensorboard_export.h: the
// summary metrics the exports write) and DTYPE_NAMES (wire::dtype_name by wire::DType
// code: "invalid", "float32", ...).
bool add_vocabularies(PyObject* module) {
#ifdef TENSORSCOPE_WITH_CUDA
  PyModule_AddIntConstant(module, "WITH_CUDA", 1);
#else
  PyModule_AddIntConstant(module, "WITH_CUDA", 0);
#endif
  if (PyModule_AddStringConstant(module, "VERSION", TENSORSCOPE_VERSION) != 0 ||
      PyModule_AddStringConstant(module, "SEPARATION_TABLE_HEADER", recording::kSeparationTableHeader) != 0 ||
      PyModule_AddStringConstant(module, "SUMMARY_TABLE_HEADER", recording::kSummaryTableHeader) != 0) {
    return false;
  }
  PyObject* modes = PyDict_New();
  PyObject* results = PyTuple_New(static_cast<Py_ssize_t>(kPushResultNames.size()));
  PyObject* kinds = PyDict_New();
  PyObject* record_kinds = PyDict_New();
  bool ok = modes != nullptr && results != nullptr && kinds != nullptr && record_kinds != nullptr;
  auto put = [&ok](PyObject* dict, const char* name, long value) {
    PyObject* v = PyLong_FromLong(value);
    ok = ok && v != nullptr && PyDict_SetItemString(dict, name, v) == 0;
    Py_XDECREF(v);
  };
  if (ok) {
    put(modes, "default", 0);
    for (uint8_t h = 1; h <= wire::kMaxRenderHint; ++h) {
      put(modes, wire::kRenderModeNames[h].data(), h);
    }
    for (size_t r = 0; r < kPushResultNames.size(); ++r) {
      PyObject* name = PyUnicode_FromString(kPushResultNames[r].data());
      ok = ok && name != nullptr && PyTuple_SetItem(results, static_cast<Py_ssize_t>(r), name) == 0;  // steals name
    }
    for (uint8_t k = 1; k <= wire::kMaxTensorKind; ++k) {
      if (wire::is_tensor_kind(k)) put(kinds, wire::kTensorKindNames[k].data(), k);
      put(record_kinds, wire::kTensorKindNames[k].data(), k);
    }
  }
  ok = ok && PyModule_AddObject(module, "RENDER_MODES", modes) == 0;
  if (!ok) Py_XDECREF(modes);
  const bool results_ok = ok && PyModule_AddObject(module, "PUSH_RESULTS", results) == 0;
  if (!results_ok) Py_XDECREF(results);
  const bool kinds_ok = results_ok && PyModule_AddObject(module, "TENSOR_KINDS", kinds) == 0;
  if (!kinds_ok) Py_XDECREF(kinds);
  const bool records_ok = kinds_ok && PyModule_AddObject(module, "RECORD_KINDS", record_kinds) == 0;
  if (!records_ok) Py_XDECREF(record_kinds);
  PyObject* options = records_ok ? core_options_dict(CoreOptions{}) : nullptr;
  const bool options_ok = options != nullptr && PyModule_AddObject(module, "CLIENT_OPTIONS", options) == 0;
  if (!options_ok) Py_XDECREF(options);
  PyObject* placements = options_ok ? PyDict_New() : nullptr;
  bool placements_ok = placements != nullptr;
  for (const auto& [name, code] : kMeshPlacements) {
    PyObject* v = placements_ok ? PyLong_FromLong(static_cast<long>(code)) : nullptr;
    placements_ok = v != nullptr && PyDict_SetItemString(placements, std::string(name).c_str(), v) == 0;
    Py_XDECREF(v);
  }
  placements_ok = placements_ok && PyModule_AddObject(module, "MESH_PLACEMENTS", placements) == 0;
  if (!placements_ok) Py_XDECREF(placements);
  PyObject* metrics = placements_ok ? PyTuple_New(static_cast<Py_ssize_t>(recording::kExportMetrics.size())) : nullptr;
  bool metrics_ok = metrics != nullptr;
  for (size_t i = 0; metrics_ok && i < recording::kExportMetrics.size(); ++i) {
    PyObject* name = PyUnicode_FromString(recording::kExportMetrics[i]);
    metrics_ok = name != nullptr && PyTuple_SetItem(metrics, static_cast<Py_ssize_t>(i), name) == 0;  // steals name
  }
  metrics_ok = metrics_ok && PyModule_AddObject(module, "EXPORT_METRICS", metrics) == 0;
  if (!metrics_ok) Py_XDECREF(metrics);
  PyObject* dtypes = metrics_ok ? PyTuple_New(wire::kMaxDType + 1) : nullptr;
  bool dtypes_ok = dtypes != nullptr;
  for (uint8_t d = 0; dtypes_ok && d <= wire::kMaxDType; ++d) {
    PyObject* name = PyUnicode_FromString(wire::dtype_name(static_cast<wire::DType>(d)));
    dtypes_ok = name != nullptr && PyTuple_SetItem(dtypes, d, name) == 0;  // steals name
  }
  dtypes_ok = dtypes_ok && PyModule_AddObject(module, "DTYPE_NAMES", dtypes) == 0;
  if (!dtypes_ok) Py_XDECREF(dtypes);
  return dtypes_ok;
}

}  // namespace tensorscope::python
