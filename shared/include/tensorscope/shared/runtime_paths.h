// runtime_paths.h — where a session's socket and segments live, and the checks that
// keep that directory private.
//
// Used by the client and the daemon. The runtime directory is
// $TENSORSCOPE_RUNTIME_DIR when set, else /dev/shm/tensorscope-<uid> (tmpfs, so the
// segment files are shared memory); it must be a real directory owned by us with mode
// 0700. Thread safety: free functions without shared state.
#pragma once

#include <string>

#include "tensorscope/shared/status.h"

namespace tensorscope {

// `configured` overrides the environment when non-empty.
std::string default_runtime_dir(const std::string& configured = "");

// Creates the directory (mode 0700, parents as needed) if missing; refuses one that is a symlink, not
// owned by us, or open to group/others.
Status ensure_private_dir(const std::string& path);

std::string session_socket_path(const std::string& runtime_dir, const std::string& session);
std::string segment_file_name(const std::string& session, long pid, unsigned generation);
std::string segment_file_path(const std::string& runtime_dir, const std::string& session,
                              long pid, unsigned generation);

// True when `file_name` is a segment file name this session could have produced
// (no '/', the session prefix, ".seg" suffix): used before opening a name a peer sent.
bool is_segment_file_name(const std::string& file_name, const std::string& session);

}  // namespace tensorscope
