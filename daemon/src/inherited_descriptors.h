// inherited_descriptors.h — closing what a process inherited from its parent.
//
// Used by the daemon in processes whose parent it does not control: `tensorscoped
// --detach` (started from inside a training process, whose sockets and pipes may lack
// close-on-exec) and the run_info helper (a forked supervisor must not keep producers'
// sockets or segments open). Thread safety: meant for a process that is still
// single-threaded.
#pragma once

namespace tensorscope::daemon {

// Closes every descriptor from 3 up (close_range, else one by one).
void close_inherited_descriptors();

}  // namespace tensorscope::daemon
