// hdf5_support.h — what the HDF5 sink and the HDF5 reader of `tensorscope compare` share:
// the file format's names, HDF5 error handling (no printed stacks, errors as text), and
// an owning handle for HDF5 identifiers.
//
// Used by a worker process (the HDF5 sink) and by the `tensorscope` tool (compare).
// Thread safety: the error stack and the printing setting are per thread in a
// thread-safe HDF5 build; call quiet_hdf5() at every entry point. A Hid is one owner.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

#include "tensorscope/base/status.h"

namespace tensorscope::recording {

// Root attribute `format` of every file the HDF5 sink writes.
inline constexpr char kHdf5FormatName[] = "tensorscope-hdf5";
// `values` attribute `encoding` of a bfloat16 stream stored as its uint16 bits.
inline constexpr char kHdf5BFloat16Encoding[] = "bfloat16-bits";

// Turns off HDF5's automatic printing of error stacks for the calling thread.
void quiet_hdf5();

// The messages of the current thread's HDF5 error stack, which is then cleared: the
// API call first, then the innermost frames (which name the cause, e.g. errno).
std::string hdf5_error_text();

// "<where>: <what>: <hdf5_error_text()>".
Status hdf5_error(const std::string& where, const std::string& what);

// Owns one HDF5 identifier and closes it with the matching H5?close function.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hid(Hid&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Hid& operator=(Hid&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  ~Hid() { reset(); }

  bool valid() const { return id_ >= 0; }
  hid_t get() const { return id_; }
  // Closes now; false (with the error on the HDF5 stack) when the close failed.
  bool close() {
    if (id_ < 0) return true;
    const herr_t r = closer_(std::exchange(id_, H5I_INVALID_HID));
    return r >= 0;
  }
  // Closes now, ignoring a failure (the error stack is left for the caller's message;
  // every HDF5 API call clears it on entry).
  void reset() {
    if (id_ >= 0) closer_(std::exchange(id_, H5I_INVALID_HID));
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

}  // namespace tensorscope::recording
