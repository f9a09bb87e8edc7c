// module_tree_args.cc — see module_tree_args.h.
#include "module_tree_args.h"

#include <string>
#include <vector>

#include "py_args.h"

namespace tensorscope::python {
namespace {

bool describe(PyObject* item, std::string* out) {
  if (item == Py_None) {
    out->clear();
    return true;
  }
  if (PyUnicode_Check(item)) return utf8(item, "a tensor description", out);  // (formatted already)
  if (!PyTuple_Check(item) || PyTuple_Size(item) != 3) {
    PyErr_SetString(PyExc_TypeError, "a tensor description must be a (dtype, shape, device) tuple or its text");
    return false;
  }
  std::string dtype, device;
  if (!utf8(PyTuple_GetItem(item, 0), "dtype", &dtype) || !utf8(PyTuple_GetItem(item, 2), "device", &device)) {
    return false;
  }
  PyObject* shape = PyTuple_GetItem(item, 1);
  if (!PyTuple_Check(shape)) {
    PyErr_SetString(PyExc_TypeError, "shape must be a tuple of ints");
    return false;
  }
  std::vector<int64_t> sizes(static_cast<size_t>(PyTuple_Size(shape)));
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!non_negative(PyTuple_GetItem(shape, static_cast<Py_ssize_t>(d)), "a size", &sizes[d])) return false;
  }
  *out = describe_tensor(dtype, sizes.data(), sizes.size(), device);
  return true;
}

bool read_call(PyObject* item, ModuleTreeCall* call) {
  if (!PyTuple_Check(item) || (PyTuple_Size(item) != 6 && PyTuple_Size(item) != 7)) {
    PyErr_SetString(PyExc_TypeError, "a call must be a (thread, call, path, type, inputs, output[, value]) tuple");
    return false;
  }
  if (PyTuple_Size(item) == 7) {
    if (!utf8(PyTuple_GetItem(item, 6), "value", &call->value)) return false;
    if (!call->value.empty() && call->value != "=" && call->value != "~" && call->value != "?") {
      PyErr_SetString(PyExc_ValueError, "a call's value must be \"\", \"=\", \"~\" or \"?\"");
      return false;
    }
  }
  int64_t thread = 0, number = 0;
  if (!non_negative(PyTuple_GetItem(item, 0), "thread", &thread) ||
      !non_negative(PyTuple_GetItem(item, 1), "call", &number) ||
      !utf8(PyTuple_GetItem(item, 2), "path", &call->path) || !utf8(PyTuple_GetItem(item, 3), "type", &call->type)) {
    return false;
  }
  if (thread > UINT32_MAX || number > UINT32_MAX) {
    PyErr_SetString(PyExc_ValueError, "thread and call numbers must fit in 32 bits");
    return false;
  }
  call->thread = static_cast<uint32_t>(thread);
  call->call = static_cast<uint32_t>(number);
  PyObject* inputs = PyTuple_GetItem(item, 4);
  if (!PyList_Check(inputs)) {
    PyErr_SetString(PyExc_TypeError, "inputs must be a list of tensor descriptions");
    return false;
  }
  const Py_ssize_t n = PyList_Size(inputs);
  for (Py_ssize_t i = 0; i < n && call->inputs.size() < ModuleTree::kMaxInputs; ++i) {
    std::string text;
    if (!describe(PyList_GetItem(inputs, i), &text)) return false;
    if (!text.empty()) call->inputs.push_back(std::move(text));
  }
  return describe(PyTuple_GetItem(item, 5), &call->output);
}

}  // namespace

bool module_tree_from_python(PyObject* calls, uint64_t omitted, ModuleTree* out) {
  if (!PyList_Check(calls)) {
    PyErr_SetString(PyExc_TypeError, "calls must be a list");
    return false;
  }
  out->calls.clear();
  out->omitted = omitted;
  const Py_ssize_t n = PyList_Size(calls);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (out->calls.size() >= ModuleTree::kMaxCalls) {
      out->omitted += static_cast<uint64_t>(n - i);
      break;
    }
    ModuleTreeCall call;
    if (!read_call(PyList_GetItem(calls, i), &call)) return false;
    out->calls.push_back(std::move(call));
  }
  return true;
}

}  // namespace tensorscope::python
