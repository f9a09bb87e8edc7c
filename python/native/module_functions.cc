// module_functions.cc — see module_functions.h.
#include "module_functions.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core_options_args.h"
#include "dlpack_ref.h"
#include "module_tree_args.h"
#include "py_args.h"
#include "run_info.h"
#include "summaries.h"
#include "tensorscope/recording/file_naming.h"
#include "tensorscope/recording/job_groups.h"
#include "tensorscope/recording/npy_file.h"
#include "tensorscope/recording/shard_merge.h"
#include "tensorscope/recording/summary_table.h"
#include "tensorscope/recording/tensorboard_export.h"
#include "tensorscope/shared/output_dir.h"
#include "tensorscope/shared/session_name.h"
#include "tensorscope/shared/status_query.h"

namespace tensorscope::python {
namespace {

// format_module_tree(calls, omitted) -> the payload of a step's record: see
// module_tree_args.h for `calls`.
PyObject* format_module_tree(PyObject*, PyObject* args) {
  PyObject* calls = nullptr;
  unsigned long long omitted = 0;
  if (!PyArg_ParseTuple(args, "OK", &calls, &omitted)) return nullptr;
  tensorscope::ModuleTree tree;
  if (!tensorscope::python::module_tree_from_python(calls, omitted, &tree)) return nullptr;
  const std::string payload = tensorscope::format_module_tree(tree);
  return PyBytes_FromStringAndSize(payload.data(), static_cast<Py_ssize_t>(payload.size()));
}

// session_error(name) -> why the session name is invalid, or None.
PyObject* session_error(PyObject*, PyObject* name_object) {
  std::string name;
  if (!utf8(name_object, "session", &name)) return nullptr;
  const tensorscope::Status status = tensorscope::validate_session_name(name);
  if (status) Py_RETURN_NONE;
  return text(status.message());
}

// resolve_options(options) -> the options checked against the one table of client
// options (core_option_table.h) and completed with its defaults; TypeError/ValueError in
// the words the C++ client logs.
PyObject* resolve_options(PyObject*, PyObject* dict) {
  CoreOptions options;
  if (!tensorscope::python::read_core_options(dict, &options)) return nullptr;
  return tensorscope::python::core_options_dict(options);
}

// stream_name_error(name) -> why `name` cannot be a stream (or track) name, or None: the
// client core's rule (empty, 128 bytes or longer, control characters).
PyObject* stream_name_error(PyObject*, PyObject* name_object) {
  std::string name;
  if (!utf8(name_object, "name", &name)) return nullptr;
  const std::string why = tensorscope::stream_name_refusal(name);
  if (why.empty()) Py_RETURN_NONE;
  return text(why);
}

// run_info(rank, versions) -> the JSON text of what this process is (client/core/run_info.h:
// the document a client sends the daemon at registration); `versions` a dict of str.
PyObject* run_info(PyObject*, PyObject* args) {
  long long rank = 0;
  PyObject* versions_object = nullptr;
  if (!PyArg_ParseTuple(args, "LO", &rank, &versions_object)) return nullptr;
  if (!PyDict_Check(versions_object)) {
    PyErr_SetString(PyExc_TypeError, "versions must be a dict of str");
    return nullptr;
  }
  nlohmann::json versions = nlohmann::json::object();
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(versions_object, &pos, &key, &value)) {
    std::string k, v;
    if (!utf8(key, "a version name", &k) || !utf8(value, "a version", &v)) return nullptr;
    versions[k] = v;
  }
  std::string json;
  Py_BEGIN_ALLOW_THREADS  // reads /proc
      try {
    json = tensorscope::collect_run_info(static_cast<int>(rank), versions).dump(2);
  } catch (...) {
    json = "{}";
  }
  Py_END_ALLOW_THREADS return text(json);
}

// daemon_status(runtime_dir, session, timeout_ms) -> the JSON text of the daemon's status,
// or None when no daemon answers (shared/status_query.h).
PyObject* daemon_status(PyObject*, PyObject* args) {
  PyObject *dir_object = nullptr, *session_object = nullptr;
  int timeout_ms = 0;
  if (!PyArg_ParseTuple(args, "OOi", &dir_object, &session_object, &timeout_ms)) return nullptr;
  std::string dir, session;
  if (!utf8(dir_object, "runtime_dir", &dir) || !utf8(session_object, "session", &session)) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS try {
    auto status = tensorscope::query_daemon_status(dir, session, timeout_ms);
    if (status) json = status->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    json.clear();
  }
  Py_END_ALLOW_THREADS if (json.empty()) Py_RETURN_NONE;
  return text(json);
}

// `path_of(stream, step, rank)` of the arguments (stream, step, rank).
PyObject* stream_file_path(PyObject* args, std::string (*path_of)(const std::string&, int64_t, int)) {
  PyObject* stream_object = nullptr;
  long long step = 0;
  int rank = 0;
  if (!PyArg_ParseTuple(args, "OLi", &stream_object, &step, &rank)) return nullptr;
  std::string stream;
  if (!utf8(stream_object, "stream", &stream)) return nullptr;
  return text(path_of(stream, step, rank));
}

// dump_path(stream, step, rank) -> "dumps/step_<step>/<safe stream>_rank<rank>.npy"
PyObject* dump_path(PyObject*, PyObject* args) { return stream_file_path(args, tensorscope::recording::npy_dump_path); }

// labels_dump_path(stream, step, rank) -> "dumps/step_<step>/<safe stream>_rank<rank>.labels.npy"
PyObject* labels_dump_path(PyObject*, PyObject* args) {
  return stream_file_path(args, tensorscope::recording::npy_labels_path);
}

// write_npy(path, capsule, as_bool): the C-contiguous CPU tensor of a DLPack capsule as
// an .npy file, written as the daemon's .npy sink writes it (recording::write_npy:
// atomic, fsynced). None, or OSError/ValueError saying why.
PyObject* write_npy(PyObject*, PyObject* args) {
  PyObject* path_object = nullptr;
  PyObject* capsule = nullptr;
  int as_bool = 0;
  if (!PyArg_ParseTuple(args, "OOp", &path_object, &capsule, &as_bool)) return nullptr;
  std::string path, error;
  if (!utf8(path_object, "path", &path)) return nullptr;
  const tensorscope::dlpack::DLTensor* tensor = capsule_tensor(capsule, &error);
  tensorscope::TensorRef ref;
  if (tensor != nullptr) error = tensorscope::dlpack::to_tensor_ref(*tensor, as_bool != 0, 0, &ref);
  if (error.empty() && ref.device != tensorscope::DeviceType::kCpu) error = "the tensor is not on the CPU";
  if (error.empty() && !tensorscope::is_c_contiguous(ref)) error = "the tensor is not C-contiguous";
  if (!error.empty()) {
    PyErr_SetString(PyExc_ValueError, error.c_str());
    return nullptr;
  }
  const std::vector<int64_t> shape(ref.shape, ref.shape + ref.ndim);
  const size_t bytes = tensorscope::element_count(ref) * tensorscope::wire::dtype_size(ref.dtype);
  tensorscope::Status written;
  Py_BEGIN_ALLOW_THREADS written = tensorscope::recording::write_npy(path, ref.dtype, shape, ref.data, bytes);
  Py_END_ALLOW_THREADS if (!written) {
    PyErr_SetString(PyExc_OSError, written.message().c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// whole_summary_rows(tables) -> (lines, partial, incomplete, conflicting): the summary
// tables (a list of (path, text): <session>/summaries/rank<r>_pid<p>.csv and what it
// holds) read together, and the lines (CSV, no header) of the whole tensors their sharded
// rows make, the ranks of each job merged apart (recording/job_groups.h,
// recording/shard_merge.h), with the counts of those left out.
PyObject* whole_summary_rows(PyObject*, PyObject* tables) {
  if (!PyList_Check(tables)) {
    PyErr_SetString(PyExc_TypeError, "whole_summary_rows: a list of (path, text)");
    return nullptr;
  }
  std::vector<std::tuple<std::string, int, int64_t>> producers;
  std::vector<std::string> texts;
  for (Py_ssize_t i = 0; i < PyList_Size(tables); ++i) {
    PyObject* item = PyList_GetItem(tables, i);
    std::string path, text;
    if (!PyTuple_Check(item) || PyTuple_Size(item) != 2) {
      PyErr_SetString(PyExc_TypeError, "whole_summary_rows: a list of (path, text)");
      return nullptr;
    }
    if (!utf8(PyTuple_GetItem(item, 0), "a summary table's path", &path) ||
        !utf8(PyTuple_GetItem(item, 1), "a summary table", &text)) {
      return nullptr;
    }
    const size_t slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);  // <session>/summaries
    const size_t up = folder.rfind('/');
    int rank = -1;
    int64_t pid = -1;
    (void)recording::parse_summary_table_name(name, &rank, &pid);  // else: a job of its folder alone
    producers.emplace_back(up == std::string::npos ? "." : folder.substr(0, up), rank, pid);
    texts.push_back(std::move(text));
  }
  recording::JobGroups groups;
  const std::vector<size_t> job = recording::group_producers(producers, &groups);
  std::map<size_t, recording::ShardMerger> mergers;
  for (size_t i = 0; i < texts.size(); ++i) {
    recording::ShardMerger& merger = mergers[job[i]];
    recording::for_each_summary_table_row(texts[i], [&](const recording::SummaryTableRow& row) { merger.add(row); });
  }
  std::string lines;
  recording::ShardMerger::LeftOut left_out;
  for (auto& [id, merger] : mergers) {
    for (const recording::SummaryTableRow& row : merger.whole_rows()) lines += recording::summary_table_line(row);
    const recording::ShardMerger::LeftOut left = merger.left_out();
    left_out.partial += left.partial;
    left_out.incomplete += left.incomplete;
    left_out.conflicting += left.conflicting;
  }
  PyObject* text = PyUnicode_FromStringAndSize(lines.data(), static_cast<Py_ssize_t>(lines.size()));
  if (text == nullptr) return nullptr;
  return Py_BuildValue("(NKKK)", text, static_cast<unsigned long long>(left_out.partial),
                       static_cast<unsigned long long>(left_out.incomplete),
                       static_cast<unsigned long long>(left_out.conflicting));
}

// anomaly_markdown(anomaly_json, live_url, session) -> the anomaly as Markdown, with its
// link to the live page (recording/tensorboard_export.h: what the TensorBoard export writes).
PyObject* anomaly_markdown(PyObject*, PyObject* args) {
  PyObject *text_object = nullptr, *url_object = nullptr, *session_object = nullptr;
  if (!PyArg_ParseTuple(args, "OOO", &text_object, &url_object, &session_object)) return nullptr;
  std::string text, url, session;
  if (!utf8(text_object, "anomaly", &text) || !utf8(url_object, "live_url", &url) ||
      !utf8(session_object, "session", &session)) {
    return nullptr;
  }
  const nlohmann::json anomaly = nlohmann::json::parse(text, nullptr, false);
  if (!anomaly.is_object()) {
    PyErr_SetString(PyExc_ValueError, "anomaly_markdown: a JSON object");
    return nullptr;
  }
  const std::string md = recording::anomaly_markdown(anomaly, url, session);
  return PyUnicode_FromStringAndSize(md.data(), static_cast<Py_ssize_t>(md.size()));
}

// live_page_link(live_url, stream, rank, step) -> the live page's address at that stream,
// rank and step ("" without a live_url).
PyObject* live_page_link(PyObject*, PyObject* args) {
  PyObject *url_object = nullptr, *stream_object = nullptr;
  int rank = 0;
  long long step = 0;
  if (!PyArg_ParseTuple(args, "OOiL", &url_object, &stream_object, &rank, &step)) return nullptr;
  std::string url, stream;
  if (!utf8(url_object, "live_url", &url) || !utf8(stream_object, "stream", &stream)) return nullptr;
  const std::string link = recording::live_page_link(url, stream, rank, step);
  return PyUnicode_FromStringAndSize(link.data(), static_cast<Py_ssize_t>(link.size()));
}

// export_row(line) -> (step, rank, stream, steps, values) of one summary table line, the
// values those of EXPORT_METRICS in its order (None where the line has none:
// recording::export_metric); None for a header or a line that is not the table's.
PyObject* export_row(PyObject*, PyObject* line_object) {
  std::string line;
  if (!utf8(line_object, "line", &line)) return nullptr;
  recording::SummaryTableRow row;
  if (!recording::parse_summary_table_line(line, &row)) Py_RETURN_NONE;
  PyObject* values = PyTuple_New(static_cast<Py_ssize_t>(recording::kExportMetrics.size()));
  for (size_t i = 0; values != nullptr && i < recording::kExportMetrics.size(); ++i) {
    const double value = recording::export_metric(i, row.summary);
    PyObject* item = Py_None;
    if (std::isnan(value)) {
      Py_INCREF(Py_None);
    } else {
      item = PyFloat_FromDouble(value);
    }
    if (item == nullptr) {
      Py_CLEAR(values);
      break;
    }
    PyTuple_SetItem(values, static_cast<Py_ssize_t>(i), item);
  }
  if (values == nullptr) return nullptr;
  return Py_BuildValue(
      "(LiNLN)", static_cast<long long>(row.step), row.rank,
      PyUnicode_DecodeUTF8(row.summary.name.data(), static_cast<Py_ssize_t>(row.summary.name.size()), "replace"),
      static_cast<long long>(row.steps), values);
}

// session_dirs_under(path) -> [the session folders at or under `path`] (shared/output_dir.h).
PyObject* session_dirs_under(PyObject*, PyObject* path_object) {
  std::string path;
  if (!utf8(path_object, "path", &path)) return nullptr;
  const std::vector<std::string> found = tensorscope::session_dirs_under(path);
  PyObject* out = PyList_New(0);
  for (size_t i = 0; out != nullptr && i < found.size(); ++i) {
    PyObject* item = PyUnicode_FromString(found[i].c_str());
    if (item == nullptr || PyList_Append(out, item) != 0) {
      Py_XDECREF(item);
      Py_CLEAR(out);
      break;
    }
    Py_DECREF(item);
  }
  return out;
}

PyMethodDef functions[] = {
    {"session_dirs_under", session_dirs_under, METH_O,
     "session_dirs_under(path) -> the session folders at or under path (a common parent of several nodes')"},
    {"whole_summary_rows", whole_summary_rows, METH_O,
     "whole_summary_rows([(path, text)]) -> (csv lines, partial, incomplete, conflicting): the whole tensors of "
     "the tables' sharded rows, merged per job"},
    {"anomaly_markdown", anomaly_markdown, METH_VARARGS,
     "anomaly_markdown(anomaly_json, live_url, session) -> the anomaly as Markdown, linked to the live page"},
    {"export_row", export_row, METH_O,
     "export_row(line) -> (step, rank, stream, steps, values of EXPORT_METRICS) of a summary table line, or None"},
    {"live_page_link", live_page_link, METH_VARARGS,
     "live_page_link(live_url, stream, rank, step) -> the live page's address at that stream, rank and step"},
    {"dump_path", dump_path, METH_VARARGS,
     "dump_path(stream, step, rank) -> the .npy sink's file of a stream, relative to the run folder"},
    {"labels_dump_path", labels_dump_path, METH_VARARGS,
     "labels_dump_path(stream, step, rank) -> the .npy sink's file of a stream's row labels"},
    {"write_npy", write_npy, METH_VARARGS,
     "write_npy(path, capsule, as_bool) -> None: a contiguous CPU tensor as the .npy sink writes it"},
    {"session_error", session_error, METH_O, "session_error(name) -> why the session name is invalid, or None"},
    {"resolve_options", resolve_options, METH_O,
     "resolve_options(options) -> every client option, checked, with defaults for those not given"},
    {"stream_name_error", stream_name_error, METH_O,
     "stream_name_error(name) -> why the name cannot be a stream or track name, or None"},
    {"run_info", run_info, METH_VARARGS, "run_info(rank, versions) -> JSON text of this process's run_info"},
    {"daemon_status", daemon_status, METH_VARARGS,
     "daemon_status(runtime_dir, session, timeout_ms) -> the daemon's status as JSON text, or None"},
    {"format_module_tree", format_module_tree, METH_VARARGS,
     "format_module_tree(calls, omitted) -> the payload of a step's module tree record"},
    {"summarize", tensorscope::python::summarize, METH_VARARGS,
     "summarize(capsule, as_bool[, cast]) -> (numel, nan, inf, zeros, l2, max_abs, mean, std, numerics) of a CPU "
     "tensor, or why not"},
    {"update_ratio", tensorscope::python::update_ratio, METH_VARARGS,
     "update_ratio(now, before) -> |now - before| / |before| of two CPU tensors, or why not"},
    {"summary_from_device_values", tensorscope::python::summary_from_device_values, METH_VARARGS,
     "summary_from_device_values(values, numel, scaled[, ratio, cast]) -> (numel, nan, inf, zeros, l2, max_abs, "
     "mean, std, ratio, numerics) of a summary reduced on a GPU (DEVICE_SUMMARY_FIELDS ...), or why not"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool add_module_functions(PyObject* module) { return PyModule_AddFunctions(module, functions) == 0; }

}  // namespace tensorscope::python
