// py_args.cc — see py_args.h.
#include "py_args.h"

namespace tensorscope::python {

bool utf8(PyObject* object, const char* what, std::string* out) {
  if (!PyUnicode_Check(object)) {
    PyErr_Format(PyExc_TypeError, "%s must be a str", what);
    return false;
  }
  PyObject* bytes = PyUnicode_AsUTF8String(object);
  if (bytes == nullptr) return false;
  char* data = nullptr;
  Py_ssize_t size = 0;
  const bool ok = PyBytes_AsStringAndSize(bytes, &data, &size) == 0;
  if (ok) out->assign(data, static_cast<size_t>(size));
  Py_DECREF(bytes);
  return ok;
}

bool Utf8Cache::utf8(PyObject* object, const char* what, const std::string** out) {
  for (size_t i = 0; i < kSlots; ++i) {
    if (objects_[i] == object) {
      *out = &texts_[i];
      return true;
    }
  }
  std::string text;
  if (!python::utf8(object, what, &text)) return false;
  const size_t slot = next_;
  next_ = (next_ + 1) % kSlots;
  Py_XDECREF(objects_[slot]);
  Py_INCREF(object);  // held: its address cannot be another str's while cached
  objects_[slot] = object;
  texts_[slot] = std::move(text);
  *out = &texts_[slot];
  return true;
}

bool put(PyObject* dict, const char* key, PyObject* value) {
  const bool ok = value != nullptr && PyDict_SetItemString(dict, key, value) == 0;
  Py_XDECREF(value);
  return ok;
}

PyObject* text(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
}

bool evaluation_call(PyObject* training) {
  if (training == nullptr || !PyTuple_Check(training) || PyTuple_Size(training) != 2) return false;
  PyObject* flag = PyObject_GetAttrString(PyTuple_GetItem(training, 0), "training");
  int truth = flag != nullptr ? PyObject_IsTrue(flag) : -1;
  Py_XDECREF(flag);
  if (truth == 1) {
    PyObject* enabled = PyObject_CallObject(PyTuple_GetItem(training, 1), nullptr);
    truth = enabled != nullptr ? PyObject_IsTrue(enabled) : -1;
    Py_XDECREF(enabled);
  }
  PyErr_Clear();
  return truth == 0;
}

bool non_negative(PyObject* object, const char* what, int64_t* out) {
  if (!PyLong_Check(object)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int", what);
    return false;
  }
  const long long value = PyLong_AsLongLong(object);
  if (value == -1 && PyErr_Occurred()) return false;
  if (value < 0) {
    PyErr_Format(PyExc_ValueError, "%s must not be negative", what);
    return false;
  }
  *out = static_cast<int64_t>(value);
  return true;
}

const dlpack::DLTensor* capsule_tensor(PyObject* capsule, std::string* error) {
  using namespace dlpack;
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    return managed != nullptr ? &managed->dl_tensor : nullptr;
  }
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    if (managed == nullptr) return nullptr;
    if (managed->version.major > kSupportedMajorVersion) {
      *error = "DLPack version " + std::to_string(managed->version.major) + " is not supported";
      return nullptr;
    }
    return &managed->dl_tensor;
  }
  *error = "not an unused DLPack capsule";
  return nullptr;
}

}  // namespace tensorscope::python
