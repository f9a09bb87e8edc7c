// mapped_file.h — a file mapped read-only for `tensorscope compare`, and a guard that turns
// the bus error of reading a mapped page the file no longer has (another process truncated
// it while it was mapped) into a failed call instead of the death of the tool.
//
// Used by compare_npy_files and the .pt sources (compare/tensor_compare.cc,
// compare/torch_file_source.cc): comparing straight from the page cache, without the copy
// into a buffer that read() makes (it was a third of the comparison's time).
// catch_bus_error installs a process-wide SIGBUS handler on first use; the handler jumps
// back only into a catch_bus_error running on the faulting thread, and otherwise hands the
// signal to the action that was there before (the default one: the process ends, as it
// would have without this file). The code run under the guard must hold no object with a
// non-trivial destructor (the jump skips destructors): plain arithmetic over the mapping.
// Thread safety: a MappedFile is immutable after open(); catch_bus_error is per thread
// (each thread that touches a mapping guards itself).
#pragma once

#include <setjmp.h>

#include <cstdint>
#include <string>
#include <utility>

#include "tensorscope/base/status.h"

namespace tensorscope::compare {

class MappedFile {
 public:
  // Maps the whole of `path` read-only (a file of 0 bytes maps nothing: data() is null).
  // Errors name the file: it cannot be opened, it is not a regular file, mmap failed.
  static StatusOr<MappedFile> open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }  // as it was when mapped
  // True when the file is now shorter than it was when mapped (what a bus error means).
  bool shrunk() const;

 private:
  MappedFile() = default;
  std::string path_;
  int fd_ = -1;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
};

// The error of a comparison cut short by a bus error: "<name>: the file became shorter
// while it was compared (changed by another process?)".
Status shrank_while_compared(const std::string& name);

namespace detail {
// The jump target of this thread's innermost catch_bus_error, or null.
sigjmp_buf*& bus_error_target();
void install_bus_error_handler();  // once per process
}  // namespace detail

// Runs f() and returns true; returns false, with f's work cut short where it was, when
// f read a mapped page past the end of its file on this thread (SIGBUS).
template <typename F>
bool catch_bus_error(F&& f) {
  detail::install_bus_error_handler();
  sigjmp_buf target;
  sigjmp_buf* const outer = detail::bus_error_target();
  if (sigsetjmp(target, 1) != 0) {  // siglongjmp from the handler; the signal mask is restored
    detail::bus_error_target() = outer;
    return false;
  }
  detail::bus_error_target() = &target;
  std::forward<F>(f)();
  detail::bus_error_target() = outer;
  return true;
}

}  // namespace tensorscope::compare
