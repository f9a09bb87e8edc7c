// core_options_args.cc — see core_options_args.h.
#include "core_options_args.h"

#include <cstring>
#include <string>
#include <vector>

#include "core_option_table.h"
#include "py_args.h"

namespace tensorscope::python {
namespace {

// The name of `value`'s type ("str", "float"), for a TypeError.
std::string type_name(PyObject* value) {
  PyObject* name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(value)), "__name__");
  std::string out = "object";
  if (name != nullptr) (void)utf8(name, "a type name", &out);
  Py_XDECREF(name);
  PyErr_Clear();
  return out;
}

bool fail(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  return false;
}

// Reads each option present in the dict; stops at the first problem (ok false, a Python
// exception set).
class DictReader {
 public:
  explicit DictReader(PyObject* dict) : dict_(dict) {}
  bool ok = true;

  void option(const char* name, std::string& out, option_rules::Text rule) {
    PyObject* value = find(name);
    if (value == nullptr) return;
    const bool is_path = rule.kind == option_rules::kPath;
    PyObject* path = is_path && !PyUnicode_Check(value) ? PyOS_FSPath(value) : nullptr;
    if (path == nullptr) PyErr_Clear();
    PyObject* text = path != nullptr ? path : value;
    if (!PyUnicode_Check(text)) {
      ok = fail(
          PyExc_TypeError,
          std::string(name) + (is_path ? " must be a str or path, not " : " must be a str, not ") + type_name(value));
    } else {
      ok = utf8(text, name, &out);
    }
    Py_XDECREF(path);
  }
  template <typename T>
  void option(const char* name, T& out, option_rules::Integer rule) {
    int64_t v = 0;
    if (PyObject* value = find(name); value != nullptr && read_int(name, value, rule, &v)) out = static_cast<T>(v);
  }
  void option(const char* name, double& out, option_rules::Number) {
    PyObject* value = find(name);
    if (value == nullptr) return;
    if (PyBool_Check(value) || !(PyLong_Check(value) || PyFloat_Check(value))) {
      ok = fail(PyExc_TypeError, std::string(name) + " must be a number, not " + type_name(value));
      return;
    }
    out = PyFloat_AsDouble(value);
    if (out == -1.0 && PyErr_Occurred()) ok = false;  // an int too large for a float
  }
  void option(const char* name, bool& out, option_rules::Flag) {
    PyObject* value = find(name);
    if (value == nullptr) return;
    if (!PyBool_Check(value)) {
      ok = fail(PyExc_TypeError, std::string(name) + " must be a bool, not " + type_name(value));
      return;
    }
    out = value == Py_True;
  }
  void option(const char* name, std::optional<int>& out, option_rules::Rank rule) {
    PyObject* value = find(name);
    if (value == nullptr || value == Py_None) return;
    int64_t v = 0;
    if (read_int(name, value, option_rules::Integer{rule.lo, rule.hi}, &v)) out = static_cast<int>(v);
  }

 private:
  PyObject* find(const char* name) { return ok ? PyDict_GetItemString(dict_, name) : nullptr; }

  bool read_int(const char* name, PyObject* value, const option_rules::Integer& rule, int64_t* out) {
    if (PyBool_Check(value) || !PyLong_Check(value)) {
      return ok = fail(PyExc_TypeError, std::string(name) + " must be an int, not " + type_name(value));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return ok = false;
    if (overflow != 0 || v < rule.lo || v > rule.hi) {
      std::string shown;
      PyObject* text = PyObject_Str(value);
      if (text == nullptr || !utf8(text, name, &shown)) PyErr_Clear();
      Py_XDECREF(text);
      return ok = fail(PyExc_ValueError, std::string(name) + " " + integer_bounds(rule) + ", not " + shown);
    }
    *out = v;
    return true;
  }

  PyObject* dict_;
};

// Each option's name (for the check of unknown keys).
struct Names {
  std::vector<const char*> names;
  template <typename T, typename Rule>
  void option(const char* n, const T&, Rule) {
    names.push_back(n);
  }
};

// {name: value}.
class DictWriter {
 public:
  explicit DictWriter(PyObject* dict) : dict_(dict) {}
  bool ok = true;

  void option(const char* n, const std::string& v, option_rules::Text) {
    put(n, PyUnicode_FromStringAndSize(v.data(), static_cast<Py_ssize_t>(v.size())));
  }
  template <typename T>
  void option(const char* n, const T& v, option_rules::Integer) {
    put(n, PyLong_FromLongLong(static_cast<long long>(v)));
  }
  void option(const char* n, const double& v, option_rules::Number) { put(n, PyFloat_FromDouble(v)); }
  void option(const char* n, const bool& v, option_rules::Flag) { put(n, PyBool_FromLong(v ? 1 : 0)); }
  void option(const char* n, const std::optional<int>& v, option_rules::Rank) {
    if (v.has_value()) {
      put(n, PyLong_FromLong(*v));
    } else {
      Py_INCREF(Py_None);
      put(n, Py_None);
    }
  }

 private:
  void put(const char* name, PyObject* value) {
    ok = ok && value != nullptr && PyDict_SetItemString(dict_, name, value) == 0;
    Py_XDECREF(value);
  }
  PyObject* dict_;
};

bool read_versions(PyObject* dict, CoreOptions* o) {
  PyObject* versions = PyDict_GetItemString(dict, "framework_versions");
  if (versions == nullptr) return true;
  if (!PyDict_Check(versions)) return fail(PyExc_TypeError, "framework_versions must be a dict");
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(versions, &pos, &key, &value)) {
    std::string k, v;
    if (!utf8(key, "a version name", &k) || !utf8(value, "a version", &v)) return false;
    o->framework_versions[k] = v;
  }
  return true;
}

}  // namespace

bool read_core_options(PyObject* dict, CoreOptions* options) {
  if (!PyDict_Check(dict)) return fail(PyExc_TypeError, "options must be a dict");
  Names known;
  visit_core_options(known, *options);
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    std::string name;
    if (!utf8(key, "an option name", &name)) return false;
    bool found = name == "framework_versions";
    for (const char* n : known.names) found = found || name == n;
    if (!found) return fail(PyExc_TypeError, "unknown option '" + name + "'");
  }
  DictReader reader(dict);
  visit_core_options(reader, *options);
  if (!reader.ok || !read_versions(dict, options)) return false;
  const std::string problem = core_options_problem(*options);
  return problem.empty() || fail(PyExc_ValueError, problem);
}

PyObject* core_options_dict(const CoreOptions& options) {
  PyObject* dict = PyDict_New();
  if (dict == nullptr) return nullptr;
  DictWriter writer(dict);
  visit_core_options(writer, options);
  if (writer.ok) return dict;
  Py_DECREF(dict);
  return nullptr;
}

}  // namespace tensorscope::python
