// track_policy_type.cc — see track_policy_type.h.
#include "track_policy_type.h"

#include <cstdint>
#include <string>
#include <vector>

#include "heap_types.h"
#include "py_args.h"
#include "track_policy.h"
#include "tensorscope/call_stacking.h"
#include "tensorscope/evaluation_calls.h"
#include "tensorscope/track_option_list.h"

namespace tensorscope::python {
namespace {

// The CallStacking named `object` (a str of kCallStackingNames); ValueError otherwise.
bool stacking_mode(PyObject* object, CallStacking* out) {
  std::string name;
  if (!utf8(object, "calls", &name)) return false;
  for (size_t m = 0; m < kCallStackingNames.size(); ++m) {
    if (name == kCallStackingNames[m]) {
      *out = static_cast<CallStacking>(m);
      return true;
    }
  }
  PyErr_Format(PyExc_ValueError, "calls %R is not one of auto, stacked, separate", object);
  return false;
}

struct LedgerObject {
  PyObject_HEAD
  StackLedger* ledger;
};

StackLedger* ledger_of(PyObject* self) {
  StackLedger* ledger = reinterpret_cast<LedgerObject*>(self)->ledger;
  if (ledger == nullptr) PyErr_SetString(PyExc_ValueError, "StackLedger.__init__ was not called");
  return ledger;
}

int ledger_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* mode_object = nullptr;
  static const char* keywords[] = {"mode", nullptr};
  CallStacking mode = CallStacking::kAuto;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", const_cast<char**>(keywords), &mode_object) ||
      !stacking_mode(mode_object, &mode)) {
    return -1;
  }
  auto* object = reinterpret_cast<LedgerObject*>(self);
  delete object->ledger;
  object->ledger = new StackLedger(mode);
  return 0;
}

void ledger_dealloc(PyObject* self) {
  auto* object = reinterpret_cast<LedgerObject*>(self);
  delete object->ledger;
  object->ledger = nullptr;
  free_instance(self);
}

// [(name, step, rows, dropped)] of stacks now complete.
PyObject* closed_list(const std::vector<StackLedger::Closed>& closed) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(closed.size()));
  for (size_t i = 0; list != nullptr && i < closed.size(); ++i) {
    const auto& c = closed[i];
    PyObject* item = Py_BuildValue("(NLnK)", text(c.name), static_cast<long long>(c.step),
                                   static_cast<Py_ssize_t>(c.rows), static_cast<unsigned long long>(c.dropped));
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SetItem(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// take(name, step, call, nbytes) -> (row, closed): row 0 hold, 1 reduce now, 2 drop.
PyObject* ledger_take(PyObject* self, PyObject* args) {
  StackLedger* ledger = ledger_of(self);
  PyObject* name_object = nullptr;
  long long step = 0;
  int call = 0;
  unsigned long long bytes = 0;
  std::string name;
  if (ledger == nullptr || !PyArg_ParseTuple(args, "OLiK", &name_object, &step, &call, &bytes) ||
      !utf8(name_object, "name", &name)) {
    return nullptr;
  }
  const StackLedger::Taken taken = ledger->take(name, step, call, static_cast<size_t>(bytes));
  return Py_BuildValue("(iN)", static_cast<int>(taken.row), closed_list(taken.closed));
}

PyObject* ledger_take_all(PyObject* self, PyObject*) {
  StackLedger* ledger = ledger_of(self);
  return ledger == nullptr ? nullptr : closed_list(ledger->take_all());
}

PyObject* ledger_seen(PyObject* self, PyObject*) {
  StackLedger* ledger = ledger_of(self);
  if (ledger == nullptr) return nullptr;
  const std::vector<std::string> seen = ledger->seen();
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(seen.size()));
  for (size_t i = 0; list != nullptr && i < seen.size(); ++i) {
    PyObject* item = text(seen[i]);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SetItem(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

bool call_number(PyObject* object, int* out) {
  int64_t call = 0;
  if (!non_negative(object, "call", &call)) return false;
  *out = call > INT32_MAX ? INT32_MAX : static_cast<int>(call);
  return true;
}

PyObject* ledger_wants(PyObject* self, PyObject* args) {
  StackLedger* ledger = ledger_of(self);
  PyObject *name_object = nullptr, *call_object = nullptr;
  std::string name;
  int call = 0;
  if (ledger == nullptr || !PyArg_ParseTuple(args, "OO", &name_object, &call_object) ||
      !utf8(name_object, "name", &name) || !call_number(call_object, &call)) {
    return nullptr;
  }
  return PyBool_FromLong(ledger->wants(name, call));
}

PyObject* ledger_alone(PyObject* self, PyObject* call_object) {
  StackLedger* ledger = ledger_of(self);
  int call = 0;
  if (ledger == nullptr || !call_number(call_object, &call)) return nullptr;
  return PyBool_FromLong(ledger->alone(call));
}

PyObject* ledger_may_take(PyObject* self, PyObject* call_object) {
  StackLedger* ledger = ledger_of(self);
  int call = 0;
  if (ledger == nullptr || !call_number(call_object, &call)) return nullptr;
  return PyBool_FromLong(ledger->may_take(call));
}

PyObject* ledger_stacking(PyObject* self, PyObject*) {
  StackLedger* ledger = ledger_of(self);
  return ledger == nullptr ? nullptr : PyBool_FromLong(ledger->stacking());
}

PyMethodDef ledger_methods[] = {
    {"take", ledger_take, METH_VARARGS,
     "take(name, step, call, nbytes) -> (row, closed): what to do with the call's row (ROW_HOLD, ROW_REDUCE_NOW, "
     "ROW_DROP) and [(name, step, rows, dropped)] of the stacks of an earlier step, complete now"},
    {"take_all", ledger_take_all, METH_NOARGS, "take_all() -> [(name, step, rows, dropped)] of every open stack"},
    {"seen", ledger_seen, METH_NOARGS, "seen() -> the stacked streams of modules seen with many calls"},
    {"wants", ledger_wants, METH_VARARGS, "wants(name, call) -> whether the call of stacked stream name is stacked"},
    {"alone", ledger_alone, METH_O, "alone(call) -> whether the call has a stream of its own"},
    {"may_take", ledger_may_take, METH_O, "may_take(call) -> whether the call can be a row of some stack"},
    {"stacking", ledger_stacking, METH_NOARGS, "stacking() -> whether the mode stacks calls at all"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot ledger_slots[] = {
    {Py_tp_doc, const_cast<char*>("StackLedger(mode): a track's stacked calls, counted (client/core/track_policy.h)")},
    {Py_tp_init, reinterpret_cast<void*>(ledger_init)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ledger_dealloc)},
    {Py_tp_methods, ledger_methods},
    {0, nullptr},
};

PyType_Spec ledger_spec = {"tensorscope._native.StackLedger", sizeof(LedgerObject), 0, Py_TPFLAGS_DEFAULT,
                           ledger_slots};

// route_call(mode, call, stacks) -> (own_stream, stack_row).
PyObject* route(PyObject*, PyObject* args) {
  PyObject *mode_object = nullptr, *call_object = nullptr;
  int stacks = 0;
  CallStacking mode = CallStacking::kAuto;
  int call = 0;
  if (!PyArg_ParseTuple(args, "OOp", &mode_object, &call_object, &stacks) || !stacking_mode(mode_object, &mode) ||
      !call_number(call_object, &call)) {
    return nullptr;
  }
  const CallRoute r = route_call(mode, call, stacks != 0);
  return Py_BuildValue("(OO)", r.own_stream ? Py_True : Py_False, r.stack_row ? Py_True : Py_False);
}

// step_gates(step, every_n, stats_every, capturing) -> (full, summarize).
PyObject* gates(PyObject*, PyObject* args) {
  long long step = 0, every_n = 0, stats_every = 0;
  int capturing = 0;
  if (!PyArg_ParseTuple(args, "LLLp", &step, &every_n, &stats_every, &capturing)) return nullptr;
  const StepGates g = step_gates(step, every_n, stats_every, capturing != 0);
  return Py_BuildValue("(OO)", g.full ? Py_True : Py_False, g.summarize ? Py_True : Py_False);
}

PyMethodDef functions[] = {
    {"route_call", route, METH_VARARGS,
     "route_call(mode, call, stacks) -> (own_stream, stack_row): what becomes of a module's call in a step"},
    {"step_gates", gates, METH_VARARGS,
     "step_gates(step, every_n, stats_every, capturing) -> (full, summarize): what a track does with a step"},
    {nullptr, nullptr, 0, nullptr},
};

// Every keyword of track_model and track_layer after the module, with the literal of its
// Python default (track_option_list.h).
struct PythonTrackOption {
  const char* name;
  const char* python_default;
};
#define TENSORSCOPE_PYTHON_TRACK_OPTION(Type, name, default_value, python_default) {#name, python_default},
#define TENSORSCOPE_PYTHON_ONLY_TRACK_OPTION(name, python_default) {#name, python_default},
// clang-format off
constexpr PythonTrackOption kPythonTrackOptions[] = {
    TENSORSCOPE_TRACK_OPTIONS(TENSORSCOPE_PYTHON_TRACK_OPTION)
    TENSORSCOPE_PYTHON_TRACK_OPTIONS(TENSORSCOPE_PYTHON_ONLY_TRACK_OPTION)};
// clang-format on
#undef TENSORSCOPE_PYTHON_TRACK_OPTION
#undef TENSORSCOPE_PYTHON_ONLY_TRACK_OPTION

bool add_dict(PyObject* module, const char* name, PyObject* dict, bool ok) {
  if (ok && PyModule_AddObject(module, name, dict) == 0) return true;
  Py_XDECREF(dict);
  return false;
}

// CALL_STACKING {mode: calls of a step with a stream of their own, -1 all}, STACKED_CALLS
// {suffix, row_length, max_rows, hold_bytes}, EVALUATION_CALLS (names by value),
// TRACK_POLICY {max_calls_per_step, row_hold, row_reduce_now, row_drop}, TRACK_REFUSALS
// {name: words with {0} and {1} for the counts}, TRACK_OPTIONS {keyword: its Python default
// as a literal}.
bool add_vocabularies(PyObject* module) {
  PyObject* modes = PyDict_New();
  bool ok = modes != nullptr;
  for (size_t m = 0; ok && m < kCallStackingNames.size(); ++m) {
    const auto mode = static_cast<CallStacking>(m);
    ok = put(modes, to_string(mode), PyLong_FromLong(separate_calls(mode)));
  }
  if (!add_dict(module, "CALL_STACKING", modes, ok)) return false;

  PyObject* stacked = PyDict_New();
  const std::string suffix(kStackedCallsSuffix);
  ok = stacked != nullptr && put(stacked, "suffix", text(suffix)) &&
      put(stacked, "row_length", PyLong_FromLongLong(kStackedRowLength)) &&
      put(stacked, "max_rows", PyLong_FromSize_t(kMaxStackedRows)) &&
      put(stacked, "hold_bytes", PyLong_FromSize_t(kStackedHoldBytes));
  if (!add_dict(module, "STACKED_CALLS", stacked, ok)) return false;

  PyObject* evaluation = PyTuple_New(static_cast<Py_ssize_t>(kEvaluationCallsNames.size()));
  ok = evaluation != nullptr;
  for (size_t i = 0; ok && i < kEvaluationCallsNames.size(); ++i) {
    PyObject* name = PyUnicode_FromString(kEvaluationCallsNames[i]);
    ok = name != nullptr && PyTuple_SetItem(evaluation, static_cast<Py_ssize_t>(i), name) == 0;
  }
  if (!add_dict(module, "EVALUATION_CALLS", evaluation, ok)) return false;

  PyObject* policy = PyDict_New();
  ok = policy != nullptr && put(policy, "max_calls_per_step", PyLong_FromLong(kMaxCallsPerStep)) &&
      put(policy, "row_hold", PyLong_FromLong(static_cast<long>(StackLedger::Row::kHold))) &&
      put(policy, "row_reduce_now", PyLong_FromLong(static_cast<long>(StackLedger::Row::kReduceNow))) &&
      put(policy, "row_drop", PyLong_FromLong(static_cast<long>(StackLedger::Row::kDrop)));
  if (!add_dict(module, "TRACK_POLICY", policy, ok)) return false;

  PyObject* refusals = PyDict_New();
  ok = refusals != nullptr;
  for (const TrackRefusalWords& refusal : kTrackRefusals) {
    const std::string name(refusal.name);
    ok = ok && put(refusals, name.c_str(), text(std::string(refusal.words)));
  }
  if (!add_dict(module, "TRACK_REFUSALS", refusals, ok)) return false;

  PyObject* options = PyDict_New();
  ok = options != nullptr;
  for (const PythonTrackOption& option : kPythonTrackOptions) {
    ok = ok && put(options, option.name, PyUnicode_FromString(option.python_default));
  }
  return add_dict(module, "TRACK_OPTIONS", options, ok);
}

}  // namespace

bool add_track_policy(PyObject* module) {
  PyObject* type = PyType_FromSpec(&ledger_spec);
  if (type == nullptr || PyModule_AddObject(module, "StackLedger", type) != 0) {
    Py_XDECREF(type);
    return false;
  }
  return PyModule_AddFunctions(module, functions) == 0 && add_vocabularies(module);
}

}  // namespace tensorscope::python
