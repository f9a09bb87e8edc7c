// hdf5_test_files.h — helpers of the HDF5 tests: sample values of every dtype, records,
// a sink's default test options, a partial file as a killed writer leaves it, and the
// files read back with the HDF5 C API (H5File).
// Used by the recording and daemon unit tests. Thread safety: none needed (test code).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tensorscope/recording/hdf5_sink.h"

namespace tensorscope::testing {

using recording::Hdf5Record;
using recording::Hdf5Sink;
using recording::Hdf5SinkOptions;
using wire::DType;

// `n` distinct, exactly representable values of `dtype` (seeded by `seed`) as bytes.
inline std::string make_bytes(DType dtype, size_t n, int seed) {
  std::string out;
  auto put = [&out](const auto& x) { out.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  for (size_t i = 0; i < n; ++i) {
    const int v = static_cast<int>(i) * 3 + seed * 7 - 5;
    switch (dtype) {
      case DType::kFloat32: put(static_cast<float>(v) * 0.25f); break;
      case DType::kFloat64: put(static_cast<double>(v) * 0.125); break;
      // Arbitrary bit patterns, stored unchanged.
      case DType::kFloat16: put(static_cast<uint16_t>(0x3c00 + v * 17)); break;
      case DType::kBFloat16: put(static_cast<uint16_t>(0x3f80 + v * 13)); break;
      case DType::kInt8: put(static_cast<int8_t>(v)); break;
      case DType::kInt16: put(static_cast<int16_t>(v * 300)); break;
      case DType::kInt32: put(static_cast<int32_t>(v * 100000)); break;
      case DType::kInt64: put(static_cast<int64_t>(v) * 10000000000LL); break;
      case DType::kUInt8: put(static_cast<uint8_t>(v + 100)); break;
      case DType::kBool: put(static_cast<uint8_t>((i + seed) % 3 == 0 ? 1 : 0)); break;
      case DType::kInvalid: break;
    }
  }
  return out;
}

inline Hdf5Record make_record(const std::string& stream, DType dtype, std::vector<int64_t> shape,
                              const std::string& bytes, int64_t step, int rank = 0, const std::string& device = "cpu") {
  Hdf5Record r;
  r.stream = stream;
  r.kind = "activation";
  r.device = device;
  r.rank = rank;
  r.step = step;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.data = bytes.data();
  r.bytes = bytes.size();
  return r;
}

// ---- reading files back with the HDF5 C API ----

class H5File {
 public:
  explicit H5File(const std::string& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    id_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  }
  ~H5File() {
    if (id_ >= 0) H5Fclose(id_);
  }
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;
  bool ok() const { return id_ >= 0; }
  hid_t id() const { return id_; }

  bool has(const std::string& path) const { return H5Lexists(id_, path.c_str(), H5P_DEFAULT) > 0; }

  // Top-level group names.
  std::vector<std::string> groups() const {
    std::vector<std::string> names;
    H5Literate(
        id_, H5_INDEX_NAME, H5_ITER_INC, nullptr,
        [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
          static_cast<std::vector<std::string>*>(data)->push_back(name);
          return 0;
        },
        &names);
    return names;
  }

  // Dims of a dataset.
  std::vector<hsize_t> dims(const std::string& path) const {
    const hid_t d = H5Dopen2(id_, path.c_str(), H5P_DEFAULT);
    if (d < 0) return {};
    const hid_t s = H5Dget_space(d);
    std::vector<hsize_t> out(static_cast<size_t>(std::max(0, H5Sget_simple_extent_ndims(s))));
    H5Sget_simple_extent_dims(s, out.data(), nullptr);
    H5Sclose(s);
    H5Dclose(d);
    return out;
  }

  // The bytes of a whole dataset, read with its own file type (no conversion).
  std::string raw(const std::string& path) const {
    const hid_t d = H5Dopen2(id_, path.c_str(), H5P_DEFAULT);
    if (d < 0) return "<missing " + path + ">";
    const hid_t t = H5Dget_type(d);
    const hid_t s = H5Dget_space(d);
    const auto n = static_cast<size_t>(H5Sget_simple_extent_npoints(s));
    std::string out(n * H5Tget_size(t), '\0');
    if (n > 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) out = "<read error>";
    H5Sclose(s);
    H5Tclose(t);
    H5Dclose(d);
    return out;
  }

  template <typename T>
  std::vector<T> read(const std::string& path, hid_t mem_type) const {
    const hid_t d = H5Dopen2(id_, path.c_str(), H5P_DEFAULT);
    if (d < 0) return {};
    const hid_t s = H5Dget_space(d);
    std::vector<T> out(static_cast<size_t>(H5Sget_simple_extent_npoints(s)));
    if (!out.empty() && H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) {
      out.clear();
    }
    H5Sclose(s);
    H5Dclose(d);
    return out;
  }
  std::vector<int64_t> steps(const std::string& group) const {
    return read<int64_t>(group + "/steps", H5T_NATIVE_INT64);
  }
  std::vector<int32_t> ranks(const std::string& group) const {
    return read<int32_t>(group + "/ranks", H5T_NATIVE_INT32);
  }
  // Fixed-length, NUL-padded strings of wire::kDeviceBytes.
  std::vector<std::string> devices(const std::string& group) const {
    const std::string raw_bytes = raw(group + "/devices");
    std::vector<std::string> out;
    for (size_t i = 0; i + wire::kDeviceBytes <= raw_bytes.size(); i += wire::kDeviceBytes) {
      const std::string item = raw_bytes.substr(i, wire::kDeviceBytes);
      out.push_back(item.substr(0, item.find('\0')));
    }
    return out;
  }

  // A variable-length string attribute of an object.
  std::string string_attribute(const std::string& object, const std::string& name) const {
    const hid_t a = H5Aopen_by_name(id_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) return "<missing " + name + ">";
    const hid_t t = H5Aget_type(a);
    std::string out = "<not a variable-length string>";
    char* p = nullptr;
    if (H5Tis_variable_str(t) > 0 && H5Aread(a, t, &p) >= 0 && p != nullptr) {
      out = p;
      H5free_memory(p);
    }
    H5Tclose(t);
    H5Aclose(a);
    return out;
  }
  std::vector<int64_t> shape_attribute(const std::string& object) const {
    const hid_t a = H5Aopen_by_name(id_, object.c_str(), "shape", H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) return {};
    const hid_t s = H5Aget_space(a);
    std::vector<int64_t> out(static_cast<size_t>(H5Sget_simple_extent_npoints(s)));
    H5Aread(a, H5T_NATIVE_INT64, out.data());
    H5Sclose(s);
    H5Aclose(a);
    return out;
  }

  // The HDF5 class and size of a dataset's element type.
  std::pair<H5T_class_t, size_t> type_of(const std::string& path) const {
    const hid_t d = H5Dopen2(id_, path.c_str(), H5P_DEFAULT);
    if (d < 0) return {H5T_NO_CLASS, 0};
    const hid_t t = H5Dget_type(d);
    std::pair<H5T_class_t, size_t> out{H5Tget_class(t), H5Tget_size(t)};
    H5Tclose(t);
    H5Dclose(d);
    return out;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

inline Hdf5SinkOptions default_options() {
  Hdf5SinkOptions o;
  o.rotate_seconds = 0;  // tests rotate explicitly unless they test rotation
  return o;
}

// A complete recording of `steps` steps of int32 stream "a" (value = step), finalized
// as <dir>/<base>.0.h5 and then renamed to the partial name `.<base>.<n>.h5.partial`,
// as a writer killed just before its rename would leave it. Returns the partial path.
inline std::string make_readable_partial(const std::string& dir, const std::string& base, int steps, int n = 0) {
  const std::string scratch = dir + "/scratch";
  std::filesystem::create_directories(scratch);
  {
    Hdf5SinkOptions options = default_options();
    options.gzip_level = 0;  // sizes as written
    auto sink = Hdf5Sink::open(scratch, base, options);
    EXPECT_TRUE(sink.is_ok()) << sink.message();
    if (!sink.is_ok()) return "";
    for (int32_t step = 0; step < steps; ++step) {
      const std::string bytes(reinterpret_cast<const char*>(&step), sizeof(step));
      EXPECT_TRUE((*sink)->append(make_record("a", DType::kInt32, {1}, bytes, step)).is_ok());
    }
    EXPECT_TRUE((*sink)->finalize().is_ok());
  }
  const std::string partial = dir + "/." + base + "." + std::to_string(n) + ".h5.partial";
  std::filesystem::rename(scratch + "/" + base + ".0.h5", partial);
  std::filesystem::remove_all(scratch);
  return partial;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
}  // namespace tensorscope::testing
