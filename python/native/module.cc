// module.cc — tensorscope._native: the Python face of the client core. Built for the stable
// ABI (Py_LIMITED_API 3.9: one .abi3.so serves every later Python) and without libtorch:
// tensors arrive as DLPack capsules (dlpack_ref.h), whatever framework made them.
//
// Used by the pure-Python package (tensorscope/_client.py), which converts tensors,
// runs transforms and hooks, and never lets an exception reach the training loop. Only
// argument errors raise here (TypeError/ValueError). The parts, one file each:
// core_type.h (Core, PushGate), module_functions.h (names, paths, files, summaries),
// vocabularies.h, track_policy_type.h (the tracks' bookkeeping), summaries.h (the device
// summary fields), tree_log.h, output_hook.h. Thread safety: see each.
#include <Python.h>

#include "core_type.h"
#include "cost_span.h"
#include "module_functions.h"
#include "output_hook.h"
#include "summaries.h"
#include "summary_batch_type.h"
#include "track_policy_type.h"
#include "tree_log.h"
#include "vocabularies.h"

namespace {

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "_native",
                          "tensorscope's native client core",
                          -1,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() {
  namespace python = tensorscope::python;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (!python::add_core(module) || !python::add_module_functions(module) || !python::add_vocabularies(module) ||
      !python::add_track_policy(module) || !python::add_device_summary_fields(module) ||
      !python::add_previous_values(module) || !python::add_summary_batch(module) ||
      !python::add_tree_log(module, python::core_of) || !python::add_cost_span(module) ||
      !python::add_output_hooks(module, python::core_of)) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
