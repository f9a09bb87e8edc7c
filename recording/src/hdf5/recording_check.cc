// recording_check.cc — see recording_check.h.
#include "hdf5/recording_check.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "tensorscope/recording/hdf5_support.h"

namespace tensorscope::recording::hdf5 {
namespace {

// The largest piece of a dataset read at once.
constexpr uint64_t kVerifyReadBytes = uint64_t{16} << 20;

// Reads all of `dataset` with its own type, in pieces of at most kVerifyReadBytes: a
// block of indices along one axis `k`, every index of the axes after it, one index of
// the axes before it.
Status read_whole_dataset(hid_t dataset, const std::string& where) {
  Hid type(H5Dget_type(dataset), H5Tclose);
  Hid space(H5Dget_space(dataset), H5Sclose);
  if (!type.valid() || !space.valid()) return hdf5_error(where, "cannot get type and space");
  const size_t item = H5Tget_size(type.get());
  const int ndims = H5Sget_simple_extent_ndims(space.get());
  if (item == 0 || ndims < 1) return Status::error(where + ": not a dataset of rows");
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return hdf5_error(where, "cannot get dims");
  }
  for (const hsize_t d : dims) {
    if (d == 0) return Status::ok();  // nothing stored
  }
  // Every chunk within the extent must exist: the writer writes each row it adds, so a
  // missing chunk is a row whose data never reached the file (reading it would give
  // fill values, not an error).
  Hid dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) {
    H5Eclear2(H5E_DEFAULT);
    return Status::error(where + ": not a chunked dataset");
  }
  std::vector<hsize_t> chunk(dims.size());
  if (H5Pget_chunk(dcpl.get(), ndims, chunk.data()) != ndims) {
    return hdf5_error(where, "cannot get the chunk dims");
  }
  uint64_t expected_chunks = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (chunk[i] == 0) return Status::error(where + ": a chunk dim is 0");
    const uint64_t along = (dims[i] + chunk[i] - 1) / chunk[i];
    if (along > std::numeric_limits<uint64_t>::max() / expected_chunks) {
      return Status::error(where + ": too many chunks");
    }
    expected_chunks *= along;
  }
  // H5Dget_num_chunks counts every chunk of the index, also chunks beyond the extent
  // (which a file cut back to its last flush may keep): fewer is a missing chunk; else
  // each chunk of the extent is looked up.
  hsize_t stored_chunks = 0;
  if (H5Dget_num_chunks(dataset, space.get(), &stored_chunks) < 0) {
    return hdf5_error(where, "cannot count chunks");
  }
  if (stored_chunks < expected_chunks) {
    return Status::error(where + ": " + std::to_string(stored_chunks) + " of " + std::to_string(expected_chunks) +
                         " chunks were written");
  }
  std::vector<hsize_t> at(dims.size(), 0);  // the first element of a chunk
  for (uint64_t c = 0; c < expected_chunks; ++c) {
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dataset, at.data(), &filter_mask, &address, &size) < 0) {
      return hdf5_error(where, "cannot look up a chunk");
    }
    if (size == 0) {
      return Status::error(where + ": the chunk at row " + std::to_string(at[0]) + " was never written");
    }
    for (size_t i = dims.size(); i-- > 0;) {  // the next chunk, last axis fastest
      at[i] += chunk[i];
      if (at[i] < dims[i]) break;
      at[i] = 0;
    }
  }
  // tail[i]: bytes of one index along axis i (all of the axes after it).
  std::vector<uint64_t> tail(dims.size());
  uint64_t bytes = item;
  for (size_t i = dims.size(); i-- > 0;) {
    tail[i] = bytes;
    bytes =
        dims[i] > std::numeric_limits<uint64_t>::max() / bytes ? std::numeric_limits<uint64_t>::max() : bytes * dims[i];
  }
  size_t k = 0;
  while (k + 1 < dims.size() && tail[k] > kVerifyReadBytes) ++k;
  const hsize_t block = static_cast<hsize_t>(std::clamp<uint64_t>(kVerifyReadBytes / tail[k], 1, dims[k]));
  std::vector<unsigned char> buffer(static_cast<size_t>(tail[k] * block));
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count(dims.size(), 1);
  for (size_t i = k + 1; i < dims.size(); ++i) count[i] = dims[i];
  for (;;) {
    count[k] = std::min<hsize_t>(block, dims[k] - start[k]);
    Hid memory(H5Screate_simple(ndims, count.data(), nullptr), H5Sclose);
    if (!memory.valid() ||
        H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Dread(dataset, type.get(), memory.get(), space.get(), H5P_DEFAULT, buffer.data()) < 0) {
      return hdf5_error(where, "cannot read");
    }
    // Next piece: along axis k, then to the next index of the axes before it.
    start[k] += count[k];
    if (start[k] < dims[k]) continue;
    start[k] = 0;
    bool done = true;
    for (size_t i = k; i-- > 0;) {
      if (++start[i] < dims[i]) {
        done = false;
        break;
      }
      start[i] = 0;
    }
    if (done) return Status::ok();
  }
}

}  // namespace

Status check_recording(const std::string& path, std::vector<std::pair<std::string, uint64_t>>* rows_out) {
  Hid file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) return hdf5_error(path, "cannot open");
  {
    Hid attribute(H5Aopen(file.get(), "format", H5P_DEFAULT), H5Aclose);
    if (!attribute.valid()) return hdf5_error(path, "no format attribute");
    // Read with the attribute's own type (a variable-length string, any character set).
    Hid text(H5Aget_type(attribute.get()), H5Tclose);
    if (!text.valid() || H5Tis_variable_str(text.get()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Status::error(path + ": the format attribute is not a variable-length string");
    }
    char* value = nullptr;
    if (H5Aread(attribute.get(), text.get(), &value) < 0) {
      return hdf5_error(path, "cannot read the format attribute");
    }
    const bool ours = value != nullptr && std::strcmp(value, kHdf5FormatName) == 0;
    if (value != nullptr) H5free_memory(value);
    if (!ours) return Status::error(path + ": not a tensorscope recording");
  }
  std::vector<std::string> groups;
  const herr_t listed = H5Literate(
      file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
      },
      &groups);
  if (listed < 0) return hdf5_error(path, "cannot list groups");
  if (groups.empty()) return Status::error(path + ": holds no tensors");
  for (const std::string& name : groups) {
    const std::string where = path + ": group '" + name + "'";
    Hid group(H5Gopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!group.valid()) return hdf5_error(where, "cannot open");
    hsize_t rows = 0;
    for (const char* dataset_name : {"values", "steps", "ranks", "devices"}) {
      const std::string at = where + " dataset '" + dataset_name + "'";
      Hid dataset(H5Dopen2(group.get(), dataset_name, H5P_DEFAULT), H5Dclose);
      if (!dataset.valid()) return hdf5_error(at, "cannot open");
      Hid space(H5Dget_space(dataset.get()), H5Sclose);
      const int ndims = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
      if (ndims < 1) return Status::error(at + ": not a dataset of rows");
      std::vector<hsize_t> dims(static_cast<size_t>(ndims));
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
      const bool index = std::strcmp(dataset_name, "values") != 0;
      if (!index) {
        rows = dims[0];
      } else if (ndims != 1 || dims[0] != rows) {
        return Status::error(at + ": " + std::to_string(dims[0]) + " rows, values has " + std::to_string(rows));
      }
      Status s = read_whole_dataset(dataset.get(), at);
      if (!s.is_ok()) return s;
    }
    if (rows_out != nullptr) rows_out->emplace_back(name, rows);
  }
  return Status::ok();
}

}  // namespace tensorscope::recording::hdf5
