// runtime_paths.h — where a session's socket and segments live, and the checks that
// keep that directory private.
//
// Used by the client and the daemon. The runtime directory is
// $TENSORSCOPE_RUNTIME_DIR when set, else /dev/shm/tensorscope-<uid> (tmpfs, so the
// segment files are shared memory); it must be a real directory owned by us with mode
// 0700. /dev/shm is shared by every user: when another user has taken that name first (a
// directory of theirs, or a symlink), the per-user $XDG_RUNTIME_DIR/tensorscope is used
// instead when $XDG_RUNTIME_DIR is ours (no one else can create names there); without
// it the client and daemon refuse the squatted directory with a clear error.
// Thread safety: free functions without shared state.
#pragma once

#include <string>

#include "tensorscope/base/status.h"

namespace tensorscope {

// `configured` overrides the environment when non-empty.
std::string default_runtime_dir(const std::string& configured = "");

// The automatic choice of default_runtime_dir: <shared_base>/tensorscope-<uid>, unless that
// name exists and is not a directory of ours (a symlink, a file, another user's
// directory) and `xdg_runtime_dir` (may be null) is an absolute directory of ours with
// mode 0700: then <xdg_runtime_dir>/tensorscope.
std::string automatic_runtime_dir(const std::string& shared_base, const char* xdg_runtime_dir);

// Creates the directory (mode 0700, parents as needed) if missing; refuses one that is a symlink, not
// owned by us, or open to group/others.
Status ensure_private_dir(const std::string& path);

std::string session_socket_path(const std::string& runtime_dir, const std::string& session);
std::string segment_file_name(const std::string& session, long pid, unsigned generation);
std::string segment_file_path(const std::string& runtime_dir, const std::string& session, long pid,
                              unsigned generation);

// The daemon's session lock: held (file_lock.h) by the one daemon serving `session`.
std::string session_lock_path(const std::string& runtime_dir, const std::string& session);
// Held by the client that is starting a daemon for `session` (ClientOptions::autostart),
// so that ranks starting together launch one daemon, not one each.
std::string autostart_lock_path(const std::string& runtime_dir, const std::string& session);

// The producer pid in a segment file name ("<session>.<pid>.<gen>.seg", or the hidden
// ".<session>.<pid>.<gen>.seg.creating" a segment has while it is being created);
// 0 when `file_name` is neither.
long segment_file_pid(const std::string& file_name);

// True when `file_name` is a segment file name this session could have produced
// (no '/', the session prefix, ".seg" suffix): used before opening a name a peer sent.
bool is_segment_file_name(const std::string& file_name, const std::string& session);

}  // namespace tensorscope
