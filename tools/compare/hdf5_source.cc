#include "compare/hdf5_source.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <utility>

#include "compare/hdf5_reader_process.h"
#include "compare/mapped_file.h"
#include "tensorscope/recording/npy_file.h"

namespace tensorscope::compare {
namespace {

namespace fs = std::filesystem;

uint64_t numel_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

class NpySource final : public TensorSource {
 public:
  NpySource(recording::NpyReader reader, size_t chunk_bytes)
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
  recording::NpyReader reader_;
  size_t elem_;
  size_t capacity_;
  std::unique_ptr<unsigned char[]> buffer_;
  size_t begin_ = 0, end_ = 0;
};

// Reads through the HDF5 reader process, a few slices of the first dimension at a time.
class Hdf5Source final : public TensorSource {
 public:
  Hdf5Source(const Hdf5Tensor& t, size_t chunk_bytes)
      : tensor_(t),
        name_(t.file + " (group '" + t.group + "', row " + std::to_string(t.row) + ")"),
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
      uint64_t first = 0, count = 1, n = 1;
      if (!tensor_.shape.empty()) {
        first = read_elems_ / inner_;
        count = std::min<uint64_t>(slices_per_read_, static_cast<uint64_t>(tensor_.shape[0]) - first);
        n = count * inner_;
      }
      Status read = Hdf5ReaderProcess::shared().read(tensor_, first, count, buffer_.get(), n * elem_);
      if (!read) return Status::error(name_ + ": cannot read values: " + read.message());
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
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return Status::error(file + ": not a regular file");
  return Hdf5ReaderProcess::shared().list(file);
}

uint64_t TensorSource::numel() const { return numel_of(shape()); }

StatusOr<std::unique_ptr<TensorSource>> open_npy_source(const std::string& path, size_t chunk_bytes) {
  auto reader = recording::NpyReader::open(path);
  if (!reader) return reader.status();
  return std::unique_ptr<TensorSource>(new NpySource(std::move(*reader), chunk_bytes));
}

StatusOr<std::unique_ptr<TensorSource>> open_hdf5_source(const Hdf5Tensor& tensor, size_t chunk_bytes) {
  if (tensor.dtype == wire::DType::kInvalid || wire::dtype_size(tensor.dtype) == 0) {
    return Status::error(tensor.file + ": group '" + tensor.group + "' has no known dtype");
  }
  return std::unique_ptr<TensorSource>(new Hdf5Source(tensor, chunk_bytes));
}

StatusOr<TensorCompareResult> compare_sources(TensorSource& a, TensorSource& b, const CompareTolerance& tolerance) {
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
    if (!comparer.add_raw_on_cores(data_a, result.dtype_a, data_b, result.dtype_b, n)) {
      return shrank_while_compared(a.shrunk() || !b.shrunk() ? a.name() : b.name());
    }
    a.consume(n);
    b.consume(n);
    left -= n;
  }
  return comparer.result(std::move(result));
}

}  // namespace tensorscope::compare
