// recording_check.h — whether a file is a tensorscope HDF5 recording that HDF5 reads
// whole: its format attribute, its groups with their four datasets of one length, every
// chunk within each dataset's extent present, every value read back.
//
// Used inside a worker process by recover_stale_partials() (a dead writer's partial is
// kept only when it passes), before and after cutting a file back to its last flush.
// Call quiet_hdf5() first. Thread safety: as the HDF5 library (Debian's serializes
// every call); the file is opened read-only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::recording::hdf5 {

// Whether `path` is a tensorscope HDF5 recording that HDF5 reads whole (see
// recover_stale_partials in hdf5_sink.h); the reason when not. `rows_out` (when given)
// receives each group's name and row count. Cost: reads every dataset whole, in pieces
// of at most 16 MiB.
Status check_recording(const std::string& path, std::vector<std::pair<std::string, uint64_t>>* rows_out);

}  // namespace tensorscope::recording::hdf5
