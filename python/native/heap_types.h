// heap_types.h — what the extension's types (made with PyType_FromSpec, stable ABI) share:
// the end of their dealloc, reading a flag attribute, what a weak reference refers to, and
// the inert copy a hook becomes in a copy or pickle of the model.
//
// Used by module.cc, tree_log.cc and output_hook.cc. Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

namespace tensorscope::python {

// The end of a heap type's dealloc (after untracking and clearing): frees `self` with the
// type's tp_free and releases the instance's reference to its type.
void free_instance(PyObject* self);

// 1 when attribute `name` of `object` is true, 0 when false, -1 with an error set.
int attribute_truth(PyObject* object, PyObject* name);

// What weak reference `ref` refers to (borrowed), or None once it is gone.
PyObject* referent(PyObject* ref);

// A hook's __deepcopy__ and __reduce__: `inert_hook()`, and (inert_hook, ()); null with a
// TypeError when inert_hook is null (the hook is being collected).
PyObject* inert_copy(PyObject* inert_hook);
PyObject* inert_pickle(PyObject* inert_hook);

}  // namespace tensorscope::python
