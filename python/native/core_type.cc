// core_type.cc — see core_type.h.
#include "core_type.h"

#include <structmember.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core_options_args.h"
#include "cost_meter.h"
#include "dlpack_ref.h"
#include "heap_types.h"
#include "module_tree_args.h"
#include "push_calls.h"
#include "py_args.h"
#include "row_labels_args.h"
#include "summaries.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::python {
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

PyObject* core_type = nullptr;  // made by add_core

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
      put(d, "cuda_failed", PyLong_FromUnsignedLongLong(s.cuda_failed)) &&
      put(d, "own_time", PyFloat_FromDouble(s.own_time)) && put(d, "own_time_note", text(s.own_time_note));
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
  const CostSpan span;
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

}  // namespace

ClientCore* core_of(PyObject* object) {
  if (core_type == nullptr || !PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(core_type))) return nullptr;
  return reinterpret_cast<CoreObject*>(object)->core;
}

bool add_core(PyObject* module) {
  PyObject* type = PyType_FromSpec(&core_spec);
  if (type == nullptr || PyModule_AddObject(module, "Core", type) != 0) {
    Py_XDECREF(type);
    return false;
  }
  core_type = type;                                   // (the module holds it for its life)
  push_gate_type = PyType_FromSpec(&push_gate_spec);  // kept for the module's life
  return push_gate_type != nullptr;
}

}  // namespace tensorscope::python
