// cost_span.cc — see cost_span.h.
#include "cost_span.h"

#include "cost_meter.h"
#include "heap_types.h"
#include "py_args.h"

namespace tensorscope::python {
namespace {

struct TimedCallObject {
  PyObject_HEAD
  PyObject* fn;
  PyObject* bound;  // a tuple
};

PyObject* timed_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  const Py_ssize_t n = PyTuple_Size(args);
  if (n < 1 || !PyCallable_Check(PyTuple_GetItem(args, 0)) || (kwargs != nullptr && PyDict_Size(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "TimedCall(fn, *bound): fn must be callable (no keyword arguments)");
    return nullptr;
  }
  PyObject* bound = PyTuple_GetSlice(args, 1, n);
  if (bound == nullptr) return nullptr;
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
  auto* self = reinterpret_cast<TimedCallObject*>(alloc(type, 0));
  if (self == nullptr) {
    Py_DECREF(bound);
    return nullptr;
  }
  self->fn = PyTuple_GetItem(args, 0);
  Py_INCREF(self->fn);
  self->bound = bound;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* timed_call(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<TimedCallObject*>(self_object);
  CostSpan span;
  PyObject* all = PyTuple_Size(self->bound) == 0 ? (Py_INCREF(args), args) : PySequence_Concat(self->bound, args);
  if (all == nullptr) return nullptr;
  PyObject* result = PyObject_Call(self->fn, all, kwargs);
  Py_DECREF(all);
  return result;
}

int timed_traverse(PyObject* self_object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<TimedCallObject*>(self_object);
  Py_VISIT(Py_TYPE(self_object));
  Py_VISIT(self->fn);
  Py_VISIT(self->bound);
  return 0;
}

int timed_clear(PyObject* self_object) {
  auto* self = reinterpret_cast<TimedCallObject*>(self_object);
  Py_CLEAR(self->fn);
  Py_CLEAR(self->bound);
  return 0;
}

void timed_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  timed_clear(self_object);
  free_instance(self_object);
}

PyType_Slot timed_slots[] = {
    {Py_tp_doc, const_cast<char*>("TimedCall(fn, *bound): fn(*bound, *args) as one span of the cost meter")},
    {Py_tp_new, reinterpret_cast<void*>(timed_new)},
    {Py_tp_call, reinterpret_cast<void*>(timed_call)},
    {Py_tp_traverse, reinterpret_cast<void*>(timed_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(timed_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(timed_dealloc)},
    {0, nullptr},
};

PyType_Spec timed_spec = {"tensorscope._native.TimedCall", sizeof(TimedCallObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE, timed_slots};

PyObject* span_enter(PyObject* self, PyObject*) {
  own_cost().enter();
  Py_INCREF(self);
  return self;
}

PyObject* span_exit(PyObject*, PyObject*) {
  own_cost().leave();
  Py_RETURN_FALSE;
}

PyMethodDef span_methods[] = {
    {"__enter__", span_enter, METH_NOARGS, "begins a span"},
    {"__exit__", span_exit, METH_VARARGS, "ends it"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot span_slots[] = {
    {Py_tp_doc, const_cast<char*>("CostSpan(): a with-block that is one span of the cost meter")},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_methods, span_methods},
    {0, nullptr},
};

PyType_Spec span_spec = {"tensorscope._native.CostSpan", sizeof(PyObject), 0, Py_TPFLAGS_DEFAULT, span_slots};

PyObject* own_cost_now(PyObject*, PyObject*) {
  return Py_BuildValue("(dN)", own_cost().last_fraction(), text(own_cost().note()));
}

PyMethodDef functions[] = {
    {"own_cost", own_cost_now, METH_NOARGS,
     "own_cost() -> (share of the wall time in tensorscope over the last window or -1, what was said of it)"},
    {nullptr, nullptr, 0, nullptr},
};

bool add_type(PyObject* module, PyType_Spec* spec, const char* name) {
  PyObject* type = PyType_FromSpec(spec);
  if (type == nullptr || PyModule_AddObject(module, name, type) != 0) {
    Py_XDECREF(type);
    return false;
  }
  return true;
}

}  // namespace

bool add_cost_span(PyObject* module) {
  return add_type(module, &timed_spec, "TimedCall") && add_type(module, &span_spec, "CostSpan") &&
      PyModule_AddFunctions(module, functions) == 0;
}

}  // namespace tensorscope::python
