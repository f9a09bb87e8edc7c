// py_args.h — reading arguments of tensorscope._native's functions (Python C API,
// stable ABI). Each returns false with a Python exception set when the argument is not
// what it must be.
//
// Used by module.cc and module_tree_args.cc. Thread safety: call with the GIL held.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>

#include "dlpack_ref.h"

namespace tensorscope::python {

// Work on at least this many bytes (copies, summaries) runs without the GIL (below it,
// releasing costs more than it gives).
inline constexpr uint64_t kReleaseGilBytes = uint64_t{64} << 10;

// A str of UTF-8 text (undecodable bytes replaced); null with an exception if out of memory.
PyObject* text(const std::string& s);

// Adds `value` (a new reference, stolen, possibly null) as `dict[key]`; false on failure.
bool put(PyObject* dict, const char* key, PyObject* value);

// The UTF-8 text of a str; TypeError naming `what` otherwise.
bool utf8(PyObject* object, const char* what, std::string* out);

// The UTF-8 text of the last few str objects asked for, each held (a reference) with its
// text: a name passed again as the same object (a literal, a name built once) is not
// converted again. For the calls made on every push. The references live as long as
// the module (never released: a cache of a few names).
class Utf8Cache {
 public:
  // Like utf8(); *out points into the cache, valid until the next call.
  bool utf8(PyObject* object, const char* what, const std::string** out);

 private:
  static constexpr size_t kSlots = 16;
  PyObject* objects_[kSlots] = {};
  std::string texts_[kSlots];
  size_t next_ = 0;
};

// Whether a module call now is an evaluation forward a track leaves out: `training` is
// None (or null: nothing is left out) or (module, is_grad_enabled), torch.is_grad_enabled
// and the tracked model, and the call is one when module.training is false or
// is_grad_enabled() is. What cannot be read counts as training; never leaves an error set.
bool evaluation_call(PyObject* training);

// A non-negative int that fits in int64; TypeError/ValueError naming `what` otherwise.
bool non_negative(PyObject* object, const char* what, int64_t* out);

// The DLTensor of a DLPack capsule (borrowed: the capsule keeps it alive), or null with
// why in *error (no Python exception set).
const dlpack::DLTensor* capsule_tensor(PyObject* capsule, std::string* error);

}  // namespace tensorscope::python
