// heap_types.cc — see heap_types.h.
#include "heap_types.h"

namespace tensorscope::python {

void free_instance(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  auto free_fn = reinterpret_cast<freefunc>(PyType_GetSlot(type, Py_tp_free));
  free_fn(self);
  Py_DECREF(type);
}

int attribute_truth(PyObject* object, PyObject* name) {
  PyObject* value = PyObject_GetAttr(object, name);
  if (value == nullptr) return -1;
  const int is = PyObject_IsTrue(value);
  Py_DECREF(value);
  return is;
}

PyObject* referent(PyObject* ref) {
  PyObject* object = PyWeakref_GetObject(ref);
  if (object != nullptr) return object;
  PyErr_Clear();
  return Py_None;
}

namespace {

bool usable(PyObject* inert_hook) {
  if (inert_hook != nullptr) return true;
  PyErr_SetString(PyExc_TypeError, "a hook being collected cannot be copied");
  return false;
}

}  // namespace

PyObject* inert_copy(PyObject* inert_hook) {
  return usable(inert_hook) ? PyObject_CallObject(inert_hook, nullptr) : nullptr;
}

PyObject* inert_pickle(PyObject* inert_hook) {
  return usable(inert_hook) ? Py_BuildValue("(O())", inert_hook) : nullptr;
}

}  // namespace tensorscope::python
