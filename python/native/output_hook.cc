// output_hook.cc — see output_hook.h.
#include "output_hook.h"

#include <cstdint>
#include <optional>
#include <string>

#include "cost_meter.h"
#include "dlpack_ref.h"
#include "heap_types.h"
#include "push_calls.h"
#include "py_args.h"
#include "summaries.h"
#include "summary_batch_type.h"
#include "tree_log.h"

namespace tensorscope::python {
namespace {

ClientCore* (*core_of)(PyObject*) = nullptr;
PyObject* hook_type = nullptr;       // made by add_output_hooks, kept for the module's life
PyObject* grad_hook_type = nullptr;  // the same

// Attribute names and the int 1, made once (kept for the module's life).
struct Names {
  PyObject* dtype;
  PyObject* layout;
  PyObject* shape;
  PyObject* stride;
  PyObject* data_ptr;
  PyObject* is_cpu;
  PyObject* is_cuda;
  PyObject* get_device;
  PyObject* is_neg;
  PyObject* requires_grad;
  PyObject* register_hook;
  PyObject* one;
};
Names names{};

// The hooks of one track. The first four are set once; `core` is null while off(). The Core
// is held weakly: a Client dropped without close() still frees (and closes) it.
struct HooksObject {
  PyObject_HEAD
  PyObject* tensor_type;
  PyObject* parameter_type;  // summarize() reads these too (a plain subclass); or None
  PyObject* strided;
  PyObject* dtypes;  // {torch dtype: its wire::DType as an int}
  PyObject* inert_hook;
  PyObject* core;  // a weakref to the Core
  PyObject* calls;
  PyObject* tree;           // a TreeLog, or None
  PyObject* step;           // an int, or None
  PyObject* summarized;     // a callable, or None
  PyObject* grad_fallback;  // a callable, or None
  PyObject* training;       // (module, is_grad_enabled) or None: py_args.h evaluation_call()
  int outputs;              // the outputs themselves are taken
  int gradients;            // the gradients at the outputs are
  int send;
  int stopped;  // stop(): gradient hooks still to run do nothing
  uint8_t hint;
  uint8_t cast;  // the summaries' CastFormat (set once)
};

struct HookObject {
  PyObject_HEAD
  PyObject* hooks;        // a HooksObject
  PyObject* stream;       // str
  PyObject* grad_stream;  // str: stream + ".grad"
  PyObject* fallback;
  std::string* name;  // the streams' UTF-8 text
  std::string* grad_name;
};

// The hook put on an output's gradient (a tensor hook), with what the step was when the
// output was made.
struct GradHookObject {
  PyObject_HEAD
  PyObject* hook;  // the HookObject of the output
  PyObject* core;  // a weakref to the Core
  PyObject* step;
  PyObject* summarized;
  PyObject* grad_fallback;
  int send;
};

int hooks_traverse(PyObject* self_object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<HooksObject*>(self_object);
  Py_VISIT(Py_TYPE(self_object));
  for (PyObject* o :
       {self->tensor_type, self->parameter_type, self->strided, self->dtypes, self->inert_hook, self->core, self->calls,
        self->tree, self->step, self->summarized, self->grad_fallback, self->training}) {
    Py_VISIT(o);
  }
  return 0;
}

int hooks_clear(PyObject* self_object) {
  auto* self = reinterpret_cast<HooksObject*>(self_object);
  for (PyObject** o :
       {&self->tensor_type, &self->parameter_type, &self->strided, &self->dtypes, &self->inert_hook, &self->core,
        &self->calls, &self->tree, &self->step, &self->summarized, &self->grad_fallback, &self->training}) {
    Py_CLEAR(*o);
  }
  return 0;
}

// The Core weakref `core` refers to (borrowed), or null once it is gone (or off()).
PyObject* live_core(PyObject* core) {
  if (core == nullptr) return nullptr;
  PyObject* object = referent(core);
  return object != Py_None ? object : nullptr;
}

void turn_off(HooksObject* self) {
  Py_CLEAR(self->core);
  Py_CLEAR(self->calls);
  Py_CLEAR(self->tree);
  Py_CLEAR(self->step);
  Py_CLEAR(self->summarized);
  Py_CLEAR(self->grad_fallback);
  Py_CLEAR(self->training);
}

// {dtype: wire::DType as an int} of {dtype: a DLPack capsule of a CPU tensor of it}: the
// dtypes' wire names come from the one mapping the capsules' readers use
// (dlpack_ref.h). Null with an error set.
PyObject* wire_dtypes(PyObject* samples) {
  PyObject* out = PyDict_New();
  PyObject *dtype = nullptr, *capsule = nullptr;
  Py_ssize_t at = 0;
  while (out != nullptr && PyDict_Next(samples, &at, &dtype, &capsule)) {
    std::string error;
    const dlpack::DLTensor* tensor = capsule_tensor(capsule, &error);
    TensorRef ref;
    if (tensor != nullptr) error = dlpack::to_tensor_ref(*tensor, false, 0, &ref);
    PyObject* code = tensor != nullptr && error.empty() && ref.device == DeviceType::kCpu
        ? PyLong_FromLong(static_cast<long>(ref.dtype))
        : nullptr;
    if (code == nullptr || PyDict_SetItem(out, dtype, code) != 0) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "OutputHooks: a dtype's sample: %s", error.c_str());
      Py_CLEAR(out);
    }
    Py_XDECREF(code);
  }
  return out;
}

int hooks_init(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<HooksObject*>(self_object);
  PyObject *tensor_type = nullptr, *strided = nullptr, *samples = nullptr, *inert_hook = nullptr,
           *parameter_type = Py_None;
  unsigned char cast = 0;
  if (kwargs != nullptr && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "OutputHooks takes no keyword arguments");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "OOOO|bO", &tensor_type, &strided, &samples, &inert_hook, &cast, &parameter_type)) {
    return -1;
  }
  if (!PyType_Check(tensor_type) || !PyDict_Check(samples) || !PyCallable_Check(inert_hook) ||
      (cast != 0 && cast_format_info(static_cast<CastFormat>(cast)) == nullptr) ||
      (parameter_type != Py_None && !PyType_Check(parameter_type))) {
    PyErr_SetString(PyExc_TypeError,
                    "OutputHooks(tensor_type, strided, dtype_samples, inert_hook[, cast_format[, parameter_type]])");
    return -1;
  }
  PyObject* dtypes = wire_dtypes(samples);
  if (dtypes == nullptr) return -1;
  hooks_clear(self_object);
  for (PyObject* o : {tensor_type, parameter_type, strided, inert_hook}) Py_INCREF(o);
  self->tensor_type = tensor_type;
  self->parameter_type = parameter_type;
  self->strided = strided;
  self->dtypes = dtypes;
  self->inert_hook = inert_hook;
  self->cast = cast;
  return 0;
}

void hooks_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  hooks_clear(self_object);
  free_instance(self_object);
}

bool initialised(HooksObject* self) {
  if (self->inert_hook != nullptr) return true;
  PyErr_SetString(PyExc_ValueError, "OutputHooks.__init__ was not called");
  return false;
}

PyObject* hooks_hook(PyObject* self_object, PyObject* args) {
  PyObject *stream = nullptr, *fallback = nullptr;
  if (!initialised(reinterpret_cast<HooksObject*>(self_object)) || !PyArg_ParseTuple(args, "OO", &stream, &fallback)) {
    return nullptr;
  }
  std::string name;
  if (!utf8(stream, "stream", &name)) return nullptr;
  if (!PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "hook(stream, fallback): fallback must be callable");
    return nullptr;
  }
  PyObject* grad_stream = PyUnicode_FromFormat("%U.grad", stream);
  if (grad_stream == nullptr) return nullptr;
  auto* type = reinterpret_cast<PyTypeObject*>(hook_type);
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
  auto* hook = reinterpret_cast<HookObject*>(alloc(type, 0));  // tracked by the collector
  if (hook == nullptr) {
    Py_DECREF(grad_stream);
    return nullptr;
  }
  for (PyObject* o : {self_object, stream, fallback}) Py_INCREF(o);
  hook->hooks = self_object;
  hook->stream = stream;
  hook->grad_stream = grad_stream;
  hook->fallback = fallback;
  hook->name = new std::string(name);
  hook->grad_name = new std::string(name + ".grad");
  return reinterpret_cast<PyObject*>(hook);
}

PyObject* hooks_on(PyObject* self_object, PyObject* args) {
  auto* self = reinterpret_cast<HooksObject*>(self_object);
  PyObject *core = nullptr, *calls = nullptr, *tree = nullptr, *step = nullptr, *summarized = nullptr,
           *grad_fallback = nullptr, *training = Py_None;
  int hint = 0, outputs = 0, gradients = 0, send = 0;
  if (!initialised(self) ||
      !PyArg_ParseTuple(args, "OOOOipppOO|O", &core, &calls, &tree, &step, &hint, &outputs, &gradients, &send,
                        &summarized, &grad_fallback, &training)) {
    return nullptr;
  }
  if (core_of(core) == nullptr || !PyDict_Check(calls) || (tree != Py_None && !is_tree_log(tree)) ||
      (step != Py_None && !PyLong_Check(step)) || hint < 0 || hint > wire::kMaxRenderHint ||
      (summarized != Py_None && !PyCallable_Check(summarized)) ||
      (gradients ? !PyCallable_Check(grad_fallback) : grad_fallback != Py_None) ||
      (training != Py_None && !(PyTuple_Check(training) && PyTuple_Size(training) == 2))) {
    PyErr_SetString(
        PyExc_TypeError,
        "on(core, calls, tree, step, hint, outputs, gradients, send, summarized, grad_fallback[, training]): an "
        "open Core, a dict, a TreeLog or None, an int or None, a render hint, three bools, a callable or None, a "
        "callable when gradients is true (else None), a (module, is_grad_enabled) pair or None");
    return nullptr;
  }
  turn_off(self);
  PyObject* core_ref = PyWeakref_NewRef(core, nullptr);
  if (core_ref == nullptr) return nullptr;
  for (PyObject* o : {calls, tree, step, summarized, grad_fallback, training}) Py_INCREF(o);
  self->core = core_ref;
  self->calls = calls;
  self->tree = tree;
  self->step = step;
  self->summarized = summarized;
  self->grad_fallback = grad_fallback;
  self->training = training;
  self->hint = static_cast<uint8_t>(hint);
  self->outputs = outputs;
  self->gradients = gradients;
  self->send = send;
  Py_RETURN_NONE;
}

PyObject* hooks_off(PyObject* self_object, PyObject*) {
  turn_off(reinterpret_cast<HooksObject*>(self_object));
  Py_RETURN_NONE;
}

PyObject* hooks_stop(PyObject* self_object, PyObject*) {
  turn_off(reinterpret_cast<HooksObject*>(self_object));
  reinterpret_cast<HooksObject*>(self_object)->stopped = 1;
  Py_RETURN_NONE;
}

// (the forward hook's reading of a tensor, below)
int plain_tensor(HooksObject* hooks, PyObject* value, TensorRef* ref, bool cuda);
int plain_cpu_tensor(HooksObject* hooks, PyObject* value, TensorRef* ref);
bool read_memory(PyObject* tensor, TensorRef* ref);

// summarize(tensor[, previous]): the summary of a plain CPU tensor read where it is (no
// operation dispatched), with its update ratio against `previous` (a PreviousValues, which
// then holds the tensor's values); None for any other tensor, which the track reads itself.
PyObject* hooks_summarize(PyObject* self_object, PyObject* args) {
  auto* self = reinterpret_cast<HooksObject*>(self_object);
  PyObject *tensor = nullptr, *previous = Py_None;
  if (!initialised(self) || !PyArg_ParseTuple(args, "O|O", &tensor, &previous)) return nullptr;
  if (previous != Py_None && !is_previous_values(previous)) {
    PyErr_SetString(PyExc_TypeError, "summarize(tensor[, previous]): previous must be a PreviousValues or None");
    return nullptr;
  }
  TensorRef ref;
  const bool plain = Py_TYPE(tensor) == reinterpret_cast<PyTypeObject*>(self->tensor_type) ||
      (self->parameter_type != Py_None && Py_TYPE(tensor) == reinterpret_cast<PyTypeObject*>(self->parameter_type));
  if (!plain || plain_cpu_tensor(self, tensor, &ref) != 1 || !read_memory(tensor, &ref)) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  return summary_of_ref(ref, static_cast<CastFormat>(self->cast), previous != Py_None ? previous : nullptr);
}

// A plain tensor or parameter read for a SummaryBatch: C-contiguous, on the CPU or a CUDA
// device. False (no error set) when it is not one.
bool gatherable(HooksObject* self, PyObject* tensor, TensorRef* ref) {
  const bool plain = Py_TYPE(tensor) == reinterpret_cast<PyTypeObject*>(self->tensor_type) ||
      (self->parameter_type != Py_None && Py_TYPE(tensor) == reinterpret_cast<PyTypeObject*>(self->parameter_type));
  if (plain && plain_tensor(self, tensor, ref, true) == 1 && read_memory(tensor, ref) && is_c_contiguous(*ref) &&
      (ref->data != nullptr || element_count(*ref) == 0)) {
    return true;
  }
  PyErr_Clear();
  return false;
}

// gather(batch, tensor[, before[, stream]]): adds `tensor` (and `before`, the track's copy
// of the same parameter's previous value on its device, for the update ratio: the pass
// then copies the tensor's values over it) to SummaryBatch `batch` on `stream` (a
// cudaStream_t as an int; 0 on the CPU) and returns its ticket; None for a tensor the
// batch does not take (the track summarizes it at once).
PyObject* hooks_gather(PyObject* self_object, PyObject* args) {
  auto* self = reinterpret_cast<HooksObject*>(self_object);
  PyObject *batch_object = nullptr, *tensor = nullptr, *before = Py_None;
  unsigned long long stream = 0;
  if (!initialised(self) || !PyArg_ParseTuple(args, "OO|OK", &batch_object, &tensor, &before, &stream)) return nullptr;
  fused::SummaryBatch* batch = summary_batch_of(batch_object);
  if (batch == nullptr) {
    PyErr_SetString(PyExc_TypeError, "gather(batch, tensor[, before[, stream]]): batch must be a SummaryBatch");
    return nullptr;
  }
  TensorRef ref, old;
  if (!gatherable(self, tensor, &ref)) Py_RETURN_NONE;
  fused::Input in;
  in.data = ref.data;
  in.dtype = ref.dtype;
  in.numel = element_count(ref);
  if (before != Py_None) {
    if (!gatherable(self, before, &old) || old.dtype != ref.dtype || element_count(old) != in.numel ||
        old.device != ref.device || old.device_index != ref.device_index) {
      Py_RETURN_NONE;
    }
    in.before = const_cast<void*>(old.data);  // the track's own copy: the pass keeps the tensor's values in it
    in.ask.ratio = true;
    in.ask.keep = true;
  }
  if (const CastFormatInfo* info = cast_format_info(static_cast<CastFormat>(self->cast)); info != nullptr) {
    in.ask.cast = true;
    in.ask.underflow_at_most = info->underflow_at_most;
    in.ask.overflow_from = info->overflow_from;
  }
  const int device = ref.device == DeviceType::kCuda ? ref.device_index : fused::SummaryBatch::kHost;
  return PyLong_FromUnsignedLongLong(batch->add(in, device, static_cast<uintptr_t>(stream)));
}

PyMethodDef hooks_methods[] = {
    {"hook", hooks_hook, METH_VARARGS, "hook(stream, fallback) -> a forward hook for the outputs of stream's module"},
    {"on", hooks_on, METH_VARARGS,
     "on(core, calls, tree, step, hint, outputs, gradients, send, summarized, grad_fallback): first calls are "
     "taken by the hooks"},
    {"off", hooks_off, METH_NOARGS, "off(): every call goes to the fallbacks"},
    {"stop", hooks_stop, METH_NOARGS, "stop(): off, and the gradient hooks still to run do nothing"},
    {"gather", hooks_gather, METH_VARARGS,
     "gather(batch, tensor[, before[, stream]]) -> a ticket of SummaryBatch batch, or None for a tensor it does "
     "not take"},
    {"summarize", hooks_summarize, METH_VARARGS,
     "summarize(tensor[, previous]) -> the summary of a plain CPU tensor read in place (with its update ratio "
     "against a PreviousValues), or None"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot hooks_slots[] = {
    {Py_tp_doc,
     const_cast<char*>("OutputHooks(tensor_type, strided, dtype_samples, inert_hook): "
                       "a track's output hooks (tensorscope/_tracks.py)")},
    {Py_tp_init, reinterpret_cast<void*>(hooks_init)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_traverse, reinterpret_cast<void*>(hooks_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(hooks_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(hooks_dealloc)},
    {Py_tp_methods, hooks_methods},
    {0, nullptr},
};

PyType_Spec hooks_spec = {"tensorscope._native.OutputHooks", sizeof(HooksObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, hooks_slots};

// ---- the forward hook ----

int plain_cpu_tensor(HooksObject* hooks, PyObject* value, TensorRef* ref) {
  return plain_tensor(hooks, value, ref, false);
}

// Whether `value` (an output or a gradient) is taken here: a torch.Tensor (no subclass)
// that is a plain_cpu_tensor(). -1 with an error set.
int sendable(HooksObject* hooks, PyObject* value, TensorRef* ref) {
  if (Py_TYPE(value) != reinterpret_cast<PyTypeObject*>(hooks->tensor_type)) return 0;
  return plain_cpu_tensor(hooks, value, ref);
}

// Reads the ints of tuple `sizes` (a torch.Size, or stride()'s tuple) into `out`, which
// holds `n` of them: false with an error set when one is not an int.
bool read_ints(PyObject* sizes, int n, int64_t* out) {
  for (int d = 0; d < n; ++d) {
    out[d] = PyLong_AsLongLong(PyTuple_GetItem(sizes, d));
    if (out[d] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

// Whether tensor `value` is a tensor of a dtype sent as it is, strided, not a negative view
// (the checks of _tensors.export_torch), on the CPU or, with `cuda`, a CUDA device. When
// it is, `ref` has its dtype, shape and device (read_memory() completes it). -1 with an
// error set.
int plain_tensor(HooksObject* hooks, PyObject* value, TensorRef* ref, bool cuda) {
  PyObject* dtype = PyObject_GetAttr(value, names.dtype);
  if (dtype == nullptr) return -1;
  PyObject* code = PyDict_GetItemWithError(hooks->dtypes, dtype);  // borrowed
  Py_DECREF(dtype);
  if (code == nullptr) return PyErr_Occurred() ? -1 : 0;
  ref->dtype = static_cast<wire::DType>(PyLong_AsLong(code));
  PyObject* layout = PyObject_GetAttr(value, names.layout);
  if (layout == nullptr) return -1;
  Py_DECREF(layout);  // (compared by identity: a singleton the module holds)
  if (layout != hooks->strided) return 0;
  PyObject* shape = PyObject_GetAttr(value, names.shape);
  if (shape == nullptr) return -1;
  const Py_ssize_t dims = PyTuple_Check(shape) ? PyTuple_Size(shape) : -1;
  const bool read = dims >= 0 && dims <= static_cast<Py_ssize_t>(wire::kMaxDims) &&
      read_ints(shape, static_cast<int>(dims), ref->shape);
  Py_DECREF(shape);
  if (!read) return PyErr_Occurred() ? -1 : 0;
  ref->ndim = static_cast<int>(dims);
  const int cpu = attribute_truth(value, names.is_cpu);
  if (cpu < 0) return -1;
  ref->device = DeviceType::kCpu;
  if (cpu == 0) {
    const int on_cuda = cuda ? attribute_truth(value, names.is_cuda) : 0;
    if (on_cuda != 1) return on_cuda;
    PyObject* index = PyObject_CallMethodObjArgs(value, names.get_device, nullptr);
    if (index == nullptr) return -1;
    ref->device = DeviceType::kCuda;
    ref->device_index = static_cast<int>(PyLong_AsLong(index));
    Py_DECREF(index);
    if (PyErr_Occurred()) return -1;
  }
  PyObject* negative = PyObject_CallMethodObjArgs(value, names.is_neg, nullptr);
  if (negative == nullptr) return -1;
  const int is_negative = PyObject_IsTrue(negative);
  Py_DECREF(negative);
  return is_negative < 0 ? -1 : !is_negative;
}

// A counted refusal of the hook's stream for the Python error set now (cleared), worded
// as the Python export's.
void refuse_error(ClientCore* core, const std::string& name) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  std::string why = "could not read the tensor", part;
  PyObject* type_name = type != nullptr ? PyObject_GetAttrString(type, "__name__") : nullptr;
  if (type_name != nullptr && utf8(type_name, "type", &part)) why += ": " + part;
  PyObject* message = value != nullptr ? PyObject_Str(value) : nullptr;
  if (message != nullptr && utf8(message, "error", &part)) why += ": " + part;
  Py_XDECREF(message);
  Py_XDECREF(type_name);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  core->refuse(name, why);
}

// Completes `ref` (dtype and shape read by sendable()) with the strides and the address of
// `tensor`'s first element: the tensor read where it is, with no DLPack export (about
// 0.9 us a tensor, and a detach() first on PyTorch 2). False with an error set.
bool read_memory(PyObject* tensor, TensorRef* ref) {
  PyObject* strides = PyObject_CallMethodObjArgs(tensor, names.stride, nullptr);
  if (strides == nullptr) return false;
  const bool read =
      PyTuple_Check(strides) && PyTuple_Size(strides) == ref->ndim && read_ints(strides, ref->ndim, ref->strides);
  Py_DECREF(strides);
  if (!read) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "stride() does not match the shape");
    return false;
  }
  PyObject* address = PyObject_CallMethodObjArgs(tensor, names.data_ptr, nullptr);
  if (address == nullptr) return false;
  ref->data = PyLong_AsVoidPtr(address);
  Py_DECREF(address);
  return !PyErr_Occurred();
}

// Sends `tensor` (a plain CPU tensor: sendable(), which read `ref`'s dtype and shape) as
// stream `name` of kind `kind` when `send` and the stream is admitted, and hands its summary
// to `summarized` when that is not None: one read for both. Never leaves an error set.
void take_value(ClientCore* core, PyObject* stream, const std::string& name, PyObject* tensor, TensorRef ref,
                wire::TensorKind kind, PyObject* step_object, bool send, PyObject* summarized,
                const HooksObject& hooks) {
  const uint8_t track_hint = hooks.hint;
  const long code = send ? admission_code(core, core->admit_tracked(name)) : -1;
  const bool summarize = summarized != Py_None;
  if (code < 0 && !summarize) return;
  if (!read_memory(tensor, &ref)) {
    refuse_error(core, name);
    return;
  }
  if (code >= 0) {
    const uint8_t hint = track_hint != 0 ? track_hint : static_cast<uint8_t>(code);
    std::optional<int64_t> step;
    if (step_object != Py_None) step = PyLong_AsLongLong(step_object);
    if (PyErr_Occurred()) {
      refuse_error(core, name);
    } else {
      send_ref(core, name, ref, kind, hint, step, nullptr);  // (the core checks the ref)
    }
  }
  if (summarize) {  // the track's bookkeeping of the summary (it never raises)
    PyObject* summary = summary_of_ref(ref, static_cast<CastFormat>(hooks.cast));
    PyObject* kind_object = summary != nullptr ? PyLong_FromLong(static_cast<long>(kind)) : nullptr;
    PyObject* done = kind_object != nullptr
        ? PyObject_CallFunctionObjArgs(summarized, stream, tensor, summary, kind_object, step_object, nullptr)
        : nullptr;
    Py_XDECREF(done);
    Py_XDECREF(kind_object);
    Py_XDECREF(summary);
  }
  PyErr_Clear();
}

// Puts a gradient hook on `output` (which requires grad) for the hook's gradient stream.
void watch_gradient(HookObject* self, PyObject* output, PyObject* core, PyObject* step, int send, PyObject* summarized,
                    PyObject* grad_fallback) {
  auto* type = reinterpret_cast<PyTypeObject*>(grad_hook_type);
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(type, Py_tp_alloc));
  auto* hook = reinterpret_cast<GradHookObject*>(alloc(type, 0));  // tracked by the collector
  if (hook == nullptr) return;
  for (PyObject* o : {reinterpret_cast<PyObject*>(self), core, step, summarized, grad_fallback}) Py_INCREF(o);
  hook->hook = reinterpret_cast<PyObject*>(self);
  hook->core = core;
  hook->step = step;
  hook->summarized = summarized;
  hook->grad_fallback = grad_fallback;
  hook->send = send;
  PyObject* handle = PyObject_CallMethodObjArgs(output, names.register_hook, hook, nullptr);
  Py_XDECREF(handle);
  Py_DECREF(hook);
}

// Takes the first call's output (the checks passed); false when the fallback must take
// it, with nothing done. Never leaves an error set.
bool send_here(HookObject* self, HooksObject* hooks, PyObject* module, PyObject* output) {
  PyObject* calls = hooks->calls;
  PyObject* seen = PyDict_GetItemWithError(calls, self->stream);  // borrowed
  if (seen != nullptr || PyErr_Occurred()) {
    PyErr_Clear();
    return false;  // a later call of the module in this step
  }
  TensorRef ref;
  const int can = sendable(hooks, output, &ref);
  if (can != 1) {
    PyErr_Clear();
    return false;
  }
  // From here on the call is this hook's: the fallback must not see it again. What the
  // step holds is kept (on()/off() may run while a large copy releases the GIL).
  PyObject* held[] = {live_core(hooks->core), hooks->core,          hooks->step,
                      hooks->summarized,      hooks->grad_fallback, reinterpret_cast<PyObject*>(hooks)};
  if (held[0] == nullptr) return false;  // (the Core is gone: the fallback finds no client)
  for (PyObject* o : held) Py_INCREF(o);
  PyObject *core_object = held[0], *core_ref = held[1], *step = held[2], *summarized = held[3],
           *grad_fallback = held[4];
  const bool outputs = hooks->outputs != 0, gradients = hooks->gradients != 0, send = hooks->send != 0;
  if (hooks->tree != Py_None) tree_log_end(hooks->tree, module, output);
  ClientCore* core = core_of(core_object);
  if (core != nullptr && PyDict_SetItem(calls, self->stream, names.one) == 0) {
    if (outputs) {
      take_value(core, self->stream, *self->name, output, ref, wire::TensorKind::kActivation, step, send, summarized,
                 *hooks);
    }
    if (gradients && attribute_truth(output, names.requires_grad) == 1) {
      watch_gradient(self, output, core_ref, step, send, summarized, grad_fallback);
    }
  }
  PyErr_Clear();
  for (PyObject* o : held) Py_DECREF(o);
  return true;
}

// hook(module, inputs, output) -> None: never raises into the model's forward.
PyObject* hook_call(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  const CostSpan span;  // (the fallback's time is part of it)
  auto* self = reinterpret_cast<HookObject*>(self_object);
  auto* hooks = reinterpret_cast<HooksObject*>(self->hooks);
  // An evaluation forward the track leaves out (on()'s training says so): nothing at all.
  if (hooks != nullptr && hooks->core != nullptr && evaluation_call(hooks->training)) Py_RETURN_NONE;
  if (hooks != nullptr && hooks->core != nullptr && kwargs == nullptr && PyTuple_Check(args) &&
      PyTuple_Size(args) == 3 && send_here(self, hooks, PyTuple_GetItem(args, 0), PyTuple_GetItem(args, 2))) {
    Py_RETURN_NONE;
  }
  if (self->fallback == nullptr) Py_RETURN_NONE;  // cleared by the collector
  return PyObject_Call(self->fallback, args, kwargs);
}

// A copy of the model (deepcopy, pickle, torch.save) gets what inert_hook() gives: the
// copy is not tracked.
PyObject* inert_hook_of(PyObject* output_hook) {
  auto* hooks = reinterpret_cast<HooksObject*>(reinterpret_cast<HookObject*>(output_hook)->hooks);
  return hooks != nullptr ? hooks->inert_hook : nullptr;
}

PyObject* hook_deepcopy(PyObject* self_object, PyObject*) { return inert_copy(inert_hook_of(self_object)); }

PyObject* hook_reduce(PyObject* self_object, PyObject*) { return inert_pickle(inert_hook_of(self_object)); }

int hook_traverse(PyObject* self_object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<HookObject*>(self_object);
  Py_VISIT(Py_TYPE(self_object));
  Py_VISIT(self->hooks);
  Py_VISIT(self->stream);
  Py_VISIT(self->grad_stream);
  Py_VISIT(self->fallback);
  return 0;
}

int hook_clear(PyObject* self_object) {
  auto* self = reinterpret_cast<HookObject*>(self_object);
  Py_CLEAR(self->hooks);
  Py_CLEAR(self->stream);
  Py_CLEAR(self->grad_stream);
  Py_CLEAR(self->fallback);
  return 0;
}

void hook_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  hook_clear(self_object);
  delete reinterpret_cast<HookObject*>(self_object)->name;
  delete reinterpret_cast<HookObject*>(self_object)->grad_name;
  free_instance(self_object);
}

PyMethodDef hook_methods[] = {
    {"__deepcopy__", hook_deepcopy, METH_O, "what the hook is in a copy of the model: inert"},
    {"__reduce__", hook_reduce, METH_NOARGS, "pickled as an inert hook"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot hook_slots[] = {
    {Py_tp_doc, const_cast<char*>("a track's forward hook on a module's outputs (OutputHooks.hook)")},
    {Py_tp_call, reinterpret_cast<void*>(hook_call)},
    {Py_tp_traverse, reinterpret_cast<void*>(hook_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(hook_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(hook_dealloc)},
    {Py_tp_methods, hook_methods},
    {0, nullptr},
};

PyType_Spec hook_spec = {"tensorscope._native.OutputHook", sizeof(HookObject), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, hook_slots};

// ---- the gradient hook ----

// hook(grad) -> None (the gradient as it is): never raises into the backward pass.
PyObject* grad_hook_call(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  const CostSpan span;
  auto* self = reinterpret_cast<GradHookObject*>(self_object);
  auto* output_hook = reinterpret_cast<HookObject*>(self->hook);
  if (output_hook == nullptr || kwargs != nullptr || !PyTuple_Check(args) || PyTuple_Size(args) != 1) Py_RETURN_NONE;
  auto* hooks = reinterpret_cast<HooksObject*>(output_hook->hooks);
  if (hooks == nullptr || hooks->stopped || hooks->inert_hook == nullptr || self->grad_fallback == nullptr) {
    Py_RETURN_NONE;  // (the track was removed, or the collector is clearing these)
  }
  PyObject* grad = PyTuple_GetItem(args, 0);
  Py_INCREF(self_object);  // (what it holds stays while Python runs below)
  TensorRef ref;
  const int can = sendable(hooks, grad, &ref);
  if (can != 1) {  // the track's Python hook takes it
    PyErr_Clear();
    PyObject* done = PyObject_CallFunctionObjArgs(self->grad_fallback, output_hook->stream, self->step,
                                                  self->send ? Py_True : Py_False,
                                                  self->summarized != Py_None ? Py_True : Py_False, grad, nullptr);
    Py_XDECREF(done);
  } else if (PyObject* core_object = live_core(self->core); core_object != nullptr) {
    Py_INCREF(core_object);  // (for the call: a large copy releases the GIL)
    if (ClientCore* core = core_of(core_object); core != nullptr) {
      take_value(core, output_hook->grad_stream, *output_hook->grad_name, grad, ref, wire::TensorKind::kGradient,
                 self->step, self->send != 0, self->summarized, *hooks);
    }
    Py_DECREF(core_object);
  }
  PyErr_Clear();
  Py_DECREF(self_object);
  Py_RETURN_NONE;
}

// In a copy or pickle (torch.save of an output tensor keeps its hooks): inert.
PyObject* grad_inert_hook(PyObject* self_object) {
  PyObject* output_hook = reinterpret_cast<GradHookObject*>(self_object)->hook;
  return output_hook != nullptr ? inert_hook_of(output_hook) : nullptr;
}

PyObject* grad_hook_deepcopy(PyObject* self_object, PyObject*) { return inert_copy(grad_inert_hook(self_object)); }

PyObject* grad_hook_reduce(PyObject* self_object, PyObject*) { return inert_pickle(grad_inert_hook(self_object)); }

int grad_hook_traverse(PyObject* self_object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<GradHookObject*>(self_object);
  Py_VISIT(Py_TYPE(self_object));
  for (PyObject* o : {self->hook, self->core, self->step, self->summarized, self->grad_fallback}) Py_VISIT(o);
  return 0;
}

int grad_hook_clear(PyObject* self_object) {
  auto* self = reinterpret_cast<GradHookObject*>(self_object);
  for (PyObject** o : {&self->hook, &self->core, &self->step, &self->summarized, &self->grad_fallback}) Py_CLEAR(*o);
  return 0;
}

void grad_hook_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  grad_hook_clear(self_object);
  free_instance(self_object);
}

PyMethodDef grad_hook_methods[] = {
    {"__deepcopy__", grad_hook_deepcopy, METH_O, "what the hook is in a copy: inert"},
    {"__reduce__", grad_hook_reduce, METH_NOARGS, "pickled as an inert hook"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot grad_hook_slots[] = {
    {Py_tp_doc, const_cast<char*>("a track's hook on the gradient at a module's output (made by its OutputHook)")},
    {Py_tp_call, reinterpret_cast<void*>(grad_hook_call)},
    {Py_tp_traverse, reinterpret_cast<void*>(grad_hook_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(grad_hook_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(grad_hook_dealloc)},
    {Py_tp_methods, grad_hook_methods},
    {0, nullptr},
};

PyType_Spec grad_hook_spec = {"tensorscope._native.GradientHook", sizeof(GradHookObject), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, grad_hook_slots};

}  // namespace

bool add_output_hooks(PyObject* module, ClientCore* (*core_of_object)(PyObject*)) {
  core_of = core_of_object;
  names = {PyUnicode_InternFromString("dtype"),         PyUnicode_InternFromString("layout"),
           PyUnicode_InternFromString("shape"),         PyUnicode_InternFromString("stride"),
           PyUnicode_InternFromString("data_ptr"),      PyUnicode_InternFromString("is_cpu"),
           PyUnicode_InternFromString("is_cuda"),       PyUnicode_InternFromString("get_device"),
           PyUnicode_InternFromString("is_neg"),        PyUnicode_InternFromString("requires_grad"),
           PyUnicode_InternFromString("register_hook"), PyLong_FromLong(1)};
  for (PyObject* name :
       {names.dtype, names.layout, names.shape, names.stride, names.data_ptr, names.is_cpu, names.is_cuda,
        names.get_device, names.is_neg, names.requires_grad, names.register_hook, names.one}) {
    if (name == nullptr) return false;
  }
  hook_type = PyType_FromSpec(&hook_spec);
  grad_hook_type = PyType_FromSpec(&grad_hook_spec);
  if (hook_type == nullptr || grad_hook_type == nullptr) return false;
  PyObject* type = PyType_FromSpec(&hooks_spec);
  if (type == nullptr || PyModule_AddObject(module, "OutputHooks", type) != 0) {
    Py_XDECREF(type);
    return false;
  }
  return true;
}

}  // namespace tensorscope::python
