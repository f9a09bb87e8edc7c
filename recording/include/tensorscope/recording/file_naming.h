// file_naming.h — turns stream, device and mode names into safe, unique file names.
//
// Used by the daemon's workers (video file names) and supervisor (index, cleanup).
// Names come from the training process through shared memory and are untrusted: the
// result is always a single path component made of [A-Za-z0-9._~-], never "", ".",
// "..", never starting with '.' or '-', and two different inputs never give the same
// component (up to a 32-bit hash collision among names that sanitize alike).
// Thread safety: pure functions, no shared state; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensorscope::recording {

inline constexpr std::size_t kMaxStreamComponentLength = 96;
// Device and mode components are shorter so that a whole file name, even with the
// temporary-name prefix, stays well under NAME_MAX (255).
inline constexpr std::size_t kMaxDeviceComponentLength = 32;
inline constexpr std::size_t kMaxModeComponentLength = 32;
inline constexpr char kTempVideoPrefix[] = ".tmp-";
inline constexpr char kVideoExtension[] = ".mp4";

// 64-bit FNV-1a of the bytes of `s` (stable across runs and platforms).
uint64_t fnv1a_64(const std::string& s);

// A safe file-name component for `name`, at most kMaxStreamComponentLength characters.
// Bytes outside [A-Za-z0-9._-] become '_', a leading '.' or '-' becomes '_', an empty
// name becomes "_". Whenever the result differs from `name` (sanitized or truncated),
// "~" and 8 hex digits of fnv1a_64(name) (its two 32-bit halves xor-ed) are appended,
// within the length limit. Since '~' never survives sanitizing, an unchanged name can
// never equal a changed one.
std::string sanitize_stream_name(const std::string& name);

// "<stream>__<device>__rank<rank>__pid<producer pid>__<mode>__<segment, 4+ digits>.mp4",
// e.g. "conv1.out__cpu__rank0__pid4242__histogram__0000.mp4": two training processes of
// the same rank (no RANK set, or two jobs in one session) never share a name. Every part
// is sanitized; in device and mode a "__" and a leading '_' are also replaced (with the
// hash suffix), so the name splits back from the right unambiguously. A pid outside
// [0, INT32_MAX] (pid_t) is written as 0. `segment` must be >= 0 (a negative one is a bug: aborts).
std::string video_file_name(const std::string& stream, const std::string& device, int rank, int64_t producer_pid,
                            const std::string& mode, int segment);

// The separation table of one projected stream (separation_table.h), relative to a
// session folder: "separation/<stream>__<device>__rank<rank>__pid<pid>__<mode>.csv", its
// parts as video_file_name spells them.
std::string separation_table_path(const std::string& stream, const std::string& device, int rank, int64_t producer_pid,
                                  const std::string& mode);

// Where the .npy sink (and the Python package's dump()) puts stream `stream`'s tensor
// of `step` and `rank`, relative to a session or run folder:
// "dumps/step_<step>/<sanitize_stream_name(stream)>_rank<rank>.npy".
std::string npy_dump_path(const std::string& stream, int64_t step, int rank);
// Beside it, the row labels the tensor came with (row_labels_format.h): the dump's path
// with ".labels.npy" for ".npy" (int64, one per row); class names, when the labels had
// them, one per line (line i names label i) in the same path with ".labels.txt".
std::string npy_labels_path(const std::string& stream, int64_t step, int rank);

// The hidden name a worker writes `final_name` under until it is finalized:
// ".tmp-<worker_pid>-<producer_id>-<final_name>", always ending in ".mp4". The producer
// id (unique within a daemon) keeps two registrations of one process apart.
std::string temp_video_file_name(const std::string& final_name, int worker_pid, uint64_t producer_id);

}  // namespace tensorscope::recording
