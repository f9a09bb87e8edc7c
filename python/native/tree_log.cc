// tree_log.cc — see tree_log.h.
#include "tree_log.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "heap_types.h"
#include "py_args.h"
#include "tensorscope/shared/module_tree_format.h"

namespace tensorscope::python {
namespace {

ClientCore* (*core_of)(PyObject*) = nullptr;
PyObject* hook_type = nullptr;  // made by add_tree_log, kept for the module's life
PyObject* log_type = nullptr;   // the same

// Attribute names, made once (kept for the module's life).
struct Names {
  PyObject* dtype;
  PyObject* shape;
  PyObject* is_cuda;
  PyObject* is_cpu;
  PyObject* get_device;
  PyObject* device;
  PyObject* type;
};
Names names{};

// dtype object -> its name ("float32"): torch's dtypes are singletons, each held here so
// its address stays its own. Under the GIL.
std::vector<std::pair<PyObject*, std::string>> dtype_names;

// The descriptions made last (a module's output is most often described again as the next
// one's input, or has its shape): the same dtype (one of dtype_names), sizes and device
// give the same text, with no formatting. Under the GIL.
struct RecentDescription {
  PyObject* dtype = nullptr;
  std::vector<int64_t> sizes;
  std::string device;
  std::string text;
};
std::array<RecentDescription, 8> recent_descriptions;
size_t next_recent = 0;

struct OpenCall {
  const void* module;
  int64_t index;  // in tree.calls; -1 when over ModuleTree::kMaxCalls
};

struct State {
  ModuleTree tree;
  std::optional<int64_t> step;
  bool off = false;                         // stamp() said not this step
  std::vector<unsigned long> threads;       // thread idents, numbered by their first call in the step
  std::vector<std::vector<OpenCall>> open;  // by thread number: calls begun, not ended
  std::map<std::pair<uint32_t, std::string>, uint32_t> counts;  // (thread, path) -> calls so far
  std::unordered_set<const void*> skip;                         // the model's parameters and buffers
  uint64_t generation = 0;  // one more at each clear(): what a call began in is still there
  // The last step's calls taken and their payload: a step that made the same calls (most
  // do) sends that payload again without formatting it.
  ModuleTree previous;
  std::string previous_payload;

  void clear() {
    ++generation;
    tree.calls.clear();
    tree.omitted = 0;
    step.reset();
    off = false;
    threads.clear();
    open.clear();
    counts.clear();
  }
};

struct TreeLogObject {
  PyObject_HEAD
  PyObject* core;  // a weakref to a Core, or None
  PyObject* tensor_type;
  PyObject* stamp;
  PyObject* leaves;
  PyObject* inert_hook;
  PyObject* training;  // None, or (model, is_grad_enabled): py_args.h evaluation_call()
  State* state;
};

struct HookObject {
  PyObject_HEAD
  PyObject* log;  // a TreeLogObject
  std::string* path;
  std::string* type;
};

// The name of dtype object `dtype` (borrowed), kept in dtype_names from now on.
bool dtype_name(PyObject* dtype, std::string* out) {
  for (const auto& [object, name] : dtype_names) {
    if (object == dtype) {
      *out = name;
      return true;
    }
  }
  PyObject* str = PyObject_Str(dtype);
  const bool ok = str != nullptr && utf8(str, "dtype", out);
  Py_XDECREF(str);
  if (!ok) return false;
  if (out->rfind("torch.", 0) == 0) out->erase(0, 6);
  Py_INCREF(dtype);
  dtype_names.emplace_back(dtype, *out);  // keeps the reference
  return true;
}

bool read_shape(PyObject* tensor, std::vector<int64_t>* sizes) {
  PyObject* shape = PyObject_GetAttr(tensor, names.shape);
  if (shape == nullptr) return false;
  bool ok = PyTuple_Check(shape);
  const Py_ssize_t n = ok ? PyTuple_Size(shape) : 0;
  for (Py_ssize_t d = 0; ok && d < n; ++d) {
    const long long size = PyLong_AsLongLong(PyTuple_GetItem(shape, d));
    ok = !(size == -1 && PyErr_Occurred());
    sizes->push_back(size);
  }
  Py_DECREF(shape);
  return ok;
}

// "cpu", "cuda<index>", else the device's type (as the C++ client names them).
bool read_device(PyObject* tensor, std::string* out) {
  const int cpu = attribute_truth(tensor, names.is_cpu);  // (the usual case first: one attribute)
  if (cpu < 0) return false;
  if (cpu == 1) {
    *out = "cpu";
    return true;
  }
  const int cuda = attribute_truth(tensor, names.is_cuda);
  if (cuda < 0) return false;
  if (cuda == 1) {
    PyObject* index = PyObject_CallMethodObjArgs(tensor, names.get_device, nullptr);
    if (index == nullptr) return false;
    const long i = PyLong_AsLong(index);
    Py_DECREF(index);
    if (i == -1 && PyErr_Occurred()) return false;
    *out = "cuda" + std::to_string(i);
    return true;
  }
  PyObject* device = PyObject_GetAttr(tensor, names.device);
  PyObject* type = device != nullptr ? PyObject_GetAttr(device, names.type) : nullptr;
  const bool ok = type != nullptr && utf8(type, "device type", out);
  Py_XDECREF(type);
  Py_XDECREF(device);
  return ok;
}

// The tensor's description (module_tree_format.h); "?" when it cannot be read.
std::string describe(PyObject* tensor) {
  PyObject* dtype = PyObject_GetAttr(tensor, names.dtype);
  std::vector<int64_t> sizes;
  std::string device;
  if (dtype == nullptr || !read_shape(tensor, &sizes) || !read_device(tensor, &device)) {
    Py_XDECREF(dtype);
    PyErr_Clear();
    return "?";
  }
  for (const RecentDescription& r : recent_descriptions) {
    if (r.dtype == dtype && r.sizes == sizes && r.device == device) {
      Py_DECREF(dtype);
      return r.text;
    }
  }
  std::string name;
  const bool named = dtype_name(dtype, &name);
  Py_DECREF(dtype);  // (held by dtype_names when named)
  if (!named) {
    PyErr_Clear();
    return "?";
  }
  RecentDescription& r = recent_descriptions[next_recent++ % recent_descriptions.size()];
  r = {dtype, std::move(sizes), std::move(device), std::string()};
  r.text = describe_tensor(name, r.sizes.data(), r.sizes.size(), r.device);
  return r.text;
}

bool is_tensor(TreeLogObject* self, PyObject* object) {
  return PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(self->tensor_type)) != 0;
}

// The tensors of `value`, borrowed from it or from *keep (a list the caller releases);
// empty with the error cleared when leaves() fails.
std::vector<PyObject*> tensors_of(TreeLogObject* self, PyObject* value, PyObject** keep) {
  std::vector<PyObject*> out;
  if (is_tensor(self, value)) {
    out.push_back(value);
    return out;
  }
  const bool tuple = PyTuple_Check(value), list = !tuple && PyList_Check(value);
  if (tuple || list) {  // (most calls: a tuple of tensors)
    const Py_ssize_t n = tuple ? PyTuple_Size(value) : PyList_Size(value);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = tuple ? PyTuple_GetItem(value, i) : PyList_GetItem(value, i);
      if (!is_tensor(self, item)) break;
      out.push_back(item);
    }
    if (out.size() == static_cast<size_t>(n)) return out;
    out.clear();
  }
  PyObject* found = PyObject_CallFunctionObjArgs(self->leaves, value, nullptr);
  *keep = found != nullptr ? PySequence_List(found) : nullptr;
  Py_XDECREF(found);
  if (*keep == nullptr) {
    PyErr_Clear();
    return out;
  }
  const Py_ssize_t n = PyList_Size(*keep);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyList_GetItem(*keep, i);
    if (is_tensor(self, item)) out.push_back(item);
  }
  return out;
}

uint32_t thread_number(State& s, unsigned long ident, bool add) {
  for (size_t t = 0; t < s.threads.size(); ++t) {
    if (s.threads[t] == ident) return static_cast<uint32_t>(t);
  }
  if (!add) return UINT32_MAX;
  s.threads.push_back(ident);
  s.open.emplace_back();
  return static_cast<uint32_t>(s.threads.size() - 1);
}

// Whether the call now beginning is logged: the core enabled, a training call, and the
// step stamped.
bool logging(TreeLogObject* self) {
  State& s = *self->state;
  if (s.off || self->stamp == nullptr) return false;  // (no stamp: cleared by the collector)
  if (self->core != Py_None) {
    ClientCore* core = core_of(referent(self->core));
    if (core == nullptr || !core->enabled()) return false;  // (disabled: the log follows every_n)
  }
  if (evaluation_call(self->training)) return false;
  if (s.step) return true;
  PyObject* step = PyObject_CallObject(self->stamp, nullptr);
  if (step == nullptr) {
    PyErr_Clear();
    return false;
  }
  if (step == Py_None) {
    Py_DECREF(step);
    s.off = true;
    return false;
  }
  const long long value = PyLong_AsLongLong(step);
  Py_DECREF(step);
  if (value == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  s.step = value;
  return true;
}

// The descriptions of the tensors in `value` that are not the model's own, at most `limit`.
// Python may run here (leaves(), a tensor subclass's attributes), and other threads with
// it: callers read the state before and change it after, never across this.
std::vector<std::string> describe_all(TreeLogObject* self, PyObject* value, size_t limit) {
  std::vector<std::string> out;
  PyObject* keep = nullptr;
  for (PyObject* tensor : tensors_of(self, value, &keep)) {
    if (out.size() >= limit) break;
    if (self->state->skip.count(tensor) == 0) out.push_back(describe(tensor));
  }
  Py_XDECREF(keep);
  return out;
}

void begin(TreeLogObject* self, const std::string& path, const std::string& type, PyObject* module, PyObject* args) {
  if (!logging(self)) return;
  State& s = *self->state;
  const uint64_t generation = s.generation;
  std::vector<std::string> inputs;
  if (s.tree.calls.size() < ModuleTree::kMaxCalls) inputs = describe_all(self, args, ModuleTree::kMaxInputs);
  if (s.generation != generation) return;  // the log was taken meanwhile (a step ended on another thread)
  const uint32_t thread = thread_number(s, PyThread_get_thread_ident(), true);
  const uint32_t call = s.counts[{thread, path}]++;
  int64_t index = -1;
  if (s.tree.calls.size() < ModuleTree::kMaxCalls) {
    index = static_cast<int64_t>(s.tree.calls.size());
    ModuleTreeCall& c = s.tree.calls.emplace_back();
    c.thread = thread;
    c.call = call;
    c.path = path;
    c.type = type;
    c.inputs = std::move(inputs);
  } else {
    ++s.tree.omitted;
  }
  s.open[thread].push_back({module, index});
}

// ---- TreeLog ----

int log_traverse(PyObject* self_object, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<TreeLogObject*>(self_object);
  Py_VISIT(Py_TYPE(self_object));
  Py_VISIT(self->core);
  Py_VISIT(self->tensor_type);
  Py_VISIT(self->stamp);
  Py_VISIT(self->leaves);
  Py_VISIT(self->inert_hook);
  Py_VISIT(self->training);
  return 0;
}

int log_clear(PyObject* self_object) {
  auto* self = reinterpret_cast<TreeLogObject*>(self_object);
  Py_CLEAR(self->core);
  Py_CLEAR(self->tensor_type);
  Py_CLEAR(self->stamp);
  Py_CLEAR(self->leaves);
  Py_CLEAR(self->inert_hook);
  Py_CLEAR(self->training);
  return 0;
}

int log_init(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<TreeLogObject*>(self_object);
  PyObject *core = nullptr, *tensor_type = nullptr, *skip = nullptr, *stamp = nullptr, *leaves = nullptr,
           *inert_hook = nullptr, *training = Py_None;
  if (kwargs != nullptr && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "TreeLog takes no keyword arguments");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "OOOOOO|O", &core, &tensor_type, &skip, &stamp, &leaves, &inert_hook, &training)) {
    return -1;
  }
  if (core != Py_None && core_of(core) == nullptr) {
    PyErr_SetString(PyExc_TypeError, "TreeLog: core must be an open Core or None");
    return -1;
  }
  if (!PyType_Check(tensor_type) || !PyCallable_Check(stamp) || !PyCallable_Check(leaves) ||
      !PyCallable_Check(inert_hook) ||
      (training != Py_None && !(PyTuple_Check(training) && PyTuple_Size(training) == 2))) {
    PyErr_SetString(PyExc_TypeError, "TreeLog(core, tensor_type, skip_ids, stamp, leaves, inert_hook[, training])");
    return -1;
  }
  auto state = std::make_unique<State>();
  PyObject* iterator = PyObject_GetIter(skip);
  if (iterator == nullptr) return -1;
  while (PyObject* id = PyIter_Next(iterator)) {
    void* address = PyLong_AsVoidPtr(id);
    Py_DECREF(id);
    if (address == nullptr && PyErr_Occurred()) break;
    state->skip.insert(address);
  }
  Py_DECREF(iterator);
  if (PyErr_Occurred()) return -1;
  PyObject* core_ref = core != Py_None ? PyWeakref_NewRef(core, nullptr) : core;  // (held weakly)
  if (core_ref == nullptr) return -1;
  if (core_ref == Py_None) Py_INCREF(core_ref);
  log_clear(self_object);
  for (PyObject* o : {tensor_type, stamp, leaves, inert_hook, training}) Py_INCREF(o);
  self->core = core_ref;
  self->tensor_type = tensor_type;
  self->stamp = stamp;
  self->leaves = leaves;
  self->inert_hook = inert_hook;
  self->training = training;
  delete self->state;
  self->state = state.release();
  return 0;
}

void log_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  log_clear(self_object);
  auto* self = reinterpret_cast<TreeLogObject*>(self_object);
  delete self->state;
  self->state = nullptr;
  free_instance(self_object);
}

State* live(PyObject* self_object) {
  State* s = reinterpret_cast<TreeLogObject*>(self_object)->state;
  if (s == nullptr) PyErr_SetString(PyExc_ValueError, "TreeLog.__init__ was not called");
  return s;
}

PyObject* log_hook(PyObject* self_object, PyObject* args) {
  PyObject *path = nullptr, *type = nullptr;
  if (live(self_object) == nullptr || !PyArg_ParseTuple(args, "OO", &path, &type)) return nullptr;
  std::string path_text, type_text;
  if (!utf8(path, "path", &path_text) || !utf8(type, "type_name", &type_text)) return nullptr;
  auto* hook_class = reinterpret_cast<PyTypeObject*>(hook_type);
  auto alloc = reinterpret_cast<allocfunc>(PyType_GetSlot(hook_class, Py_tp_alloc));
  auto* hook = reinterpret_cast<HookObject*>(alloc(hook_class, 0));  // tracked by the collector
  if (hook == nullptr) return nullptr;
  Py_INCREF(self_object);
  hook->log = self_object;
  hook->path = new std::string(std::move(path_text));
  hook->type = new std::string(std::move(type_text));
  return reinterpret_cast<PyObject*>(hook);
}

PyObject* log_begin(PyObject* self_object, PyObject* args) {
  PyObject *path = nullptr, *type = nullptr, *module = nullptr, *inputs = nullptr;
  if (live(self_object) == nullptr || !PyArg_ParseTuple(args, "OOOO", &path, &type, &module, &inputs)) return nullptr;
  std::string path_text, type_text;
  if (!utf8(path, "path", &path_text) || !utf8(type, "type_name", &type_text)) return nullptr;
  begin(reinterpret_cast<TreeLogObject*>(self_object), path_text, type_text, module, inputs);
  Py_RETURN_NONE;
}

// end(): a call of `module` ended with `output` (the log initialised).
PyObject* end(TreeLogObject* self, PyObject* module, PyObject* output) {
  if (self->leaves == nullptr) Py_RETURN_NONE;  // cleared by the collector
  State& s = *self->state;
  const uint32_t thread = thread_number(s, PyThread_get_thread_ident(), false);
  if (thread == UINT32_MAX) Py_RETURN_NONE;
  std::vector<OpenCall>& stack = s.open[thread];
  if (stack.empty() || stack.back().module != module) Py_RETURN_NONE;  // its begin was not seen
  const int64_t index = stack.back().index;
  stack.pop_back();
  if (index < 0) Py_RETURN_NONE;
  const uint64_t generation = s.generation;
  PyObject* keep = nullptr;
  PyObject* tensor = nullptr;  // the output described (borrowed from output or keep)
  std::string text;
  for (PyObject* t : tensors_of(self, output, &keep)) {
    if (s.skip.count(t) == 0) {
      tensor = t;
      text = describe(t);  // (Python may run: see describe_all)
      break;
    }
  }
  PyObject* result = nullptr;
  if (tensor != nullptr && s.generation == generation && static_cast<size_t>(index) < s.tree.calls.size()) {
    s.tree.calls[static_cast<size_t>(index)].output = std::move(text);
    result = Py_BuildValue("(LO)", static_cast<long long>(index), tensor);
  }
  Py_XDECREF(keep);
  if (result == nullptr && !PyErr_Occurred()) Py_RETURN_NONE;
  return result;
}

PyObject* log_end(PyObject* self_object, PyObject* args) {
  PyObject *module = nullptr, *output = nullptr;
  if (live(self_object) == nullptr || !PyArg_ParseTuple(args, "OO", &module, &output)) return nullptr;
  return end(reinterpret_cast<TreeLogObject*>(self_object), module, output);
}

PyObject* log_take(PyObject* self_object, PyObject*) {
  State* s = live(self_object);
  if (s == nullptr) return nullptr;
  const bool logged = !s->tree.calls.empty() || s->tree.omitted != 0;
  if (logged && (s->previous_payload.empty() || !(s->tree == s->previous))) {
    s->previous_payload = format_module_tree(s->tree);
    std::swap(s->previous, s->tree);  // (clear() empties what was the previous step's)
  }
  const std::string payload = logged ? s->previous_payload : std::string();
  const long long step = s->step.value_or(0);
  s->clear();  // (before any Python object is made: a collection may run Python code)
  if (!logged) Py_RETURN_NONE;
  PyObject* bytes = PyBytes_FromStringAndSize(payload.data(), static_cast<Py_ssize_t>(payload.size()));
  PyObject* out = bytes != nullptr ? Py_BuildValue("(OL)", bytes, step) : nullptr;
  Py_XDECREF(bytes);
  return out;
}

PyObject* description(const std::string& text_or_none) {
  if (text_or_none.empty()) Py_RETURN_NONE;
  return text(text_or_none);
}

PyObject* call_tuple(const ModuleTreeCall& c, uint32_t call) {
  PyObject* inputs = PyList_New(static_cast<Py_ssize_t>(c.inputs.size()));
  if (inputs == nullptr) return nullptr;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    PyObject* item = text(c.inputs[i]);
    if (item == nullptr) {
      Py_DECREF(inputs);
      return nullptr;
    }
    PyList_SetItem(inputs, static_cast<Py_ssize_t>(i), item);  // steals item
  }
  PyObject* path = text(c.path);
  PyObject* type = text(c.type);
  PyObject* output = description(c.output);
  PyObject* out = path != nullptr && type != nullptr && output != nullptr
      ? Py_BuildValue("(IIOOOO)", c.thread, call, path, type, inputs, output)
      : nullptr;
  Py_XDECREF(path);
  Py_XDECREF(type);
  Py_XDECREF(output);
  Py_DECREF(inputs);
  return out;
}

PyObject* log_take_parts(PyObject* self_object, PyObject* ends_object) {
  State* s = live(self_object);
  if (s == nullptr) return nullptr;
  PyObject* ends = PySequence_List(ends_object);
  if (ends == nullptr) return nullptr;
  const size_t size = s->tree.calls.size();
  std::vector<size_t> bounds{0};
  for (Py_ssize_t i = 0; i < PyList_Size(ends); ++i) {
    int64_t end = 0;
    if (!non_negative(PyList_GetItem(ends, i), "an end", &end)) {
      Py_DECREF(ends);
      return nullptr;
    }
    bounds.push_back(std::min(std::max(static_cast<size_t>(end), bounds.back()), size));
  }
  Py_DECREF(ends);
  bounds.push_back(size);
  const ModuleTree tree = std::move(s->tree);  // (taken before any Python object is made)
  s->clear();
  PyObject* parts = PyList_New(0);
  for (size_t p = 0; parts != nullptr && p + 1 < bounds.size(); ++p) {
    std::map<std::pair<uint32_t, std::string>, uint32_t> counts;  // calls numbered in the part
    PyObject* calls = PyList_New(0);
    for (size_t i = bounds[p]; calls != nullptr && i < bounds[p + 1]; ++i) {
      const ModuleTreeCall& c = tree.calls[i];
      PyObject* item = call_tuple(c, counts[{c.thread, c.path}]++);
      if (item == nullptr || PyList_Append(calls, item) != 0) Py_CLEAR(calls);
      Py_XDECREF(item);
    }
    const unsigned long long omitted = p + 2 == bounds.size() ? tree.omitted : 0;
    PyObject* part = calls != nullptr ? Py_BuildValue("(OK)", calls, omitted) : nullptr;
    Py_XDECREF(calls);
    if (part == nullptr || PyList_Append(parts, part) != 0) Py_CLEAR(parts);
    Py_XDECREF(part);
  }
  return parts;
}

PyObject* log_step(PyObject* self_object, void*) {
  State* s = live(self_object);
  if (s == nullptr) return nullptr;
  if (!s->step) Py_RETURN_NONE;
  return PyLong_FromLongLong(*s->step);
}

PyObject* log_empty(PyObject* self_object, void*) {
  State* s = live(self_object);
  if (s == nullptr) return nullptr;
  return PyBool_FromLong(s->tree.calls.empty() && s->tree.omitted == 0);
}

PyObject* log_position(PyObject* self_object, void*) {
  State* s = live(self_object);
  if (s == nullptr) return nullptr;
  return PyLong_FromSize_t(s->tree.calls.size());
}

PyMethodDef log_methods[] = {
    {"hook", log_hook, METH_VARARGS, "hook(path, type_name) -> a forward pre-hook that logs the module's calls"},
    {"begin", log_begin, METH_VARARGS, "begin(path, type_name, module, args): a call of module begins"},
    {"end", log_end, METH_VARARGS, "end(module, output) -> (index, tensor) of the call it ended, or None"},
    {"take", log_take, METH_NOARGS, "take() -> (payload bytes, step) of the step so far, or None; a fresh log"},
    {"take_parts", log_take_parts, METH_O, "take_parts(ends) -> [(calls, omitted)], split before each end"},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef log_getset[] = {
    {"step", log_step, nullptr, "the step the log is stamped with, or None", nullptr},
    {"empty", log_empty, nullptr, "whether nothing is logged", nullptr},
    {"position", log_position, nullptr, "how many calls are listed so far", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot log_slots[] = {
    {Py_tp_doc,
     const_cast<char*>("TreeLog(core, tensor_type, skip_ids, stamp, leaves, inert_hook): "
                       "a track's module tree log (tensorscope/_tree.py)")},
    {Py_tp_init, reinterpret_cast<void*>(log_init)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_traverse, reinterpret_cast<void*>(log_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(log_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(log_dealloc)},
    {Py_tp_methods, log_methods},
    {Py_tp_getset, log_getset},
    {0, nullptr},
};

PyType_Spec log_spec = {"tensorscope._native.TreeLog", sizeof(TreeLogObject), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, log_slots};

// ---- the forward pre-hook ----

// hook(module, args[, kwargs]): never raises into the model's forward.
PyObject* hook_call(PyObject* self_object, PyObject* args, PyObject*) {
  auto* self = reinterpret_cast<HookObject*>(self_object);
  auto* log = reinterpret_cast<TreeLogObject*>(self->log);
  if (log != nullptr && log->state != nullptr && PyTuple_Check(args) && PyTuple_Size(args) >= 2) {
    begin(log, *self->path, *self->type, PyTuple_GetItem(args, 0), PyTuple_GetItem(args, 1));
  }
  PyErr_Clear();
  Py_RETURN_NONE;
}

// A copy of the model (deepcopy, pickle, torch.save) gets what inert_hook() gives: the
// copy is not tracked.
PyObject* inert_hook_of(PyObject* self_object) {
  auto* log = reinterpret_cast<TreeLogObject*>(reinterpret_cast<HookObject*>(self_object)->log);
  return log != nullptr ? log->inert_hook : nullptr;
}

PyObject* hook_deepcopy(PyObject* self_object, PyObject*) { return inert_copy(inert_hook_of(self_object)); }

PyObject* hook_reduce(PyObject* self_object, PyObject*) { return inert_pickle(inert_hook_of(self_object)); }

int hook_traverse(PyObject* self_object, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self_object));
  Py_VISIT(reinterpret_cast<HookObject*>(self_object)->log);
  return 0;
}

int hook_clear(PyObject* self_object) {
  Py_CLEAR(reinterpret_cast<HookObject*>(self_object)->log);
  return 0;
}

void hook_dealloc(PyObject* self_object) {
  PyObject_GC_UnTrack(self_object);
  hook_clear(self_object);
  auto* self = reinterpret_cast<HookObject*>(self_object);
  delete self->path;
  delete self->type;
  free_instance(self_object);
}

PyMethodDef hook_methods[] = {
    {"__deepcopy__", hook_deepcopy, METH_O, "what the hook is in a copy of the model: inert"},
    {"__reduce__", hook_reduce, METH_NOARGS, "pickled as an inert hook"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot hook_slots[] = {
    {Py_tp_doc, const_cast<char*>("a TreeLog's forward pre-hook (TreeLog.hook)")},
    {Py_tp_call, reinterpret_cast<void*>(hook_call)},
    {Py_tp_traverse, reinterpret_cast<void*>(hook_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(hook_clear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(hook_dealloc)},
    {Py_tp_methods, hook_methods},
    {0, nullptr},
};

PyType_Spec hook_spec = {"tensorscope._native.TreeLogHook", sizeof(HookObject), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, hook_slots};

}  // namespace

bool add_tree_log(PyObject* module, ClientCore* (*core_of_object)(PyObject*)) {
  core_of = core_of_object;
  names = {PyUnicode_InternFromString("dtype"),      PyUnicode_InternFromString("shape"),
           PyUnicode_InternFromString("is_cuda"),    PyUnicode_InternFromString("is_cpu"),
           PyUnicode_InternFromString("get_device"), PyUnicode_InternFromString("device"),
           PyUnicode_InternFromString("type")};
  for (PyObject* name :
       {names.dtype, names.shape, names.is_cuda, names.is_cpu, names.get_device, names.device, names.type}) {
    if (name == nullptr) return false;
  }
  hook_type = PyType_FromSpec(&hook_spec);
  if (hook_type == nullptr) return false;
  PyObject* type = PyType_FromSpec(&log_spec);
  if (type == nullptr || PyModule_AddObject(module, "TreeLog", type) != 0) {
    Py_XDECREF(type);
    return false;
  }
  log_type = type;  // (the module holds it for its life)
  return true;
}

bool is_tree_log(PyObject* object) {
  return log_type != nullptr && PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(log_type)) &&
      reinterpret_cast<TreeLogObject*>(object)->state != nullptr;
}

void tree_log_end(PyObject* log, PyObject* module, PyObject* output) {
  if (!is_tree_log(log)) return;
  PyObject* ended = end(reinterpret_cast<TreeLogObject*>(log), module, output);
  Py_XDECREF(ended);
  PyErr_Clear();
}

}  // namespace tensorscope::python
