// summaries.cc — see summaries.h.
#include "summaries.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "heap_types.h"
#include "py_args.h"
#include "tensor_summary.h"

namespace tensorscope::python {
namespace {

// The CPU TensorRef of a capsule, or false with why.
bool cpu_ref(PyObject* capsule, bool as_bool, TensorRef* ref, std::string* why) {
  const dlpack::DLTensor* tensor = capsule_tensor(capsule, why);
  if (tensor == nullptr) {
    if (why->empty()) *why = "bad DLPack capsule";
    return false;
  }
  *why = dlpack::to_tensor_ref(*tensor, as_bool, 0, ref);
  return why->empty();
}

uint64_t bytes_of(const TensorRef& ref) { return element_count(ref) * wire::dtype_size(ref.dtype); }

bool number(PyObject* item, const char* what, double* out) {
  *out = PyFloat_AsDouble(item);
  if (*out == -1.0 && PyErr_Occurred()) {
    PyErr_Format(PyExc_TypeError, "a summary's %s must be a number", what);
    return false;
  }
  return true;
}

// The cast format of a Python int, or false with ValueError set.
bool cast_format(int value, CastFormat* out) {
  *out = static_cast<CastFormat>(value);
  if (value == 0 || (value > 0 && value <= kMaxCastFormat)) return true;
  PyErr_Format(PyExc_ValueError, "cast format %d is not one of CAST_FORMATS' values", value);
  return false;
}

// (cast, underflow, overflow, min_abs_nonzero) of `s`, or None without numerics; a new
// reference (null when out of memory).
PyObject* numerics_of(const TensorSummary& s) {
  if (!s.has_numerics()) Py_RETURN_NONE;
  return Py_BuildValue("(iKKd)", static_cast<int>(s.cast_format), static_cast<unsigned long long>(s.underflow_count),
                       static_cast<unsigned long long>(s.overflow_count), s.min_abs_nonzero);
}

// A parameter's PreviousValues; `busy` while a summary without the GIL uses them (another
// thread's summary of the same parameter then takes no ratio rather than racing).
struct PreviousObject {
  PyObject_HEAD
  PreviousValues* values;
  bool busy;
};

PyObject* previous_type = nullptr;  // made by add_previous_values, kept for the module's life

int previous_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (PyTuple_Size(args) != 0 || (kwargs != nullptr && PyDict_Size(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "PreviousValues() takes no arguments");
    return -1;
  }
  auto* object = reinterpret_cast<PreviousObject*>(self);
  if (object->busy) {
    PyErr_SetString(PyExc_RuntimeError, "PreviousValues in use");
    return -1;
  }
  delete object->values;
  object->values = new PreviousValues();
  return 0;
}

void previous_dealloc(PyObject* self) {
  auto* object = reinterpret_cast<PreviousObject*>(self);
  delete object->values;
  object->values = nullptr;
  free_instance(self);
}

PyObject* previous_held(PyObject* self, void*) {
  const PreviousValues* values = reinterpret_cast<PreviousObject*>(self)->values;
  return PyLong_FromUnsignedLongLong(values != nullptr ? values->bytes.size() : 0);
}

PyGetSetDef previous_getset[] = {
    {"bytes", previous_held, nullptr, "bytes of the values held (0 before the first summary)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot previous_slots[] = {
    {Py_tp_doc, const_cast<char*>("PreviousValues(): a parameter's values at its last summarized step")},
    {Py_tp_init, reinterpret_cast<void*>(previous_init)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(previous_dealloc)},
    {Py_tp_getset, previous_getset},
    {0, nullptr},
};

PyType_Spec previous_spec = {"tensorscope._native.PreviousValues", sizeof(PreviousObject), 0, Py_TPFLAGS_DEFAULT,
                             previous_slots};

}  // namespace

bool is_previous_values(PyObject* object) {
  return previous_type != nullptr && Py_TYPE(object) == reinterpret_cast<PyTypeObject*>(previous_type);
}

bool add_previous_values(PyObject* module) {
  previous_type = PyType_FromSpec(&previous_spec);
  if (previous_type == nullptr) return false;
  Py_INCREF(previous_type);
  if (PyModule_AddObject(module, "PreviousValues", previous_type) != 0) {
    Py_DECREF(previous_type);
    return false;
  }
  return true;
}

PyObject* summarize(PyObject*, PyObject* args) {
  PyObject* capsule = nullptr;
  int as_bool = 0, cast = 0;
  if (!PyArg_ParseTuple(args, "Op|i", &capsule, &as_bool, &cast)) return nullptr;
  CastFormat format;
  if (!cast_format(cast, &format)) return nullptr;
  return summary_of_capsule(capsule, as_bool != 0, format);
}

PyObject* summary_of_capsule(PyObject* capsule, bool as_bool, CastFormat cast) {
  TensorRef ref;
  std::string why;
  if (!cpu_ref(capsule, as_bool, &ref, &why)) return text(why);
  return summary_of_ref(ref, cast);
}

PyObject* summary_of_ref(const TensorRef& ref, CastFormat cast, PyObject* previous) {
  std::string why;
  TensorSummary s;
  bool ok = false;
  auto* kept =
      previous != nullptr && is_previous_values(previous) ? reinterpret_cast<PreviousObject*>(previous) : nullptr;
  PreviousValues* values = kept != nullptr && !kept->busy ? kept->values : nullptr;
  if (bytes_of(ref) >= kReleaseGilBytes) {
    if (values != nullptr) kept->busy = true;
    Py_BEGIN_ALLOW_THREADS ok = summarize_cpu(ref, cast, values, &s, &why);
    Py_END_ALLOW_THREADS if (values != nullptr) kept->busy = false;
  } else {
    ok = summarize_cpu(ref, cast, values, &s, &why);
  }
  if (!ok) return text(why);
  PyObject* ratio = Py_None;
  if (s.has_update_ratio) {
    ratio = PyFloat_FromDouble(s.update_ratio);
  } else {
    Py_INCREF(ratio);
  }
  return Py_BuildValue("(KKKKddddNN)", static_cast<unsigned long long>(s.numel),
                       static_cast<unsigned long long>(s.nan_count), static_cast<unsigned long long>(s.inf_count),
                       static_cast<unsigned long long>(s.zero_count), s.l2, s.max_abs, s.mean, s.std, numerics_of(s),
                       ratio);
}

PyObject* update_ratio(PyObject*, PyObject* args) {
  PyObject *now_capsule = nullptr, *before_capsule = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &now_capsule, &before_capsule)) return nullptr;
  TensorRef now, before;
  std::string why;
  if (!cpu_ref(now_capsule, false, &now, &why) || !cpu_ref(before_capsule, false, &before, &why)) return text(why);
  double ratio = 0;
  bool ok = false;
  Py_BEGIN_ALLOW_THREADS ok = update_ratio_cpu(now, before, &ratio, &why);
  Py_END_ALLOW_THREADS if (!ok) return text(why);
  return PyFloat_FromDouble(ratio);
}

PyObject* summary_from_device_values(PyObject*, PyObject* args) {
  PyObject* list = nullptr;
  unsigned long long numel = 0;
  int scaled = 0, ratio = 0, cast = 0;
  if (!PyArg_ParseTuple(args, "OKp|pi", &list, &numel, &scaled, &ratio, &cast)) return nullptr;
  DeviceSummaryLayout layout{scaled != 0, ratio != 0, CastFormat::kNone};
  if (!cast_format(cast, &layout.cast)) return nullptr;
  if (!PyList_Check(list)) {
    PyErr_SetString(PyExc_TypeError, "device summary values must be a list of numbers");
    return nullptr;
  }
  std::vector<double> values(static_cast<size_t>(std::min<Py_ssize_t>(PyList_Size(list), 32)));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!number(PyList_GetItem(list, static_cast<Py_ssize_t>(i)), "device value", &values[i])) return nullptr;
  }
  TensorSummary s;
  std::string why;
  if (!tensorscope::summary_from_device_values(values.data(), values.size(), numel, layout, &s, &why)) {
    return text(why);
  }
  PyObject* update = Py_None;
  if (s.has_update_ratio) {
    update = PyFloat_FromDouble(s.update_ratio);
    if (update == nullptr) return nullptr;
  } else {
    Py_INCREF(update);
  }
  return Py_BuildValue("(KKKKddddNN)", static_cast<unsigned long long>(s.numel),
                       static_cast<unsigned long long>(s.nan_count), static_cast<unsigned long long>(s.inf_count),
                       static_cast<unsigned long long>(s.zero_count), s.l2, s.max_abs, s.mean, s.std, update,
                       numerics_of(s));
}

bool add_device_summary_fields(PyObject* module) {
  const auto names = [](const auto& fields) {
    PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(fields.size()));
    for (size_t i = 0; tuple != nullptr && i < fields.size(); ++i) {
      PyObject* name = PyUnicode_FromString(fields[i]);
      if (name == nullptr || PyTuple_SetItem(tuple, static_cast<Py_ssize_t>(i), name) != 0) {  // steals name
        Py_DECREF(tuple);
        return static_cast<PyObject*>(nullptr);
      }
    }
    return tuple;
  };
  PyObject* fields = names(kDeviceSummaryFields);
  if (fields == nullptr || PyModule_AddObject(module, "DEVICE_SUMMARY_FIELDS", fields) != 0) {
    Py_XDECREF(fields);
    return false;
  }
  PyObject* ratio_fields = names(kDeviceRatioFields);
  if (ratio_fields == nullptr || PyModule_AddObject(module, "DEVICE_RATIO_FIELDS", ratio_fields) != 0) {
    Py_XDECREF(ratio_fields);
    return false;
  }
  PyObject* numerics_fields = names(kDeviceNumericsFields);
  if (numerics_fields == nullptr || PyModule_AddObject(module, "DEVICE_NUMERICS_FIELDS", numerics_fields) != 0) {
    Py_XDECREF(numerics_fields);
    return false;
  }
  // CAST_FORMATS: {name: (value, underflow_at_most, overflow_from)}, shared/cast_formats.h.
  PyObject* formats = PyDict_New();
  for (const CastFormatInfo& f : kCastFormats) {
    PyObject* item = formats != nullptr
        ? Py_BuildValue("(idd)", static_cast<int>(f.format), f.underflow_at_most, f.overflow_from)
        : nullptr;
    const bool added = item != nullptr && PyDict_SetItemString(formats, std::string(f.name).c_str(), item) == 0;
    Py_XDECREF(item);
    if (!added) {
      Py_XDECREF(formats);
      return false;
    }
  }
  if (formats == nullptr || PyModule_AddObject(module, "CAST_FORMATS", formats) != 0) {
    Py_XDECREF(formats);
    return false;
  }
  return true;
}

bool summaries_from_python(PyObject* entries, std::vector<TensorSummary>* out) {
  if (!PyList_Check(entries)) {
    PyErr_SetString(PyExc_TypeError, "summaries must be a list");
    return false;
  }
  const Py_ssize_t n = std::min<Py_ssize_t>(PyList_Size(entries), kMaxSummaryEntries);
  out->reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* e = PyList_GetItem(entries, i);  // borrowed
    if (!PyTuple_Check(e) || PyTuple_Size(e) < 12 || PyTuple_Size(e) > 14) {
      PyErr_SetString(PyExc_TypeError,
                      "a summary must be a tuple of 12 items (13 with a shard or None, 14 with a dtype after it)");
      return false;
    }
    TensorSummary s;
    int64_t kind = 0, numel = 0, nan = 0, inf = 0, zeros = 0;
    if (!utf8(PyTuple_GetItem(e, 0), "a summary's name", &s.name) ||
        !non_negative(PyTuple_GetItem(e, 1), "a summary's kind", &kind) ||
        !non_negative(PyTuple_GetItem(e, 2), "a summary's numel", &numel) ||
        !non_negative(PyTuple_GetItem(e, 3), "a summary's NaN count", &nan) ||
        !non_negative(PyTuple_GetItem(e, 4), "a summary's Inf count", &inf) ||
        !non_negative(PyTuple_GetItem(e, 5), "a summary's zero count", &zeros) ||
        !number(PyTuple_GetItem(e, 6), "l2", &s.l2) || !number(PyTuple_GetItem(e, 7), "max_abs", &s.max_abs) ||
        !number(PyTuple_GetItem(e, 8), "mean", &s.mean) || !number(PyTuple_GetItem(e, 9), "std", &s.std)) {
      return false;
    }
    if (!wire::is_tensor_kind(static_cast<uint8_t>(kind)) || kind > 255) {
      PyErr_SetString(PyExc_ValueError, "a summary's kind must be a tensor kind");
      return false;
    }
    PyObject* ratio = PyTuple_GetItem(e, 10);
    if (ratio != Py_None) {
      if (!number(ratio, "update_ratio", &s.update_ratio)) return false;
      s.has_update_ratio = true;
    }
    if (!numerics_from_python(PyTuple_GetItem(e, 11), &s)) return false;
    if (PyTuple_Size(e) >= 13 && !shard_from_python(PyTuple_GetItem(e, 12), &s.shard)) return false;
    if (PyTuple_Size(e) == 14) {
      int64_t dtype = 0;
      if (!non_negative(PyTuple_GetItem(e, 13), "a summary's dtype", &dtype)) return false;
      if (dtype > wire::kMaxDType) {
        PyErr_SetString(PyExc_ValueError, "a summary's dtype must be one of DTYPE_NAMES' indices");
        return false;
      }
      s.dtype = static_cast<wire::DType>(dtype);
    }
    s.kind = static_cast<wire::TensorKind>(kind);
    s.numel = static_cast<uint64_t>(numel);
    s.nan_count = static_cast<uint64_t>(nan);
    s.inf_count = static_cast<uint64_t>(inf);
    s.zero_count = static_cast<uint64_t>(zeros);
    if (const std::string why = shard_refusal(s.shard, s.numel); !why.empty()) {
      PyErr_SetString(PyExc_ValueError, ("summary '" + s.name + "' has " + why).c_str());
      return false;
    }
    out->push_back(std::move(s));
  }
  return true;
}

bool shard_from_python(PyObject* item, ShardPlacement* shard) {
  if (item == Py_None) return true;
  const char* form =
      "a summary's shard must be None or (whole numel, ((placement, tensor dim, coordinate, size), ...))";
  PyObject* dims = PyTuple_Check(item) && PyTuple_Size(item) == 2 ? PyTuple_GetItem(item, 1) : nullptr;
  int64_t whole = 0;
  if (dims == nullptr || !PyTuple_Check(dims) || PyTuple_Size(dims) < 1 ||
      PyTuple_Size(dims) > static_cast<Py_ssize_t>(kMaxMeshDims)) {
    PyErr_SetString(PyExc_TypeError, form);
    return false;
  }
  if (!non_negative(PyTuple_GetItem(item, 0), "a shard's whole numel", &whole)) return false;
  shard->whole_numel = static_cast<uint64_t>(whole);
  for (Py_ssize_t d = 0; d < PyTuple_Size(dims); ++d) {
    PyObject* dim = PyTuple_GetItem(dims, d);
    int64_t v[4] = {};
    if (!PyTuple_Check(dim) || PyTuple_Size(dim) != 4) {
      PyErr_SetString(PyExc_TypeError, form);
      return false;
    }
    for (Py_ssize_t k = 0; k < 4; ++k) {
      if (!non_negative(PyTuple_GetItem(dim, k), "a shard's mesh dimension", &v[k])) return false;
    }
    if (v[0] > 255 || v[1] > 255 || v[2] > UINT32_MAX || v[3] > UINT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "a shard's mesh dimension is out of range");
      return false;
    }
    shard->dims.push_back(MeshDim{static_cast<MeshPlacement>(v[0]), static_cast<uint8_t>(v[1]),
                                  static_cast<uint32_t>(v[2]), static_cast<uint32_t>(v[3])});
  }
  return true;
}

bool numerics_from_python(PyObject* item, TensorSummary* s) {
  if (item == Py_None) return true;
  int64_t cast = 0, under = 0, over = 0;
  if (!PyTuple_Check(item) || PyTuple_Size(item) != 4) {
    PyErr_SetString(PyExc_TypeError,
                    "a summary's numerics must be None or (cast, underflow, overflow, min_abs_nonzero)");
    return false;
  }
  if (!non_negative(PyTuple_GetItem(item, 0), "a summary's cast format", &cast) ||
      !non_negative(PyTuple_GetItem(item, 1), "a summary's underflow count", &under) ||
      !non_negative(PyTuple_GetItem(item, 2), "a summary's overflow count", &over) ||
      !number(PyTuple_GetItem(item, 3), "min_abs_nonzero", &s->min_abs_nonzero)) {
    return false;
  }
  if (cast < 1 || cast > kMaxCastFormat) {
    PyErr_SetString(PyExc_ValueError, "a summary's cast format must be one of CAST_FORMATS' values");
    return false;
  }
  s->cast_format = static_cast<CastFormat>(cast);
  s->underflow_count = static_cast<uint64_t>(under);
  s->overflow_count = static_cast<uint64_t>(over);
  return true;
}

}  // namespace tensorscope::python
