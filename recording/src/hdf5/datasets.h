// datasets.h — the HDF5 objects of a recording as the HDF5 sink makes them: the file
// types of stored elements and device names, string and integer attributes, datasets
// extendible along their first axis, and the writing of one row.
//
// Used inside a worker process by the HDF5 sink. See "Layout of a file" and "Stored
// element types" in docs/design/hdf5_recording.md. Functions returning a Hid return an
// invalid one on failure, with the error on the thread's HDF5 error stack. Thread
// safety: as the HDF5 library (Debian's serializes every call).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensorscope/base/status.h"
#include "tensorscope/recording/hdf5_support.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::recording::hdf5 {

// The HDF5 file type of `stored`, also used as the memory type (the bytes are written
// unchanged): little-endian IEEE and integer types; float16 laid out as h5py does for
// numpy float16; bfloat16 as its uint16 bits; bool as the enum h5py maps to numpy bool.
Hid make_type(wire::DType stored);

// Fixed-length device names (wire::kDeviceBytes, NUL-padded). Variable-length strings
// would cost a global-heap object per row and were measured 10x slower to append.
Hid make_device_type();

// A variable-length UTF-8 string.
Hid make_string_type();

// Writes the scalar string attribute `name` on `loc`. Errors name `where`.
Status write_string_attribute(hid_t loc, const char* name, const std::string& value, const std::string& where);

// Writes the attribute `name` of `type` on `loc`: a scalar (`scalar`) or `count`
// values. Errors name `where`.
Status write_int_attribute(hid_t loc, const char* name, hid_t type, const void* values, hsize_t count, bool scalar,
                           const std::string& where);

// An empty dataset [0, *inner] extendible along axis 0, chunked as `chunk`, with
// shuffle (items of more than one byte) and deflate when gzip_level > 0, and no fill
// values for fixed-size items (`item_size` > 0).
Hid create_dataset(hid_t group, const char* name, hid_t type, const std::vector<hsize_t>& inner,
                   const std::vector<hsize_t>& chunk, int gzip_level, size_t item_size);

// Grows `dataset` to `row` + 1 rows along axis 0 and writes one row (`row_dims` =
// [1, *inner]) at `row` from `data`; nothing is written when the row is empty. False
// on an HDF5 failure (the error on the stack).
bool write_row(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& row_dims, hsize_t row, const void* data);

}  // namespace tensorscope::recording::hdf5
