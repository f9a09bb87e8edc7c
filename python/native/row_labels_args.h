// row_labels_args.h — push(..., labels=...)'s labels as the native core takes them
// (shared/row_labels_format.h), from what tensorscope._tensors.row_labels hands over:
//   a list of str         class names, one per row (numbered in sorted order)
//   a DLPack capsule      a 1-D C-contiguous int64 CPU tensor: one class number per row
//
// Used by module.cc (Core.send). Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

#include <string>

#include "tensorscope/shared/row_labels_format.h"

namespace tensorscope::python {

// Fills `out`; returns why not (empty on success). Never leaves a Python error set.
std::string row_labels_from_python(PyObject* labels, RowLabels* out);

}  // namespace tensorscope::python
