// file_lock.h — open file description (OFD) locks: who is alive, without a lock a dead
// process could hold.
//
// Used by the client (its segment is locked for as long as the client holds it), the
// daemon (its session lock, the segment cleanup) and the recording sinks (HDF5 writer
// lock). An OFD lock belongs to one open file description: the kernel drops it when the
// last descriptor of that description is closed, in particular when its process dies
// (kill -9 included), and closing another descriptor of the same file does not drop it
// (unlike classic fcntl locks). It is inherited by fork() with the descriptor.
// Thread safety: free functions without shared state.
#pragma once

#include <string>

namespace tensorscope {

// Takes an exclusive OFD lock on the whole file open as `fd` (open for writing) without
// waiting. Returns 0, or the errno: EAGAIN or EACCES when another open file description
// holds a lock on the file.
int try_lock_file(int fd);

// Whether `err` (from try_lock_file) means that somebody else holds the lock.
inline bool lock_held_elsewhere(int err) { return err == 11 /*EAGAIN*/ || err == 13 /*EACCES*/; }

enum class LockState { kFree, kHeld, kUnknown };

// Whether some open file description holds a lock on `path`, asked without taking one
// (F_OFD_GETLK). kUnknown when the file cannot be opened or asked.
LockState lock_state(const std::string& path);

}  // namespace tensorscope
