// hash.h — the 64-bit hash of the HDF5 sink: XXH64 with seed 0, written out here so that
// the recording library needs no hashing library.
//
// Used inside a worker process by the HDF5 sink (change detection compares a value's
// hash with the previous one's; flush markers hash group names and checksum themselves)
// and by recover_stale_partials(). The values are stored in files (flush markers), so the
// function must never change. Thread safety: a pure function.
#pragma once

#include <cstdint>

namespace tensorscope::recording::hdf5 {

// XXH64(data, n, seed 0).
uint64_t hash_bytes(const void* data, uint64_t n);

}  // namespace tensorscope::recording::hdf5
