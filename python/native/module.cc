// module.cc — tensorscope._native: the Python face of ClientCore. Built for the stable
// ABI (Py_LIMITED_API 3.9: one .abi3.so serves every later Python) and without libtorch:
// tensors arrive as DLPack capsules (dlpack_ref.h), whatever framework made them.
//
// Used by the pure-Python package (tensorscope/_client.py), which converts tensors,
// runs transforms and hooks, and never lets an exception reach the training loop. Only
// argument errors raise here (TypeError/ValueError). Thread safety: a Core may be used
// from any thread; copies of more than kReleaseGilBytes run without the GIL.
#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "client_core.h"
#include "core_options_args.h"
#include "dlpack_ref.h"
#include "heap_types.h"
#include "module_tree_args.h"
#include "output_hook.h"
#include "push_calls.h"
#include "py_args.h"
#include "row_labels_args.h"
#include "run_info.h"
#include "summaries.h"
#include "tree_log.h"
#include "tensorscope/call_stacking.h"
#include "tensorscope/evaluation_calls.h"
#include "tensorscope/shared/session_name.h"
#include "tensorscope/shared/status_query.h"
#include "tensorscope/recording/file_naming.h"
#include "tensorscope/recording/npy_file.h"
#include "tensorscope/recording/separation_table.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/shared/wire_format.h"

namespace {

using tensorscope::ClientCore;
using tensorscope::CoreOptions;
using tensorscope::PushResult;
namespace wire = tensorscope::wire;
using tensorscope::python::admission_code;
using tensorscope::python::capsule_tensor;
using tensorscope::python::free_instance;
using tensorscope::python::send_capsule;
using tensorscope::python::text;
using tensorscope::python::utf8;
using tensorscope::python::Utf8Cache;

struct CoreObject {
  PyObject_HEAD
  ClientCore* core;    // null once closed
  PyObject* weakrefs;  // the hooks hold a Core weakly: a Client dropped without close() closes it
  // Calls running without the GIL on `core` (wait_until_read, stats): a close() meanwhile
  // (another thread) leaves the core in `closing`, deleted by the last of them.
  int busy;
  ClientCore* closing;
};

PyObject* core_type = nullptr;  // made by PyInit__native

// The ClientCore of a Core (null when closed or not a Core), for TreeLog.
ClientCore* core_of(PyObject* object) {
  if (core_type == nullptr || !PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(core_type))) return nullptr;
  return reinterpret_cast<CoreObject*>(object)->core;
}

ClientCore* live(CoreObject* self) {
  if (self->core == nullptr) PyErr_SetString(PyExc_ValueError, "the tensorscope client is closed");
  return self->core;
}

// ---- Core ----

int core_init(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<CoreObject*>(self_object);
  PyObject* dict = nullptr;
  if (!PyArg_ParseTuple(args, "O", &dict)) return -1;
  CoreOptions options;
  if (!tensorscope::python::read_core_options(dict, &options)) return -1;
  delete self->core;
  self->core = nullptr;
  ClientCore* core = nullptr;
  Py_BEGIN_ALLOW_THREADS  // the constructor may wait for the first registration
      core = new (std::nothrow) ClientCore(std::move(options));
  Py_END_ALLOW_THREADS if (core == nullptr) {
    PyErr_NoMemory();
    return -1;
  }
  self->core = core;
  return 0;
}

void delete_core(ClientCore* core) {
  Py_BEGIN_ALLOW_THREADS  // the connection's shutdown joins its thread
      delete core;
  Py_END_ALLOW_THREADS
}

void close_core(CoreObject* self) {
  ClientCore* core = self->core;
  self->core = nullptr;
  if (core == nullptr) return;
  if (self->busy > 0) {
    self->closing = core;  // deleted by the last call still using it
    return;
  }
  delete_core(core);
}

// Marks a call that uses the core without the GIL; under the GIL on both ends.
class BusyCore {
 public:
  explicit BusyCore(CoreObject* self) : self_(self) { ++self_->busy; }
  ~BusyCore() {
    if (--self_->busy == 0 && self_->closing != nullptr) delete_core(std::exchange(self_->closing, nullptr));
  }
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;

 private:
  CoreObject* self_;
};

void core_dealloc(PyObject* self_object) {
  auto* self = reinterpret_cast<CoreObject*>(self_object);
  if (self->weakrefs != nullptr) PyObject_ClearWeakRefs(self_object);
  close_core(self);
  free_instance(self_object);
}

PyObject* core_close(PyObject* self, PyObject*) {
  close_core(reinterpret_cast<CoreObject*>(self));
  Py_RETURN_NONE;
}

// The stream names admit() and admit_tracked() saw last (under the GIL).
Utf8Cache stream_names;

// admit(name) -> admission_code: the client's gate (every_n, max_hz), then ready().
PyObject* core_admit(PyObject* self, PyObject* name_object) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  const std::string* name = nullptr;
  if (core == nullptr || !stream_names.utf8(name_object, "name", &name)) return nullptr;
  return PyLong_FromLong(admission_code(core, core->admit(*name)));
}

// admit_tracked(name) -> admission_code: max_hz per stream (a track gated its steps), then ready().
PyObject* core_admit_tracked(PyObject* self, PyObject* name_object) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  const std::string* name = nullptr;
  if (core == nullptr || !stream_names.utf8(name_object, "name", &name)) return nullptr;
  return PyLong_FromLong(admission_code(core, core->admit_tracked(*name)));
}

// send(name, capsule, kind, hint, step or None, as_bool, cuda_stream) -> result code.
PyObject* core_send(PyObject* self, PyObject* args) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  PyObject *name_object = nullptr, *capsule = nullptr, *step_object = nullptr, *labels_object = Py_None;
  int kind = 0, hint = 0, as_bool = 0;
  unsigned long long cuda_stream = 0;
  if (core == nullptr ||
      !PyArg_ParseTuple(args, "OOiiOpK|O", &name_object, &capsule, &kind, &hint, &step_object, &as_bool, &cuda_stream,
                        &labels_object)) {
    return nullptr;
  }
  const std::string* cached = nullptr;
  if (!stream_names.utf8(name_object, "name", &cached)) return nullptr;
  const std::string name = *cached;  // a copy: the GIL may be released below, and the cache changes
  if (kind < 0 || kind > 255 || !tensorscope::wire::is_tensor_kind(static_cast<uint8_t>(kind)) || hint < 0 ||
      hint > tensorscope::wire::kMaxRenderHint) {
    PyErr_SetString(PyExc_ValueError, "invalid record kind or render hint");
    return nullptr;
  }
  std::optional<int64_t> step;
  if (step_object != Py_None) {
    const long long value = PyLong_AsLongLong(step_object);
    if (value == -1 && PyErr_Occurred()) return nullptr;
    step = value;
  }
  std::string error;
  tensorscope::RowLabels labels;
  if (labels_object != Py_None) {
    error = tensorscope::python::row_labels_from_python(labels_object, &labels);
    if (!error.empty()) return PyLong_FromLong(static_cast<long>(core->refuse(name, "labels: " + error)));
  }
  const tensorscope::RowLabels* row_labels = labels_object != Py_None ? &labels : nullptr;
  return PyLong_FromLong(static_cast<long>(send_capsule(core, name, capsule, static_cast<wire::TensorKind>(kind),
                                                        static_cast<uint8_t>(hint), step, as_bool != 0,
                                                        static_cast<uintptr_t>(cuda_stream), row_labels)));
}

// refuse(name, why) -> result code (refused), counted and logged once per stream.
PyObject* core_refuse(PyObject* self, PyObject* args) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  PyObject *name_object = nullptr, *why_object = nullptr;
  if (core == nullptr || !PyArg_ParseTuple(args, "OO", &name_object, &why_object)) return nullptr;
  std::string name, why;
  if (!utf8(name_object, "name", &name) || !utf8(why_object, "why", &why)) return nullptr;
  return PyLong_FromLong(static_cast<long>(core->refuse(name, why)));
}

PyObject* core_count_gated(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  core->count_gated();
  Py_RETURN_NONE;
}

// send_module_tree(track, payload, step): a step's record (shared/module_tree_format.h),
// from TreeLog.take() or format_module_tree(); the daemon checks it as it checks the C++
// client's.
PyObject* core_send_module_tree(PyObject* self, PyObject* args) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  PyObject *track_object = nullptr, *payload_object = nullptr;
  long long step = 0;
  if (core == nullptr || !PyArg_ParseTuple(args, "OOL", &track_object, &payload_object, &step)) return nullptr;
  std::string track;
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (!utf8(track_object, "track", &track)) return nullptr;
  if (!PyBytes_Check(payload_object) || PyBytes_AsStringAndSize(payload_object, &data, &size) != 0) {
    PyErr_SetString(PyExc_TypeError, "payload must be bytes");
    return nullptr;
  }
  const std::string payload(data, static_cast<size_t>(size));
  return PyLong_FromLong(static_cast<long>(core->send_module_tree(track, payload, step)));
}

// format_module_tree(calls, omitted) -> the payload of a step's record: see
// module_tree_args.h for `calls`.
PyObject* format_module_tree(PyObject*, PyObject* args) {
  PyObject* calls = nullptr;
  unsigned long long omitted = 0;
  if (!PyArg_ParseTuple(args, "OK", &calls, &omitted)) return nullptr;
  tensorscope::ModuleTree tree;
  if (!tensorscope::python::module_tree_from_python(calls, omitted, &tree)) return nullptr;
  const std::string payload = tensorscope::format_module_tree(tree);
  return PyBytes_FromStringAndSize(payload.data(), static_cast<Py_ssize_t>(payload.size()));
}

// send_summaries(track, entries, step): see summaries.h for `entries`.
PyObject* core_send_summaries(PyObject* self, PyObject* args) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  PyObject *track_object = nullptr, *entries = nullptr;
  long long step = 0;
  if (core == nullptr || !PyArg_ParseTuple(args, "OOL", &track_object, &entries, &step)) return nullptr;
  std::string track;
  std::vector<tensorscope::TensorSummary> summaries;
  if (!utf8(track_object, "track", &track) || !tensorscope::python::summaries_from_python(entries, &summaries)) {
    return nullptr;
  }
  return PyLong_FromLong(
      static_cast<long>(core->send_summaries(track, tensorscope::encode_summaries(summaries), step)));
}

PyObject* core_cuda_staging_usable(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  return PyBool_FromLong(core->cuda_staging_usable() ? 1 : 0);
}

PyObject* core_count_sync_copy(PyObject* self, PyObject* why_object) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  std::string why;
  if (core == nullptr || !utf8(why_object, "why", &why)) return nullptr;
  core->count_sync_copy(why);
  Py_RETURN_NONE;
}

PyObject* core_set_render_hint(PyObject* self, PyObject* args) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  PyObject* name_object = nullptr;
  int hint = 0;
  if (core == nullptr || !PyArg_ParseTuple(args, "Oi", &name_object, &hint)) return nullptr;
  std::string name;
  if (!utf8(name_object, "stream", &name)) return nullptr;
  if (hint < 0 || hint > tensorscope::wire::kMaxRenderHint) {
    PyErr_SetString(PyExc_ValueError, "invalid render hint");
    return nullptr;
  }
  core->set_render_hint(name, static_cast<uint8_t>(hint));
  Py_RETURN_NONE;
}

PyObject* core_render_hint(PyObject* self, PyObject* name_object) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  std::string name;
  if (core == nullptr || !utf8(name_object, "stream", &name)) return nullptr;
  return PyLong_FromLong(core->render_hint_for(name));
}

PyObject* core_set_label(PyObject* self, PyObject* text_object) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  std::string text;
  if (core == nullptr || !utf8(text_object, "label", &text)) return nullptr;
  core->set_label(text);
  Py_RETURN_NONE;
}

PyObject* core_set_enabled(PyObject* self, PyObject* value) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  const int enabled = PyObject_IsTrue(value);
  if (enabled < 0) return nullptr;
  core->set_enabled(enabled != 0);
  Py_RETURN_NONE;
}

PyObject* core_enabled(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  return PyBool_FromLong(core->enabled() ? 1 : 0);
}

PyObject* core_step(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  return PyLong_FromLongLong(core->step());
}

PyObject* core_set_step(PyObject* self, PyObject* value) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  const long long step = PyLong_AsLongLong(value);
  if (step == -1 && PyErr_Occurred()) return nullptr;
  core->set_step(step);
  Py_RETURN_NONE;
}

PyObject* core_next_step(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  return PyLong_FromLongLong(core->next_step());
}

PyObject* core_connected(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  return PyBool_FromLong(core->connected() ? 1 : 0);
}

// hold_evidence(from_step, until_step): ClientCore::hold_evidence.
PyObject* core_hold_evidence(PyObject* self, PyObject* args) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  long long from = 0, until = 0;
  if (core == nullptr || !PyArg_ParseTuple(args, "LL", &from, &until)) return nullptr;
  core->hold_evidence(from, until);
  Py_RETURN_NONE;
}

// wait_until_read(timeout_ms) -> bool: ClientCore::wait_until_read, without the GIL.
PyObject* core_wait_until_read(PyObject* self, PyObject* timeout_object) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  const long timeout_ms = PyLong_AsLong(timeout_object);
  if (timeout_ms == -1 && PyErr_Occurred()) return nullptr;
  bool read = false;
  {
    BusyCore busy(reinterpret_cast<CoreObject*>(self));
    Py_BEGIN_ALLOW_THREADS read = core->wait_until_read(static_cast<int>(std::clamp<long>(timeout_ms, 0, 3600000)));
    Py_END_ALLOW_THREADS
  }
  return PyBool_FromLong(read ? 1 : 0);
}

PyObject* core_rank(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  return PyLong_FromLong(core->rank());
}

// Adds `key`: `value` (a new reference, stolen) to `dict`; false on failure.
bool put(PyObject* dict, const char* key, PyObject* value) {
  if (value == nullptr) return false;
  const int rc = PyDict_SetItemString(dict, key, value);
  Py_DECREF(value);
  return rc == 0;
}

PyObject* core_stats(PyObject* self, PyObject*) {
  ClientCore* core = live(reinterpret_cast<CoreObject*>(self));
  if (core == nullptr) return nullptr;
  tensorscope::ClientStats s;
  {
    BusyCore busy(reinterpret_cast<CoreObject*>(self));
    Py_BEGIN_ALLOW_THREADS  // takes the connection's notes lock
        s = core->stats();
    Py_END_ALLOW_THREADS
  }
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  const bool ok = put(d, "pushed", PyLong_FromUnsignedLongLong(s.pushed)) &&
      put(d, "gated", PyLong_FromUnsignedLongLong(s.gated)) &&
      put(d, "dropped_full", PyLong_FromUnsignedLongLong(s.dropped_full)) &&
      put(d, "paced", PyLong_FromUnsignedLongLong(s.paced)) &&
      put(d, "pace_stride", PyFloat_FromDouble(s.pace_stride)) && put(d, "pace_note", text(s.pace_note)) &&
      put(d, "dropped_by_daemon", PyLong_FromUnsignedLongLong(s.dropped_by_daemon)) &&
      put(d, "summaries_held", PyLong_FromUnsignedLongLong(s.summaries_held)) &&
      put(d, "summaries_lost", PyLong_FromUnsignedLongLong(s.summaries_lost)) &&
      put(d, "evidence_held", PyLong_FromUnsignedLongLong(s.evidence_held)) &&
      put(d, "evidence_lost", PyLong_FromUnsignedLongLong(s.evidence_lost)) &&
      put(d, "not_connected", PyLong_FromUnsignedLongLong(s.not_connected)) &&
      put(d, "refused", PyLong_FromUnsignedLongLong(s.refused)) &&
      put(d, "bytes", PyLong_FromUnsignedLongLong(s.bytes)) &&
      put(d, "connected", PyBool_FromLong(s.connected ? 1 : 0)) &&
      put(d, "connections", PyLong_FromUnsignedLongLong(s.connections)) &&
      put(d, "connection_note", text(s.connection_note)) &&
      put(d, "shm_bytes", PyLong_FromUnsignedLongLong(s.shm_bytes)) && put(d, "shm_note", text(s.shm_note)) &&
      put(d, "autostart", text(s.autostart)) && put(d, "cuda_transport", text(s.cuda_transport)) &&
      put(d, "cuda_note", text(s.cuda_note)) &&
      put(d, "cuda_ipc_pushed", PyLong_FromUnsignedLongLong(s.cuda_ipc_pushed)) &&
      put(d, "cuda_host_pushed", PyLong_FromUnsignedLongLong(s.cuda_host_pushed)) &&
      put(d, "cuda_failed", PyLong_FromUnsignedLongLong(s.cuda_failed));
  if (!ok) {
    Py_DECREF(d);
    return nullptr;
  }
  return d;
}

// ---- PushGate: Client.push without a Python frame for a call the gate does not admit ----

// A callable the Python client puts on its instance as `push`: admit() here, in C; a call
// every_n (or max_hz, or pacing) holds back returns the gated result at once. An admitted
// call goes to `admitted(name, tensor, hint)`; anything else (keywords, a name that is not
// a str, a closed client) to `fallback(*args, **kwargs)`, the Python push. Holds the
// client through its bound methods: a GC type, so the cycle is collected.
struct PushGateObject {
  PyObject_HEAD
  PyObject* core;  // a CoreObject
  PyObject* admitted;
  PyObject* fallback;
  PyObject* results;  // PushResult by code (PUSH_RESULTS order)
};

PyObject* push_gate_call(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<PushGateObject*>(self_object);
  if (kwargs == nullptr && PyTuple_Size(args) == 2) {
    PyObject* name = PyTuple_GetItem(args, 0);  // borrowed
    ClientCore* core = reinterpret_cast<CoreObject*>(self->core)->core;
    const std::string* text = nullptr;
    if (core != nullptr && PyUnicode_Check(name)) {
      if (stream_names.utf8(name, "name", &text)) {
        const long code = admission_code(core, core->admit(*text));
        if (code >= 0) return PyObject_CallFunction(self->admitted, "OOl", name, PyTuple_GetItem(args, 1), code);
        PyObject* result = PyTuple_GetItem(
            self->results,
            code == -1 ? static_cast<Py_ssize_t>(PushResult::kGated) : static_cast<Py_ssize_t>(-2 - code));
        Py_XINCREF(result);
        return result;
      }
      PyErr_Clear();  // the fallback says what is wrong with the name
    }
  }
  return PyObject_Call(self->fallback, args, kwargs);
}

int push_gate_traverse(PyObject* self_object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<PushGateObject*>(self_object);
  Py_VISIT(Py_TYPE(self_object));
  Py_VISIT(self->core);
  Py_VISIT(self->admitted);
  Py_VISIT(self->fallback);
  Py_VISIT(self->results);
  return 0;
}

int push_gate_clear(PyObject* self_object) {
  auto* self = reinterpret_cast<PushGateObject*>(self_object);
  Py_CLEAR(self->core);
  Py_CLEAR(self->admitted);
  Py_CLEAR(self->fallback);
  Py_CLEAR(self->results);
  return 0;
}

void push_gate_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  push_gate_clear(self_object);
  free_instance(self_object);
}

PyType_Slot push_gate_slots[] = {
    {Py_tp_doc, const_cast<char*>("Client.push's gate (Core.push_gate)")},
    {Py_tp_call, reinterpret_cast<void*>(push_gate_call)},
    {Py_tp_traverse, reinterpret_cast<void*>(push_gate_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(push_gate_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(push_gate_dealloc)},
    {0, nullptr},
};

PyType_Spec push_gate_spec = {"tensorscope._native.PushGate", sizeof(PushGateObject), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, push_gate_slots};
PyObject* push_gate_type = nullptr;  // made by PyInit__native

// push_gate(admitted, fallback, results) -> a PushGate of this core.
PyObject* core_push_gate(PyObject* self, PyObject* args) {
  PyObject *admitted = nullptr, *fallback = nullptr, *results = nullptr;
  if (!PyArg_ParseTuple(args, "OOO", &admitted, &fallback, &results)) return nullptr;
  if (!PyCallable_Check(admitted) || !PyCallable_Check(fallback) || !PyTuple_Check(results) ||
      PyTuple_Size(results) != static_cast<Py_ssize_t>(tensorscope::kPushResultNames.size())) {
    PyErr_SetString(PyExc_TypeError, "push_gate(admitted, fallback, results): two callables and the results tuple");
    return nullptr;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(push_gate_type);
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
  auto* gate = reinterpret_cast<PushGateObject*>(alloc(type, 0));  // tracked by the collector
  if (gate == nullptr) return nullptr;
  Py_INCREF(self);
  Py_INCREF(admitted);
  Py_INCREF(fallback);
  Py_INCREF(results);
  gate->core = self;
  gate->admitted = admitted;
  gate->fallback = fallback;
  gate->results = results;
  return reinterpret_cast<PyObject*>(gate);
}

PyMethodDef core_methods[] = {
    {"admit", core_admit, METH_O,
     "admit(name) -> render hint (>= 0: send it), -1 when gated, -2 - result code when it cannot go now"},
    {"push_gate", core_push_gate, METH_VARARGS,
     "push_gate(admitted, fallback, results) -> callable(name, tensor): push() with its gate in C"},
    {"admit_tracked", core_admit_tracked, METH_O,
     "admit_tracked(name) -> as admit(), for a track's tensors (max_hz per stream only)"},
    {"send", core_send, METH_VARARGS,
     "send(name, capsule, kind, hint, step, as_bool, cuda_stream[, labels]) -> result code"},
    {"refuse", core_refuse, METH_VARARGS, "refuse(name, why) -> result code (counted, logged once per stream)"},
    {"count_gated", core_count_gated, METH_NOARGS, "counts a push a track's gate did not admit"},
    {"send_module_tree", core_send_module_tree, METH_VARARGS, "send_module_tree(track, payload, step) -> result code"},
    {"send_summaries", core_send_summaries, METH_VARARGS, "send_summaries(track, entries, step) -> result code"},
    {"cuda_staging_usable", core_cuda_staging_usable, METH_NOARGS, "whether CUDA tensors can be staged on the GPU"},
    {"count_sync_copy", core_count_sync_copy, METH_O, "counts a CUDA tensor copied to the host by the caller"},
    {"set_render_hint", core_set_render_hint, METH_VARARGS, "set_render_hint(stream, hint)"},
    {"render_hint", core_render_hint, METH_O, "render_hint(stream) -> hint"},
    {"set_label", core_set_label, METH_O, "set_label(text)"},
    {"set_enabled", core_set_enabled, METH_O, "set_enabled(bool)"},
    {"enabled", core_enabled, METH_NOARGS, "enabled() -> bool"},
    {"step", core_step, METH_NOARGS, "step() -> int"},
    {"set_step", core_set_step, METH_O, "set_step(int)"},
    {"next_step", core_next_step, METH_NOARGS, "next_step() -> int"},
    {"connected", core_connected, METH_NOARGS, "connected() -> bool"},
    {"hold_evidence", core_hold_evidence, METH_VARARGS,
     "hold_evidence(from_step, until_step): whole tensors of those steps are held, not dropped, by a full ring"},
    {"wait_until_read", core_wait_until_read, METH_O,
     "wait_until_read(timeout_ms) -> bool: whether the daemon read everything sent so far in time"},
    {"rank", core_rank, METH_NOARGS, "rank() -> int"},
    {"stats", core_stats, METH_NOARGS, "stats() -> dict of the client's counters and notes"},
    {"close", core_close, METH_NOARGS, "disconnects; every later call raises ValueError"},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef core_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(CoreObject, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot core_slots[] = {
    {Py_tp_doc, const_cast<char*>("Core(options: dict): a tensorscope client core (use tensorscope.Client)")},
    {Py_tp_init, reinterpret_cast<void*>(core_init)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(core_dealloc)},
    {Py_tp_methods, core_methods},
    {Py_tp_members, core_members},
    {0, nullptr},
};

PyType_Spec core_spec = {"tensorscope._native.Core", sizeof(CoreObject), 0, Py_TPFLAGS_DEFAULT, core_slots};

// session_error(name) -> why the session name is invalid, or None.
PyObject* session_error(PyObject*, PyObject* name_object) {
  std::string name;
  if (!utf8(name_object, "session", &name)) return nullptr;
  const tensorscope::Status status = tensorscope::validate_session_name(name);
  if (status) Py_RETURN_NONE;
  return text(status.message());
}

// resolve_options(options) -> the options checked against the one table of client
// options (core_option_table.h) and completed with its defaults; TypeError/ValueError in
// the words the C++ client logs.
PyObject* resolve_options(PyObject*, PyObject* dict) {
  CoreOptions options;
  if (!tensorscope::python::read_core_options(dict, &options)) return nullptr;
  return tensorscope::python::core_options_dict(options);
}

// stream_name_error(name) -> why `name` cannot be a stream (or track) name, or None: the
// client core's rule (empty, 128 bytes or longer, control characters).
PyObject* stream_name_error(PyObject*, PyObject* name_object) {
  std::string name;
  if (!utf8(name_object, "name", &name)) return nullptr;
  const std::string why = tensorscope::stream_name_refusal(name);
  if (why.empty()) Py_RETURN_NONE;
  return text(why);
}

// run_info(rank, versions) -> the JSON text of what this process is (client/core/run_info.h:
// the document a client sends the daemon at registration); `versions` a dict of str.
PyObject* run_info(PyObject*, PyObject* args) {
  long long rank = 0;
  PyObject* versions_object = nullptr;
  if (!PyArg_ParseTuple(args, "LO", &rank, &versions_object)) return nullptr;
  if (!PyDict_Check(versions_object)) {
    PyErr_SetString(PyExc_TypeError, "versions must be a dict of str");
    return nullptr;
  }
  nlohmann::json versions = nlohmann::json::object();
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(versions_object, &pos, &key, &value)) {
    std::string k, v;
    if (!utf8(key, "a version name", &k) || !utf8(value, "a version", &v)) return nullptr;
    versions[k] = v;
  }
  std::string json;
  Py_BEGIN_ALLOW_THREADS  // reads /proc
      try {
    json = tensorscope::collect_run_info(static_cast<int>(rank), versions).dump(2);
  } catch (...) {
    json = "{}";
  }
  Py_END_ALLOW_THREADS return text(json);
}

// daemon_status(runtime_dir, session, timeout_ms) -> the JSON text of the daemon's status,
// or None when no daemon answers (shared/status_query.h).
PyObject* daemon_status(PyObject*, PyObject* args) {
  PyObject *dir_object = nullptr, *session_object = nullptr;
  int timeout_ms = 0;
  if (!PyArg_ParseTuple(args, "OOi", &dir_object, &session_object, &timeout_ms)) return nullptr;
  std::string dir, session;
  if (!utf8(dir_object, "runtime_dir", &dir) || !utf8(session_object, "session", &session)) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS try {
    auto status = tensorscope::query_daemon_status(dir, session, timeout_ms);
    if (status) json = status->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    json.clear();
  }
  Py_END_ALLOW_THREADS if (json.empty()) Py_RETURN_NONE;
  return text(json);
}

// `path_of(stream, step, rank)` of the arguments (stream, step, rank).
PyObject* stream_file_path(PyObject* args, std::string (*path_of)(const std::string&, int64_t, int)) {
  PyObject* stream_object = nullptr;
  long long step = 0;
  int rank = 0;
  if (!PyArg_ParseTuple(args, "OLi", &stream_object, &step, &rank)) return nullptr;
  std::string stream;
  if (!utf8(stream_object, "stream", &stream)) return nullptr;
  return text(path_of(stream, step, rank));
}

// dump_path(stream, step, rank) -> "dumps/step_<step>/<safe stream>_rank<rank>.npy"
PyObject* dump_path(PyObject*, PyObject* args) { return stream_file_path(args, tensorscope::recording::npy_dump_path); }

// labels_dump_path(stream, step, rank) -> "dumps/step_<step>/<safe stream>_rank<rank>.labels.npy"
PyObject* labels_dump_path(PyObject*, PyObject* args) {
  return stream_file_path(args, tensorscope::recording::npy_labels_path);
}

// write_npy(path, capsule, as_bool): the C-contiguous CPU tensor of a DLPack capsule as
// an .npy file, written as the daemon's .npy sink writes it (recording::write_npy:
// atomic, fsynced). None, or OSError/ValueError saying why.
PyObject* write_npy(PyObject*, PyObject* args) {
  PyObject* path_object = nullptr;
  PyObject* capsule = nullptr;
  int as_bool = 0;
  if (!PyArg_ParseTuple(args, "OOp", &path_object, &capsule, &as_bool)) return nullptr;
  std::string path, error;
  if (!utf8(path_object, "path", &path)) return nullptr;
  const tensorscope::dlpack::DLTensor* tensor = capsule_tensor(capsule, &error);
  tensorscope::TensorRef ref;
  if (tensor != nullptr) error = tensorscope::dlpack::to_tensor_ref(*tensor, as_bool != 0, 0, &ref);
  if (error.empty() && ref.device != tensorscope::DeviceType::kCpu) error = "the tensor is not on the CPU";
  if (error.empty() && !tensorscope::is_c_contiguous(ref)) error = "the tensor is not C-contiguous";
  if (!error.empty()) {
    PyErr_SetString(PyExc_ValueError, error.c_str());
    return nullptr;
  }
  const std::vector<int64_t> shape(ref.shape, ref.shape + ref.ndim);
  const size_t bytes = tensorscope::element_count(ref) * tensorscope::wire::dtype_size(ref.dtype);
  tensorscope::Status written;
  Py_BEGIN_ALLOW_THREADS written = tensorscope::recording::write_npy(path, ref.dtype, shape, ref.data, bytes);
  Py_END_ALLOW_THREADS if (!written) {
    PyErr_SetString(PyExc_OSError, written.message().c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"dump_path", dump_path, METH_VARARGS,
     "dump_path(stream, step, rank) -> the .npy sink's file of a stream, relative to the run folder"},
    {"labels_dump_path", labels_dump_path, METH_VARARGS,
     "labels_dump_path(stream, step, rank) -> the .npy sink's file of a stream's row labels"},
    {"write_npy", write_npy, METH_VARARGS,
     "write_npy(path, capsule, as_bool) -> None: a contiguous CPU tensor as the .npy sink writes it"},
    {"session_error", session_error, METH_O, "session_error(name) -> why the session name is invalid, or None"},
    {"resolve_options", resolve_options, METH_O,
     "resolve_options(options) -> every client option, checked, with defaults for those not given"},
    {"stream_name_error", stream_name_error, METH_O,
     "stream_name_error(name) -> why the name cannot be a stream or track name, or None"},
    {"run_info", run_info, METH_VARARGS, "run_info(rank, versions) -> JSON text of this process's run_info"},
    {"daemon_status", daemon_status, METH_VARARGS,
     "daemon_status(runtime_dir, session, timeout_ms) -> the daemon's status as JSON text, or None"},
    {"format_module_tree", format_module_tree, METH_VARARGS,
     "format_module_tree(calls, omitted) -> the payload of a step's module tree record"},
    {"summarize", tensorscope::python::summarize, METH_VARARGS,
     "summarize(capsule, as_bool[, cast]) -> (numel, nan, inf, zeros, l2, max_abs, mean, std, numerics) of a CPU "
     "tensor, or why not"},
    {"update_ratio", tensorscope::python::update_ratio, METH_VARARGS,
     "update_ratio(now, before) -> |now - before| / |before| of two CPU tensors, or why not"},
    {"summary_from_device_values", tensorscope::python::summary_from_device_values, METH_VARARGS,
     "summary_from_device_values(values, numel, scaled[, ratio, cast]) -> (numel, nan, inf, zeros, l2, max_abs, "
     "mean, std, ratio, numerics) of a summary reduced on a GPU (DEVICE_SUMMARY_FIELDS ...), or why not"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "_native",
                          "tensorscope's native client core",
                          -1,
                          module_methods,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

// The vocabularies the C++ side defines, for the package to derive its own from:
// RENDER_MODES {name: wire value} ("default" and every wire::RenderHint), PUSH_RESULTS
// (PushResult names by code), TENSOR_KINDS {name: wire::TensorKind value} of tensors,
// RECORD_KINDS {name: value} of every record (tensors, module trees, summaries),
// CLIENT_OPTIONS {name: default} (core_option_table.h: what Core(options) takes),
// CALL_STACKING {mode: calls of a step with a stream of their own, -1 all},
// STACKED_CALLS {suffix, row_length, max_rows, hold_bytes} (tensorscope/call_stacking.h)
// and EVALUATION_CALLS (the names of tensorscope/evaluation_calls.h, by value).
bool add_evaluation_calls(PyObject* module) {
  PyObject* names = PyTuple_New(static_cast<Py_ssize_t>(tensorscope::kEvaluationCallsNames.size()));
  if (names == nullptr) return false;
  for (size_t m = 0; m < tensorscope::kEvaluationCallsNames.size(); ++m) {
    PyObject* name = PyUnicode_FromString(tensorscope::kEvaluationCallsNames[m]);
    if (name == nullptr || PyTuple_SetItem(names, static_cast<Py_ssize_t>(m), name) != 0) {  // (steals name)
      Py_DECREF(names);
      return false;
    }
  }
  if (PyModule_AddObject(module, "EVALUATION_CALLS", names) != 0) {
    Py_DECREF(names);
    return false;
  }
  return true;
}

bool add_call_stacking(PyObject* module) {
  PyObject* modes = PyDict_New();
  PyObject* stacked = PyDict_New();
  bool ok = modes != nullptr && stacked != nullptr;
  auto put = [&ok](PyObject* dict, const char* name, PyObject* value) {
    ok = ok && value != nullptr && PyDict_SetItemString(dict, name, value) == 0;
    Py_XDECREF(value);
  };
  for (size_t m = 0; ok && m < tensorscope::kCallStackingNames.size(); ++m) {
    const auto mode = static_cast<tensorscope::CallStacking>(m);
    put(modes, tensorscope::to_string(mode), PyLong_FromLong(tensorscope::separate_calls(mode)));
  }
  const std::string suffix(tensorscope::kStackedCallsSuffix);
  put(stacked, "suffix", PyUnicode_FromStringAndSize(suffix.data(), static_cast<Py_ssize_t>(suffix.size())));
  put(stacked, "row_length", PyLong_FromLongLong(tensorscope::kStackedRowLength));
  put(stacked, "max_rows", PyLong_FromSize_t(tensorscope::kMaxStackedRows));
  put(stacked, "hold_bytes", PyLong_FromSize_t(tensorscope::kStackedHoldBytes));
  ok = ok && PyModule_AddObject(module, "CALL_STACKING", modes) == 0;
  if (!ok) Py_XDECREF(modes);
  const bool stacked_ok = ok && PyModule_AddObject(module, "STACKED_CALLS", stacked) == 0;
  if (!stacked_ok) Py_XDECREF(stacked);
  return stacked_ok;
}

bool add_vocabularies(PyObject* module) {
  PyObject* modes = PyDict_New();
  PyObject* results = PyTuple_New(static_cast<Py_ssize_t>(tensorscope::kPushResultNames.size()));
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
    for (size_t r = 0; r < tensorscope::kPushResultNames.size(); ++r) {
      PyObject* name = PyUnicode_FromString(tensorscope::kPushResultNames[r].data());
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
  PyObject* options = records_ok ? tensorscope::python::core_options_dict(CoreOptions{}) : nullptr;
  const bool options_ok = options != nullptr && PyModule_AddObject(module, "CLIENT_OPTIONS", options) == 0;
  if (!options_ok) Py_XDECREF(options);
  return options_ok;
}

}  // namespace

PyMODINIT_FUNC PyInit__native() {
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&core_spec);
  if (type == nullptr || PyModule_AddObject(module, "Core", type) != 0) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return nullptr;
  }
  core_type = type;                                   // (the module holds it for its life)
  push_gate_type = PyType_FromSpec(&push_gate_spec);  // kept for the module's life
  if (push_gate_type == nullptr) {
    Py_DECREF(module);
    return nullptr;
  }
#ifdef TENSORSCOPE_WITH_CUDA
  PyModule_AddIntConstant(module, "WITH_CUDA", 1);
#else
  PyModule_AddIntConstant(module, "WITH_CUDA", 0);
#endif
  PyModule_AddStringConstant(module, "VERSION", TENSORSCOPE_VERSION);
  PyModule_AddStringConstant(module, "SEPARATION_TABLE_HEADER", tensorscope::recording::kSeparationTableHeader);
  PyModule_AddStringConstant(module, "SUMMARY_TABLE_HEADER", tensorscope::recording::kSummaryTableHeader);
  if (!add_vocabularies(module) || !add_call_stacking(module) || !add_evaluation_calls(module) ||
      !tensorscope::python::add_device_summary_fields(module) || !tensorscope::python::add_tree_log(module, core_of) ||
      !tensorscope::python::add_output_hooks(module, core_of)) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
