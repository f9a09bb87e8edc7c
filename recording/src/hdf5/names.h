// names.h — the names inside and around an HDF5 recording: a stream's group name (the
// stream name escaped into an HDF5 link name) and the partial files' names.
//
// Used inside a worker process by the HDF5 sink and by recover_stale_partials(). See
// "Files, names and rotation" and "Group names" in docs/design/hdf5_recording.md.
// Thread safety: pure functions.
#pragma once

#include <string>

namespace tensorscope::recording::hdf5 {

// A file being written is `.<stem><kPartialSuffix>` (see Hdf5Sink::partial_path()).
inline constexpr char kPartialSuffix[] = ".h5.partial";

// The stream name as an HDF5 link name: '%', '/', '@', control bytes (below 0x20, and
// 0x7f) and, in a name of dots only, every '.' become %XX (upper-case hex); every other
// byte (UTF-8 included) is kept. Distinct names stay distinct; '@' is left free for the
// layout suffix ("@1", "@2", ...).
std::string group_base_name(const std::string& stream);

// ".<stem>.h5.partial" with a non-empty stem: the stem; "" otherwise.
std::string partial_stem(const std::string& name);

}  // namespace tensorscope::recording::hdf5
