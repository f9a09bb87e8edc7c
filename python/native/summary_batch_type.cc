// summary_batch_type.cc — see summary_batch_type.h.
#include "summary_batch_type.h"

#include <string>
#include <vector>

#include "fused_summary_kernel.h"
#include "heap_types.h"
#include "py_args.h"

namespace tensorscope::python {
namespace {

struct BatchObject {
  PyObject_HEAD
  fused::SummaryBatch* batch;
};

PyObject* batch_type = nullptr;  // made by add_summary_batch, kept for the module's life

int batch_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (PyTuple_Size(args) != 0 || (kwargs != nullptr && PyDict_Size(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "SummaryBatch() takes no arguments");
    return -1;
  }
  auto* object = reinterpret_cast<BatchObject*>(self);
  delete object->batch;
  object->batch = new fused::SummaryBatch();
  return 0;
}

void batch_dealloc(PyObject* self) {
  auto* object = reinterpret_cast<BatchObject*>(self);
  delete object->batch;  // (waits for the passes in flight)
  object->batch = nullptr;
  free_instance(self);
}

fused::SummaryBatch* batch_or_error(PyObject* self) {
  fused::SummaryBatch* batch = reinterpret_cast<BatchObject*>(self)->batch;
  if (batch == nullptr) PyErr_SetString(PyExc_ValueError, "SummaryBatch.__init__ was not called");
  return batch;
}

bool ticket_of(PyObject* object, uint64_t* ticket) {
  *ticket = PyLong_AsUnsignedLongLong(object);
  return !(*ticket == static_cast<uint64_t>(-1) && PyErr_Occurred());
}

PyObject* batch_flush(PyObject* self, PyObject*) {
  fused::SummaryBatch* batch = batch_or_error(self);
  return batch != nullptr ? text(batch->flush()) : nullptr;
}

PyObject* batch_cancel(PyObject* self, PyObject* arg) {
  fused::SummaryBatch* batch = batch_or_error(self);
  uint64_t ticket = 0;
  if (batch == nullptr || !ticket_of(arg, &ticket)) return nullptr;
  batch->cancel(ticket);
  Py_RETURN_NONE;
}

PyObject* batch_take(PyObject* self, PyObject* arg) {
  fused::SummaryBatch* batch = batch_or_error(self);
  uint64_t ticket = 0;
  if (batch == nullptr || !ticket_of(arg, &ticket)) return nullptr;
  std::vector<double> values;
  std::string why;
  switch (batch->take(ticket, &values, &why)) {
    case fused::SummaryBatch::State::kWaiting: Py_RETURN_NONE;
    case fused::SummaryBatch::State::kFailed: return text(why);
    case fused::SummaryBatch::State::kUnknown: return text("no such summary ticket");
    case fused::SummaryBatch::State::kReady: break;
  }
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(values.size()));
  for (size_t i = 0; list != nullptr && i < values.size(); ++i) {
    PyObject* v = PyFloat_FromDouble(values[i]);
    if (v == nullptr) {
      Py_CLEAR(list);
      break;
    }
    PyList_SetItem(list, static_cast<Py_ssize_t>(i), v);  // steals v
  }
  return list;
}

PyObject* batch_gathered(PyObject* self, void*) {
  fused::SummaryBatch* batch = batch_or_error(self);
  return batch != nullptr ? PyLong_FromSize_t(batch->gathered()) : nullptr;
}

PyObject* batch_passes(PyObject* self, void*) {
  fused::SummaryBatch* batch = batch_or_error(self);
  return batch != nullptr ? PyLong_FromUnsignedLongLong(batch->passes()) : nullptr;
}

PyMethodDef batch_methods[] = {
    {"flush", batch_flush, METH_NOARGS, "flush() -> '' or why: queues what was gathered"},
    {"cancel", batch_cancel, METH_O, "cancel(ticket): leaves a gathered ticket out"},
    {"take", batch_take, METH_O, "take(ticket) -> None (on the way), the values, or why there are none"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef batch_getset[] = {
    {"gathered", batch_gathered, nullptr, "tickets waiting for a flush", nullptr},
    {"passes", batch_passes, nullptr, "passes queued so far", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot batch_slots[] = {
    {Py_tp_doc, const_cast<char*>("SummaryBatch(): a track's summaries gathered into fused passes")},
    {Py_tp_init, reinterpret_cast<void*>(batch_init)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(batch_dealloc)},
    {Py_tp_methods, batch_methods},
    {Py_tp_getset, batch_getset},
    {0, nullptr},
};

PyType_Spec batch_spec = {"tensorscope._native.SummaryBatch", sizeof(BatchObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, batch_slots};

}  // namespace

fused::SummaryBatch* summary_batch_of(PyObject* object) {
  if (batch_type == nullptr || !PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(batch_type))) return nullptr;
  return reinterpret_cast<BatchObject*>(object)->batch;
}

bool add_summary_batch(PyObject* module) {
  if (PyModule_AddIntConstant(module, "FUSED_KERNEL", fused::kernel_available() ? 1 : 0) != 0 ||
      PyModule_AddIntConstant(module, "FUSED_MAX_GATHERED", static_cast<long>(fused::SummaryBatch::kMaxGathered)) !=
          0) {
    return false;
  }
  batch_type = PyType_FromSpec(&batch_spec);
  if (batch_type == nullptr) return false;
  Py_INCREF(batch_type);
  if (PyModule_AddObject(module, "SummaryBatch", batch_type) != 0) {
    Py_DECREF(batch_type);
    return false;
  }
  return true;
}

}  // namespace tensorscope::python
