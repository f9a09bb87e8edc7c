#include "compare/hdf5_source.h"

#include <hdf5.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <utility>

#include "sinks/hdf5_support.h"
#include "sinks/npy_file.h"

namespace tensorscope::daemon {
namespace {

namespace fs = std::filesystem;

StatusOr<Hid> open_file(const std::string& file) {
  quiet_hdf5();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return Status::error(file + ": not a regular file");
  Hid f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.valid()) return hdf5_error(file, "cannot open as an HDF5 file (corrupt or not HDF5)");
  return f;
}

// Reads a string attribute (variable- or fixed-length); nullopt-like: found=false.
StatusOr<std::string> read_string_attr(hid_t obj, const char* attr_name, bool* found) {
  *found = false;
  const htri_t exists = H5Aexists(obj, attr_name);
  if (exists < 0) return Status::error(std::string("attribute ") + attr_name + ": " + hdf5_error_text());
  if (exists == 0) return std::string();
  Hid attr(H5Aopen(obj, attr_name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return Status::error(std::string("attribute ") + attr_name + ": " + hdf5_error_text());
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING) {
    H5Eclear2(H5E_DEFAULT);
    return Status::error(std::string("attribute ") + attr_name + " is not a string");
  }
  std::string value;
  if (H5Tis_variable_str(type.get()) > 0) {
    Hid mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attr.get(), mem.get(), &text) < 0) {
      return Status::error(std::string("attribute ") + attr_name + ": " + hdf5_error_text());
    }
    if (text != nullptr) value = text;
    H5free_memory(text);
  } else {
    const size_t size = H5Tget_size(type.get());
    std::string buffer(size, '\0');
    if (H5Aread(attr.get(), type.get(), buffer.data()) < 0) {
      return Status::error(std::string("attribute ") + attr_name + ": " + hdf5_error_text());
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
  Hid space(H5Dget_space(dataset), H5Sclose);
  if (!space.valid()) return Status::error(hdf5_error_text());
  const int ndims = H5Sget_simple_extent_ndims(space.get());
  if (ndims < 0) return Status::error(hdf5_error_text());
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  if (ndims > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return Status::error(hdf5_error_text());
  }
  return dims;
}

// Reads the 1-d dataset `name` of `group` (n elements) as `mem_type`.
template <typename T>
Status read_index(hid_t group, const char* name, hid_t mem_type, hsize_t n, std::vector<T>* out) {
  Hid ds(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return Status::error(std::string(name) + ": " + hdf5_error_text());
  auto dims = dataset_dims(ds.get());
  if (!dims) return Status::error(std::string(name) + ": " + dims.message());
  if (dims->size() != 1 || (*dims)[0] != n) {
    return Status::error(std::string(name) + " has " +
                         (dims->empty() ? std::string("no") : std::to_string((*dims)[0])) +
                         " rows, values has " + std::to_string(n));
  }
  out->assign(n, T{});
  if (n > 0 && H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data()) < 0) {
    return Status::error(std::string(name) + ": " + hdf5_error_text());
  }
  return Status::ok();
}

// Lists the rows of one group into `out`.
Status list_group(const std::string& file, hid_t f, const std::string& group_name,
                  std::vector<Hdf5Tensor>* out) {
  const std::string where = file + ": group '" + group_name + "'";
  Hid group(H5Gopen2(f, group_name.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.valid()) return Status::error(where + ": " + hdf5_error_text());
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

  Hid values(H5Dopen2(group.get(), "values", H5P_DEFAULT), H5Dclose);
  if (!values.valid()) return Status::error(where + ": values: " + hdf5_error_text());
  auto dims = dataset_dims(values.get());
  if (!dims) return Status::error(where + ": values: " + dims.message());
  if (dims->empty()) return Status::error(where + ": values has no rows dimension");
  Hid type(H5Dget_type(values.get()), H5Tclose);
  if (!type.valid()) return Status::error(where + ": values: " + hdf5_error_text());
  if (H5Tget_size(type.get()) != wire::dtype_size(dtype)) {
    return Status::error(where + ": values elements are " +
                         std::to_string(H5Tget_size(type.get())) + " bytes, dtype " +
                         *dtype_text + " needs " + std::to_string(wire::dtype_size(dtype)));
  }
  if (dtype == wire::DType::kBFloat16) {
    auto encoding = read_string_attr(values.get(), "encoding", &found);
    if (!encoding) return Status::error(where + ": values: " + encoding.message());
    if (!found || *encoding != kHdf5BFloat16Encoding) {
      return Status::error(where + ": bfloat16 values without encoding = \"" +
                           std::string(kHdf5BFloat16Encoding) + "\"");
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

uint64_t numel_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

class NpySource final : public TensorSource {
 public:
  NpySource(NpyReader reader, size_t chunk_bytes)
      : reader_(std::move(reader)),
        elem_(wire::dtype_size(reader_.dtype())),
        capacity_(std::max<size_t>(1, chunk_bytes / elem_)),
        buffer_(new unsigned char[capacity_ * elem_]) {}
  const std::string& name() const override { return reader_.path(); }
  wire::DType dtype() const override { return reader_.dtype(); }
  const std::vector<int64_t>& shape() const override { return reader_.shape(); }
  StatusOr<size_t> peek(const unsigned char** data) override {
    if (begin_ == end_) {
      begin_ = end_ = 0;
      const uint64_t left_elems = reader_.remaining_bytes() / elem_;
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left_elems, capacity_));
      if (want == 0) return size_t{0};
      auto got = reader_.read(buffer_.get(), want * elem_);
      if (!got) return got.status();
      if (*got != want * elem_) return Status::error(reader_.path() + ": unexpected end of data");
      end_ = want;
    }
    *data = buffer_.get() + begin_ * elem_;
    return end_ - begin_;
  }
  void consume(size_t n) override { begin_ += n; }

 private:
  NpyReader reader_;
  size_t elem_;
  size_t capacity_;
  std::unique_ptr<unsigned char[]> buffer_;
  size_t begin_ = 0, end_ = 0;
};

class Hdf5Source final : public TensorSource {
 public:
  Hdf5Source(const Hdf5Tensor& t, Hid file, Hid values, Hid type, size_t chunk_bytes)
      : tensor_(t),
        name_(t.file + " (group '" + t.group + "', row " + std::to_string(t.row) + ")"),
        file_(std::move(file)),
        values_(std::move(values)),
        type_(std::move(type)),
        elem_(wire::dtype_size(t.dtype)) {
    total_ = numel_of(t.shape);
    // Split along the tensor's first dim: `inner_` elements per index of it.
    inner_ = t.shape.empty() || t.shape[0] == 0 ? total_ : total_ / static_cast<uint64_t>(t.shape[0]);
    const uint64_t fit = inner_ == 0 ? 1 : std::max<uint64_t>(1, chunk_bytes / elem_ / inner_);
    slices_per_read_ = t.shape.empty() ? 1 : std::min<uint64_t>(fit, static_cast<uint64_t>(t.shape[0]));
    buffer_.reset(new unsigned char[std::max<uint64_t>(1, slices_per_read_ * inner_) * elem_]);
  }
  const std::string& name() const override { return name_; }
  wire::DType dtype() const override { return tensor_.dtype; }
  const std::vector<int64_t>& shape() const override { return tensor_.shape; }
  StatusOr<size_t> peek(const unsigned char** data) override {
    if (begin_ == end_) {
      begin_ = end_ = 0;
      if (read_elems_ >= total_) return size_t{0};
      quiet_hdf5();
      const size_t ndims = tensor_.shape.size() + 1;
      std::vector<hsize_t> start(ndims, 0), count(ndims, 1);
      start[0] = tensor_.row;
      uint64_t n = 1;
      if (!tensor_.shape.empty()) {
        const uint64_t first = read_elems_ / inner_;
        const uint64_t k = std::min<uint64_t>(slices_per_read_,
                                              static_cast<uint64_t>(tensor_.shape[0]) - first);
        start[1] = first;
        count[1] = k;
        for (size_t d = 1; d < tensor_.shape.size(); ++d) count[d + 1] = tensor_.shape[d];
        n = k * inner_;
      }
      Hid space(H5Dget_space(values_.get()), H5Sclose);
      const hsize_t mem_dims[1] = {n};
      Hid mem(H5Screate_simple(1, mem_dims, nullptr), H5Sclose);
      if (!space.valid() || !mem.valid() ||
          H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr,
                              count.data(), nullptr) < 0 ||
          H5Dread(values_.get(), type_.get(), mem.get(), space.get(), H5P_DEFAULT,
                  buffer_.get()) < 0) {
        return hdf5_error(name_, "cannot read values");
      }
      end_ = static_cast<size_t>(n);
      read_elems_ += n;
    }
    *data = buffer_.get() + begin_ * elem_;
    return end_ - begin_;
  }
  void consume(size_t n) override { begin_ += n; }

 private:
  Hdf5Tensor tensor_;
  std::string name_;
  Hid file_, values_, type_;
  size_t elem_;
  uint64_t total_ = 0, inner_ = 0, slices_per_read_ = 1, read_elems_ = 0;
  std::unique_ptr<unsigned char[]> buffer_;
  size_t begin_ = 0, end_ = 0;
};

}  // namespace

bool is_hdf5_path(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".h5" || ext == ".hdf5";
}

StatusOr<std::vector<Hdf5Tensor>> list_hdf5_tensors(const std::string& file) {
  auto f = open_file(file);
  if (!f) return f.status();
  bool found = false;
  auto format = read_string_attr(f->get(), "format", &found);
  if (!format) return Status::error(file + ": " + format.message());
  if (!found || *format != kHdf5FormatName) {
    return Status::error(file + ": not a tensorscope HDF5 recording (root attribute format is not \"" +
                         std::string(kHdf5FormatName) + "\")");
  }
  H5G_info_t info;
  if (H5Gget_info(f->get(), &info) < 0) return hdf5_error(file, "cannot list groups");
  std::vector<std::string> groups;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(f->get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr,
                                           0, H5P_DEFAULT);
    if (len < 0) return hdf5_error(file, "cannot list groups");
    std::string name(static_cast<size_t>(len) + 1, '\0');
    if (H5Lget_name_by_idx(f->get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                           name.size(), H5P_DEFAULT) < 0) {
      return hdf5_error(file, "cannot list groups");
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

uint64_t TensorSource::numel() const { return numel_of(shape()); }

StatusOr<std::unique_ptr<TensorSource>> open_npy_source(const std::string& path,
                                                        size_t chunk_bytes) {
  auto reader = NpyReader::open(path);
  if (!reader) return reader.status();
  return std::unique_ptr<TensorSource>(new NpySource(std::move(*reader), chunk_bytes));
}

StatusOr<std::unique_ptr<TensorSource>> open_hdf5_source(const Hdf5Tensor& tensor,
                                                         size_t chunk_bytes) {
  auto f = open_file(tensor.file);
  if (!f) return f.status();
  const std::string path = tensor.group + "/values";
  Hid values(H5Dopen2(f->get(), path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!values.valid()) return hdf5_error(tensor.file, "cannot open " + path);
  Hid type(H5Dget_type(values.get()), H5Tclose);
  if (!type.valid()) return hdf5_error(tensor.file, "cannot open " + path);
  return std::unique_ptr<TensorSource>(
      new Hdf5Source(tensor, std::move(*f), std::move(values), std::move(type), chunk_bytes));
}

StatusOr<TensorCompareResult> compare_sources(TensorSource& a, TensorSource& b,
                                              const CompareTolerance& tolerance) {
  TensorCompareResult result;
  result.dtype_a = a.dtype();
  result.dtype_b = b.dtype();
  result.shape_a = a.shape();
  result.shape_b = b.shape();
  if (result.shape_a != result.shape_b) {
    result.shape_mismatch = true;
    result.cosine = 0.0;
    return result;
  }
  TensorComparer comparer(tolerance);
  uint64_t left = a.numel();
  while (left > 0) {
    const unsigned char* data_a = nullptr;
    const unsigned char* data_b = nullptr;
    auto n_a = a.peek(&data_a);
    if (!n_a) return n_a.status();
    auto n_b = b.peek(&data_b);
    if (!n_b) return n_b.status();
    if (*n_a == 0 || *n_b == 0) {
      return Status::error((*n_a == 0 ? a.name() : b.name()) + ": unexpected end of data");
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, std::min(*n_a, *n_b)));
    comparer.add_raw(data_a, result.dtype_a, data_b, result.dtype_b, n);
    a.consume(n);
    b.consume(n);
    left -= n;
  }
  return comparer.result(std::move(result));
}

}  // namespace tensorscope::daemon
