// datasets.cc — see datasets.h.
#include "hdf5/datasets.h"

#include <algorithm>
#include <cstdint>

namespace tensorscope::recording::hdf5 {

Hid make_type(wire::DType stored) {
  hid_t base = H5I_INVALID_HID;
  switch (stored) {
    case wire::DType::kFloat32: base = H5T_IEEE_F32LE; break;
    case wire::DType::kFloat64: base = H5T_IEEE_F64LE; break;
    case wire::DType::kBFloat16: base = H5T_STD_U16LE; break;
    case wire::DType::kInt8: base = H5T_STD_I8LE; break;
    case wire::DType::kInt16: base = H5T_STD_I16LE; break;
    case wire::DType::kInt32: base = H5T_STD_I32LE; break;
    case wire::DType::kInt64: base = H5T_STD_I64LE; break;
    case wire::DType::kUInt8: base = H5T_STD_U8LE; break;
    case wire::DType::kFloat16: {
      // IEEE binary16, laid out as h5py does for numpy float16.
      Hid t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
      if (!t.valid() || H5Tset_fields(t.get(), 15, 10, 5, 0, 10) < 0 || H5Tset_size(t.get(), 2) < 0 ||
          H5Tset_ebias(t.get(), 15) < 0) {
        return Hid();
      }
      return t;
    }
    case wire::DType::kBool: {
      // The enum h5py maps to numpy bool.
      Hid t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
      const int8_t no = 0;
      const int8_t yes = 1;
      if (!t.valid() || H5Tenum_insert(t.get(), "FALSE", &no) < 0 || H5Tenum_insert(t.get(), "TRUE", &yes) < 0) {
        return Hid();
      }
      return t;
    }
    case wire::DType::kInvalid: break;
  }
  if (base == H5I_INVALID_HID) return Hid();
  return Hid(H5Tcopy(base), H5Tclose);
}

Hid make_device_type() {
  Hid t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), wire::kDeviceBytes) < 0 || H5Tset_strpad(t.get(), H5T_STR_NULLPAD) < 0) {
    return Hid();
  }
  return t;
}

Hid make_string_type() {
  Hid t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), H5T_VARIABLE) < 0 || H5Tset_cset(t.get(), H5T_CSET_UTF8) < 0) {
    return Hid();
  }
  return t;
}

Status write_string_attribute(hid_t loc, const char* name, const std::string& value, const std::string& where) {
  Hid type = make_string_type();
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.valid() || !space.valid()) return hdf5_error(where, "cannot make attribute types");
  Hid attr(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* text = value.c_str();
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), &text) < 0) {
    return hdf5_error(where, std::string("cannot write attribute '") + name + "'");
  }
  return Status::ok();
}

Status write_int_attribute(hid_t loc, const char* name, hid_t type, const void* values, hsize_t count, bool scalar,
                           const std::string& where) {
  Hid space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &count, nullptr), H5Sclose);
  if (!space.valid()) return hdf5_error(where, "cannot make an attribute space");
  Hid attr(H5Acreate2(loc, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid() || H5Awrite(attr.get(), type, values) < 0) {
    return hdf5_error(where, std::string("cannot write attribute '") + name + "'");
  }
  return Status::ok();
}

Hid create_dataset(hid_t group, const char* name, hid_t type, const std::vector<hsize_t>& inner,
                   const std::vector<hsize_t>& chunk, int gzip_level, size_t item_size) {
  std::vector<hsize_t> dims{0};
  std::vector<hsize_t> max_dims{H5S_UNLIMITED};
  for (const hsize_t d : inner) {
    dims.push_back(d);
    // A zero dim cannot hold a chunk of one element as a fixed dim: make it unlimited.
    max_dims.push_back(d == 0 ? H5S_UNLIMITED : d);
  }
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()), H5Sclose);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!space.valid() || !dcpl.valid()) return Hid();
  if (H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0) return Hid();
  // Every row is written, so no fill values (HDF5 refuses this for variable-length types).
  if (item_size > 0 && H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) return Hid();
  if (gzip_level > 0) {
    if (item_size > 1 && H5Pset_shuffle(dcpl.get()) < 0) return Hid();
    if (H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip_level)) < 0) return Hid();
  }
  return Hid(H5Dcreate2(group, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
}

bool write_row(hid_t dataset, hid_t mem_type, const std::vector<hsize_t>& row_dims, hsize_t row, const void* data) {
  std::vector<hsize_t> extent = row_dims;
  extent[0] = row + 1;
  if (H5Dset_extent(dataset, extent.data()) < 0) return false;
  const bool empty = std::any_of(row_dims.begin(), row_dims.end(), [](hsize_t d) { return d == 0; });
  if (empty) return true;
  Hid file_space(H5Dget_space(dataset), H5Sclose);
  Hid mem_space(H5Screate_simple(static_cast<int>(row_dims.size()), row_dims.data(), nullptr), H5Sclose);
  if (!file_space.valid() || !mem_space.valid()) return false;
  std::vector<hsize_t> start(row_dims.size(), 0);
  start[0] = row;
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, row_dims.data(), nullptr) < 0) {
    return false;
  }
  return H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data) >= 0;
}

}  // namespace tensorscope::recording::hdf5
