// row_labels_args.cc — see row_labels_args.h.
#include "row_labels_args.h"

#include <cstring>
#include <vector>

#include "dlpack_ref.h"
#include "py_args.h"
#include "tensor_ref.h"

namespace tensorscope::python {

std::string row_labels_from_python(PyObject* labels, RowLabels* out) {
  if (PyList_Check(labels)) {
    const Py_ssize_t n = PyList_Size(labels);
    if (static_cast<uint64_t>(n) > kMaxRowLabels) {
      return std::to_string(n) + " labels: at most " + std::to_string(kMaxRowLabels) + " rows can be labelled";
    }
    std::vector<std::string> text(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!utf8(PyList_GetItem(labels, i), "a label", &text[static_cast<size_t>(i)])) {
        PyErr_Clear();
        return "label " + std::to_string(i) + " is not text";
      }
    }
    auto parsed = row_labels_from_text(text);
    if (!parsed) return parsed.message();
    *out = std::move(*parsed);
    return {};
  }
  std::string error;
  const dlpack::DLTensor* tensor = capsule_tensor(labels, &error);
  if (tensor == nullptr) {
    PyErr_Clear();
    return error.empty() ? "labels are neither a list of str nor an int64 tensor" : error;
  }
  TensorRef ref;
  error = dlpack::to_tensor_ref(*tensor, false, 0, &ref);
  if (!error.empty()) return error;
  if (ref.dtype != wire::DType::kInt64 || ref.ndim != 1 || ref.device != DeviceType::kCpu || !is_c_contiguous(ref)) {
    return "labels must be a 1-D contiguous int64 tensor on the CPU";
  }
  if (static_cast<uint64_t>(ref.shape[0]) > kMaxRowLabels) {
    return std::to_string(ref.shape[0]) + " labels: at most " + std::to_string(kMaxRowLabels) + " rows can be labelled";
  }
  out->names.clear();
  out->values.resize(static_cast<size_t>(ref.shape[0]));
  if (!out->values.empty()) std::memcpy(out->values.data(), ref.data, out->values.size() * sizeof(int64_t));
  return {};
}

}  // namespace tensorscope::python
