#include "compare/hdf5_recording.h"

#include <hdf5.h>

#include "tensorscope/recording/hdf5_support.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace tensorscope::compare {
namespace {

namespace fs = std::filesystem;

StatusOr<recording::Hid> open_file(const std::string& file) {
  recording::quiet_hdf5();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return Status::error(file + ": not a regular file");
  recording::Hid f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.valid()) return recording::hdf5_error(file, "cannot open as an HDF5 file (corrupt or not HDF5)");
  return f;
}

// Reads a string attribute (variable- or fixed-length); nullopt-like: found=false.
StatusOr<std::string> read_string_attr(hid_t obj, const char* attr_name, bool* found) {
  *found = false;
  const htri_t exists = H5Aexists(obj, attr_name);
  if (exists < 0) return Status::error(std::string("attribute ") + attr_name + ": " + recording::hdf5_error_text());
  if (exists == 0) return std::string();
  recording::Hid attr(H5Aopen(obj, attr_name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return Status::error(std::string("attribute ") + attr_name + ": " + recording::hdf5_error_text());
  recording::Hid type(H5Aget_type(attr.get()), H5Tclose);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING) {
    H5Eclear2(H5E_DEFAULT);
    return Status::error(std::string("attribute ") + attr_name + " is not a string");
  }
  std::string value;
  if (H5Tis_variable_str(type.get()) > 0) {
    recording::Hid mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attr.get(), mem.get(), &text) < 0) {
      return Status::error(std::string("attribute ") + attr_name + ": " + recording::hdf5_error_text());
    }
    if (text != nullptr) value = text;
    H5free_memory(text);
  } else {
    const size_t size = H5Tget_size(type.get());
    std::string buffer(size, '\0');
    if (H5Aread(attr.get(), type.get(), buffer.data()) < 0) {
      return Status::error(std::string("attribute ") + attr_name + ": " + recording::hdf5_error_text());
    }
    value = buffer.substr(0, buffer.find('\0'));
  }
  *found = true;
  return value;
}

wire::DType dtype_from_name(const std::string& name) {
  for (uint8_t i = 1; i <= wire::kMaxDType; ++i) {
    const auto dtype = static_cast<wire::DType>(i);
    if (name == wire::dtype_name(dtype)) return dtype;
  }
  return wire::DType::kInvalid;
}

// Dims of a dataset's dataspace.
StatusOr<std::vector<hsize_t>> dataset_dims(hid_t dataset) {
  recording::Hid space(H5Dget_space(dataset), H5Sclose);
  if (!space.valid()) return Status::error(recording::hdf5_error_text());
  const int ndims = H5Sget_simple_extent_ndims(space.get());
  if (ndims < 0) return Status::error(recording::hdf5_error_text());
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  if (ndims > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return Status::error(recording::hdf5_error_text());
  }
  return dims;
}

// Reads the 1-d dataset `name` of `group` (n elements) as `mem_type`.
template <typename T>
Status read_index(hid_t group, const char* name, hid_t mem_type, hsize_t n, std::vector<T>* out) {
  recording::Hid ds(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return Status::error(std::string(name) + ": " + recording::hdf5_error_text());
  auto dims = dataset_dims(ds.get());
  if (!dims) return Status::error(std::string(name) + ": " + dims.message());
  if (dims->size() != 1 || (*dims)[0] != n) {
    return Status::error(std::string(name) + " has " +
                         (dims->empty() ? std::string("no") : std::to_string((*dims)[0])) + " rows, values has " +
                         std::to_string(n));
  }
  out->assign(n, T{});
  if (n > 0 && H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data()) < 0) {
    return Status::error(std::string(name) + ": " + recording::hdf5_error_text());
  }
  return Status::ok();
}

// Lists the rows of one group into `out`.
Status list_group(const std::string& file, hid_t f, const std::string& group_name, std::vector<Hdf5Tensor>* out) {
  const std::string where = file + ": group '" + group_name + "'";
  recording::Hid group(H5Gopen2(f, group_name.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.valid()) return Status::error(where + ": " + recording::hdf5_error_text());
  bool found = false;
  auto stream = read_string_attr(group.get(), "stream", &found);
  if (!stream) return Status::error(where + ": " + stream.message());
  if (!found) return Status::error(where + ": no 'stream' attribute");
  auto dtype_text = read_string_attr(group.get(), "dtype", &found);
  if (!dtype_text) return Status::error(where + ": " + dtype_text.message());
  if (!found) return Status::error(where + ": no 'dtype' attribute");
  const wire::DType dtype = dtype_from_name(*dtype_text);
  if (dtype == wire::DType::kInvalid) {
    return Status::error(where + ": unknown dtype '" + *dtype_text + "'");
  }

  recording::Hid values(H5Dopen2(group.get(), "values", H5P_DEFAULT), H5Dclose);
  if (!values.valid()) return Status::error(where + ": values: " + recording::hdf5_error_text());
  auto dims = dataset_dims(values.get());
  if (!dims) return Status::error(where + ": values: " + dims.message());
  if (dims->empty()) return Status::error(where + ": values has no rows dimension");
  recording::Hid type(H5Dget_type(values.get()), H5Tclose);
  if (!type.valid()) return Status::error(where + ": values: " + recording::hdf5_error_text());
  if (H5Tget_size(type.get()) != wire::dtype_size(dtype)) {
    return Status::error(where + ": values elements are " + std::to_string(H5Tget_size(type.get())) + " bytes, dtype " +
                         *dtype_text + " needs " + std::to_string(wire::dtype_size(dtype)));
  }
  if (dtype == wire::DType::kBFloat16) {
    auto encoding = read_string_attr(values.get(), "encoding", &found);
    if (!encoding) return Status::error(where + ": values: " + encoding.message());
    if (!found || *encoding != recording::kHdf5BFloat16Encoding) {
      return Status::error(where + ": bfloat16 values without encoding = \"" +
                           std::string(recording::kHdf5BFloat16Encoding) + "\"");
    }
  }
  const hsize_t rows = (*dims)[0];
  std::vector<int64_t> shape((*dims).begin() + 1, (*dims).end());

  std::vector<int64_t> steps;
  Status read = read_index(group.get(), "steps", H5T_NATIVE_INT64, rows, &steps);
  if (!read) return Status::error(where + ": " + read.message());
  std::vector<int32_t> ranks(rows, 0);
  const htri_t has_ranks = H5Lexists(group.get(), "ranks", H5P_DEFAULT);
  if (has_ranks > 0) {
    read = read_index(group.get(), "ranks", H5T_NATIVE_INT32, rows, &ranks);
    if (!read) return Status::error(where + ": " + read.message());
  } else {
    H5Eclear2(H5E_DEFAULT);
  }
  for (hsize_t row = 0; row < rows; ++row) {
    Hdf5Tensor t;
    t.file = file;
    t.group = group_name;
    t.stream = *stream;
    t.row = row;
    t.step = steps[row];
    t.rank = ranks[row];
    t.dtype = dtype;
    t.shape = shape;
    out->push_back(std::move(t));
  }
  return Status::ok();
}

uint64_t elements_of(const std::vector<int64_t>& dims, size_t from) {
  uint64_t n = 1;
  for (size_t d = from; d < dims.size(); ++d) n *= static_cast<uint64_t>(dims[d]);
  return n;
}

}  // namespace

StatusOr<std::vector<Hdf5Tensor>> list_recording(const std::string& file) {
  auto f = open_file(file);
  if (!f) return f.status();
  bool found = false;
  auto format = read_string_attr(f->get(), "format", &found);
  if (!format) return Status::error(file + ": " + format.message());
  if (!found || *format != recording::kHdf5FormatName) {
    return Status::error(file + ": not a tensorscope HDF5 recording (root attribute format is not \"" +
                         std::string(recording::kHdf5FormatName) + "\")");
  }
  H5G_info_t info;
  if (H5Gget_info(f->get(), &info) < 0) return recording::hdf5_error(file, "cannot list groups");
  std::vector<std::string> groups;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(f->get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0) return recording::hdf5_error(file, "cannot list groups");
    std::string name(static_cast<size_t>(len) + 1, '\0');
    if (H5Lget_name_by_idx(f->get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0) {
      return recording::hdf5_error(file, "cannot list groups");
    }
    name.resize(static_cast<size_t>(len));
    groups.push_back(std::move(name));
  }
  std::vector<Hdf5Tensor> tensors;
  for (const std::string& group : groups) {
    Status listed = list_group(file, f->get(), group, &tensors);
    if (!listed) return listed;
  }
  return tensors;
}

struct Hdf5RowReader::Open {
  std::string file, group;  // what file_id / values belong to
  struct stat identity {};  // of `file` when opened: a file replaced or rewritten is reopened
  recording::Hid file_id, values, type;
};

namespace {

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
      a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

Hdf5RowReader::Hdf5RowReader() : open_(new Open) {}
Hdf5RowReader::~Hdf5RowReader() = default;

void Hdf5RowReader::close() { open_.reset(new Open); }

Status Hdf5RowReader::read(const Hdf5Tensor& tensor, uint64_t first, uint64_t count, unsigned char* out) {
  recording::quiet_hdf5();
  Open& o = *open_;
  const std::string where = tensor.file + " (group '" + tensor.group + "', row " + std::to_string(tensor.row) + ")";
  struct stat now {};
  if (::stat(tensor.file.c_str(), &now) != 0) {
    return Status::from_errno(where, errno);
  }
  if (!o.file_id.valid() || o.file != tensor.file || !same_file(o.identity, now)) {
    o.values.reset();
    o.type.reset();
    o.file_id.reset();
    o.group.clear();
    auto f = open_file(tensor.file);
    if (!f) return f.status();
    o.file_id = std::move(*f);
    o.file = tensor.file;
    o.identity = now;
  }
  if (!o.values.valid() || o.group != tensor.group) {
    o.type.reset();
    o.values.reset();
    o.group.clear();
    const std::string path = tensor.group + "/values";
    o.values = recording::Hid(H5Dopen2(o.file_id.get(), path.c_str(), H5P_DEFAULT), H5Dclose);
    if (!o.values.valid()) return recording::hdf5_error(tensor.file, "cannot open " + path);
    o.type = recording::Hid(H5Dget_type(o.values.get()), H5Tclose);
    if (!o.type.valid()) return recording::hdf5_error(tensor.file, "cannot open " + path);
    if (H5Tget_size(o.type.get()) != wire::dtype_size(tensor.dtype)) {
      return Status::error(where + ": values elements are not " + std::to_string(wire::dtype_size(tensor.dtype)) +
                           " bytes");
    }
    o.group = tensor.group;
  }
  const size_t ndims = tensor.shape.size() + 1;
  std::vector<hsize_t> start(ndims, 0), counts(ndims, 1);
  start[0] = tensor.row;
  uint64_t n = 1;
  if (tensor.shape.empty()) {
    if (first != 0 || count != 1) return Status::error(where + ": a 0-d tensor is read whole");
  } else {
    if (count == 0 || first > static_cast<uint64_t>(tensor.shape[0]) ||
        count > static_cast<uint64_t>(tensor.shape[0]) - first) {
      return Status::error(where + ": slices " + std::to_string(first) + "+" + std::to_string(count) +
                           " are outside the tensor");
    }
    start[1] = first;
    counts[1] = count;
    for (size_t d = 1; d < tensor.shape.size(); ++d) counts[d + 1] = static_cast<hsize_t>(tensor.shape[d]);
    n = count * elements_of(tensor.shape, 1);
  }
  if (n == 0) return Status::ok();
  recording::Hid space(H5Dget_space(o.values.get()), H5Sclose);
  const hsize_t mem_dims[1] = {n};
  recording::Hid mem(H5Screate_simple(1, mem_dims, nullptr), H5Sclose);
  if (!space.valid() || !mem.valid() ||
      H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, counts.data(), nullptr) < 0 ||
      H5Dread(o.values.get(), o.type.get(), mem.get(), space.get(), H5P_DEFAULT, out) < 0) {
    return recording::hdf5_error(where, "cannot read values");
  }
  return Status::ok();
}

}  // namespace tensorscope::compare
