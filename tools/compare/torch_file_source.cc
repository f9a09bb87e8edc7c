#include "compare/torch_file_source.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "compare/mapped_file.h"
#include "compare/pickle_machine.h"
#include "compare/torch_pickle_calls.h"
#include "compare/torch_tensor_describer.h"
#include "compare/torch_tensor_walk.h"
#include "compare/zip_archive.h"

namespace tensorscope::compare {
namespace {

namespace fs = std::filesystem;
using wire::DType;

// Gathering non-contiguous tensors: logical elements per chunk, and the largest gap
// (bytes) between two needed storage ranges that is read through rather than skipped.
constexpr size_t kMaxGatherElements = size_t{1} << 20;
constexpr uint64_t kGatherGapBytes = 8192;

// ---- the archive ---------------------------------------------------------------------

// Recognizes PyTorch's legacy (non-zip) format: a pickled magic number first.
bool is_legacy_format(const std::string& head) {
  // PROTO 2, LONG1 of 10 bytes: 0x1950a86a20f9469cfc6c, little-endian.
  static const unsigned char kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                         0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return head.size() >= sizeof(kMagic) && std::memcmp(head.data(), kMagic, sizeof(kMagic)) == 0;
}

std::string trim(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

// ---- reading --------------------------------------------------------------------------

class TorchSource final : public TensorSource {
 public:
  TorchSource(TorchTensor t, int fd, size_t chunk_bytes)
      : t_(std::move(t)), name_(t_.display_name()), fd_(fd), elem_(wire::dtype_size(t_.dtype)) {
    total_ = 1;
    for (int64_t d : t_.shape) total_ *= static_cast<uint64_t>(d);
    contiguous_ = t_.contiguous();
    const size_t per_chunk = std::max<size_t>(1, chunk_bytes / elem_);
    capacity_ = contiguous_ ? per_chunk : std::min(per_chunk, kMaxGatherElements);
    window_bytes_ = std::max<uint64_t>(elem_, chunk_bytes);
    buffer_.reset(new unsigned char[capacity_ * elem_]);
    if (!contiguous_) plan_gather();
  }
  ~TorchSource() override { ::close(fd_); }

  const std::string& name() const override { return name_; }
  DType dtype() const override { return t_.dtype; }
  const std::vector<int64_t>& shape() const override { return t_.shape; }

  StatusOr<size_t> peek(const unsigned char** data) override {
    try {
      return peek_chunk(data);
    } catch (const std::bad_alloc&) {
      return Status::error(name_ + ": out of memory while reading it");
    } catch (const std::exception& e) {
      return Status::error(name_ + ": cannot read it: " + e.what());
    }
  }
  void consume(size_t n) override { begin_ += n; }

 private:
  StatusOr<size_t> peek_chunk(const unsigned char** data) {
    if (begin_ == end_) {
      begin_ = end_ = 0;
      if (produced_ >= total_) return size_t{0};
      auto n = contiguous_ ? read_contiguous() : gather();
      if (!n) return n.status();
      end_ = *n;
      produced_ += *n;
    }
    *data = buffer_.get() + begin_ * elem_;
    return end_ - begin_;
  }

  Status read_storage(uint64_t first_elem, uint64_t count, unsigned char* dst) {
    const uint64_t offset = t_.data_offset + first_elem * elem_;
    uint64_t bytes = count * elem_;
    while (bytes > 0) {
      const ssize_t got = ::pread(fd_, dst, static_cast<size_t>(std::min<uint64_t>(bytes, 1u << 30)),
                                  static_cast<off_t>(offset + (count * elem_ - bytes)));
      if (got < 0) {
        if (errno == EINTR) continue;
        return Status::from_errno(name_ + ": read error", errno);
      }
      if (got == 0) return Status::error(name_ + ": unexpected end of file (did it shrink?)");
      dst += got;
      bytes -= static_cast<uint64_t>(got);
    }
    return Status::ok();
  }

  StatusOr<size_t> read_contiguous() {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(capacity_, total_ - produced_));
    Status read = read_storage(static_cast<uint64_t>(t_.storage_offset) + produced_, n, buffer_.get());
    if (!read) return read;
    return n;
  }

  // A gathered chunk is a box of the logical index space: dims before split_ fixed at
  // index_, dim split_ a range starting at index_[split_], the dims after it whole (so
  // its elements are consecutive in logical order). Its elements are visited with the
  // dims ordered by decreasing stride (order_), i.e. about in storage order, each
  // noting where it goes in the output: no sorting.
  void plan_gather() {
    const size_t ndim = t_.shape.size();
    inner_.assign(ndim, 1);
    for (size_t d = ndim; d-- > 1;) inner_[d - 1] = inner_[d] * static_cast<uint64_t>(t_.shape[d]);
    split_ = 0;
    while (inner_[split_] > capacity_) ++split_;  // inner_[ndim - 1] == 1 stops it
    for (size_t d = split_; d < ndim; ++d) order_.push_back(d);
    std::stable_sort(order_.begin(), order_.end(), [this](size_t a, size_t b) { return t_.stride[a] > t_.stride[b]; });
    index_.assign(ndim, 0);
    step_.assign(ndim, 0);
  }

  StatusOr<size_t> gather() {
    const uint64_t left_in_split = static_cast<uint64_t>(t_.shape[split_] - index_[split_]);
    const uint64_t k = std::min<uint64_t>(capacity_ / inner_[split_], left_in_split);
    const size_t n = static_cast<size_t>(k * inner_[split_]);
    uint64_t storage = static_cast<uint64_t>(t_.storage_offset);
    for (size_t d = 0; d <= split_; ++d) {
      storage += static_cast<uint64_t>(index_[d]) * static_cast<uint64_t>(t_.stride[d]);
    }
    // Unsigned arithmetic: stepping past the end of a dim wraps and is taken back
    // (validated layouts keep every visited index inside the storage).
    uint64_t pos = 0;
    std::fill(step_.begin(), step_.end(), 0);
    wanted_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      wanted_[i] = {storage, static_cast<uint32_t>(pos)};
      for (size_t q = order_.size(); q-- > 0;) {
        const size_t d = order_[q];
        const uint64_t extent = d == split_ ? k : static_cast<uint64_t>(t_.shape[d]);
        const uint64_t stride = static_cast<uint64_t>(t_.stride[d]);
        storage += stride;
        pos += inner_[d];
        if (++step_[d] < extent) break;
        storage -= stride * extent;
        pos -= inner_[d] * extent;
        step_[d] = 0;
      }
    }
    index_[split_] += static_cast<int64_t>(k);
    for (size_t d = split_; d > 0 && index_[d] == t_.shape[d]; --d) {
      index_[d] = 0;
      ++index_[d - 1];
    }

    // Read runs of nearby storage indices together, each run at most a window long.
    const uint64_t window_elems = window_bytes_ / elem_;
    const uint64_t gap_elems = std::max<uint64_t>(1, kGatherGapBytes / elem_);
    if (window_.size() < window_bytes_) window_.resize(static_cast<size_t>(window_bytes_));
    size_t i = 0;
    while (i < n) {
      const uint64_t lo = wanted_[i].first;
      uint64_t hi = lo;
      size_t j = i + 1;
      for (; j < n; ++j) {
        const uint64_t at = wanted_[j].first;
        if (at < lo || (at > hi && at - hi > gap_elems)) break;
        const uint64_t new_hi = std::max(hi, at);
        if (new_hi - lo >= window_elems) break;
        hi = new_hi;
      }
      Status read = read_storage(lo, hi - lo + 1, window_.data());
      if (!read) return read;
      for (size_t m = i; m < j; ++m) {
        std::memcpy(buffer_.get() + static_cast<size_t>(wanted_[m].second) * elem_,
                    window_.data() + (wanted_[m].first - lo) * elem_, elem_);
      }
      i = j;
    }
    return n;
  }

  TorchTensor t_;
  std::string name_;
  int fd_;
  size_t elem_;
  uint64_t total_ = 0, produced_ = 0;
  bool contiguous_ = true;
  size_t capacity_ = 1;
  uint64_t window_bytes_ = 0;
  std::unique_ptr<unsigned char[]> buffer_;
  size_t begin_ = 0, end_ = 0;
  // Gathering (see plan_gather): elements per index of each dim, the split dim, the
  // visiting order, the logical index of the next chunk's first element, the position
  // inside the chunk's box, and the (storage index, output position) of its elements.
  std::vector<uint64_t> inner_;
  size_t split_ = 0;
  std::vector<size_t> order_;
  std::vector<int64_t> index_;
  std::vector<uint64_t> step_;
  std::vector<std::pair<uint64_t, uint32_t>> wanted_;
  std::vector<unsigned char> window_;
};

// A contiguous tensor compared straight from the file's mapping (mapped_file.h), in
// steps of kMappedStepBytes: no copy into a buffer.
class MappedTorchSource final : public TensorSource {
 public:
  MappedTorchSource(const TorchTensor& t, MappedFile file, uint64_t numel)
      : t_(t), name_(t.display_name()), file_(std::move(file)), elem_(wire::dtype_size(t.dtype)), total_(numel) {
    first_ = file_.data() + t.data_offset + static_cast<uint64_t>(t.storage_offset) * elem_;
    step_ = std::max<size_t>(1, kMappedStepBytes / elem_);
  }

  const std::string& name() const override { return name_; }
  DType dtype() const override { return t_.dtype; }
  const std::vector<int64_t>& shape() const override { return t_.shape; }
  StatusOr<size_t> peek(const unsigned char** data) override {
    *data = first_ + consumed_ * elem_;
    return static_cast<size_t>(std::min<uint64_t>(step_, total_ - consumed_));
  }
  void consume(size_t n) override { consumed_ += n; }
  bool shrunk() const override { return file_.shrunk(); }

 private:
  TorchTensor t_;
  std::string name_;
  MappedFile file_;
  size_t elem_;
  uint64_t total_;
  const unsigned char* first_ = nullptr;
  size_t step_ = 1;
  uint64_t consumed_ = 0;
};

// The tensor's file mapped, when its elements lie in it whole and contiguous; else null.
std::unique_ptr<TensorSource> open_mapped(const TorchTensor& tensor) {
  if (!tensor.contiguous() || tensor.storage_offset < 0) return nullptr;
  uint64_t numel = 1;
  for (int64_t d : tensor.shape) numel *= static_cast<uint64_t>(d);
  const uint64_t elem = wire::dtype_size(tensor.dtype);
  const uint64_t end = (static_cast<uint64_t>(tensor.storage_offset) + numel) * elem;
  if (numel == 0 || end > tensor.storage_bytes) return nullptr;  // the buffered source says what is wrong
  auto file = MappedFile::open(tensor.file);
  if (!file || file->size() < tensor.data_offset + end) return nullptr;
  return std::make_unique<MappedTorchSource>(tensor, std::move(*file), numel);
}

}  // namespace

bool TorchTensor::contiguous() const {
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && stride[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string TorchTensor::display_name() const { return name.empty() ? file : file + " (tensor '" + name + "')"; }

bool is_torch_path(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".pt" || ext == ".pth";
}

namespace {

// Memory of a listed tensor, about (strings and vectors by size).
size_t listing_bytes(const TorchTensor& t) {
  return sizeof(TorchTensor) + t.file.size() + t.name.size() + t.storage_entry.size() + t.error.size() +
      (t.shape.size() + t.stride.size()) * sizeof(int64_t);
}

StatusOr<std::vector<TorchTensor>> list_tensors(const std::string& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return Status::error(file + (fs::exists(file, ec) ? ": not a regular file" : ": no such file"));
  }
  {
    std::string head(16, '\0');
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::from_errno(file + ": cannot open", errno);
    const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
    ::close(fd);
    head.resize(got > 0 ? static_cast<size_t>(got) : 0);
    if (is_legacy_format(head)) {
      return Status::error(file +
                           ": PyTorch's legacy (pre-1.6, non-zip) format, as "
                           "torch.save(..., _use_new_zipfile_serialization=False) writes "
                           "it, is not supported: load it and save it again with a "
                           "current torch.save");
    }
  }
  auto zip = ZipArchive::open(file);
  if (!zip) {
    if (zip.message().find(": out of memory") != std::string::npos) return zip.status();
    return Status::error(zip.message() + " (not a PyTorch file saved by torch.save / torch::save)");
  }
  // The one top-level folder holding data.pkl.
  std::set<std::string> prefixes;
  for (const ZipEntry& e : zip->entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && slash > 0 && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefixes.insert(e.name.substr(0, slash));
    }
  }
  if (prefixes.empty()) {
    return Status::error(file +
                         ": a zip archive without <folder>/data.pkl: not a PyTorch file "
                         "saved by torch.save / torch::save");
  }
  if (prefixes.size() > 1) {
    return Status::error(file + ": several PyTorch archives in one zip file (" + *prefixes.begin() + "/data.pkl, " +
                         *std::next(prefixes.begin()) + "/data.pkl, ...)");
  }
  const std::string prefix = *prefixes.begin();
  if (const ZipEntry* order = zip->find(prefix + "/byteorder")) {
    auto text = zip->read_entry(*order, 64);
    if (!text) return text.status();
    const std::string value = trim(*text);
    if (value == "big") {
      return Status::error(file +
                           ": saved on a big-endian machine (byteorder \"big\"); only "
                           "little-endian files are supported");
    }
    if (value != "little") {
      return Status::error(file + ": unknown byteorder \"" + value.substr(0, 32) + "\"");
    }
  }
  const ZipEntry* pkl = zip->find(prefix + "/data.pkl");
  auto pickle = zip->read_entry(*pkl, kMaxTorchPickleBytes);
  if (!pickle) return pickle.status();
  PickleMachine machine;
  Status ran = machine.run(std::move(*pickle), file + ": " + pkl->name);
  if (!ran) return ran;

  StatusOr<std::vector<FoundTensor>> found_tensors = find_tensors(machine, file);
  if (!found_tensors) return found_tensors.status();
  TensorDescriber describer(machine, *zip, prefix);
  std::vector<TorchTensor> tensors;
  tensors.reserve(found_tensors->size());
  // The names given so far (views of tensors[i].name: `tensors` never reallocates), and
  // per name given more than once the next "#<n>" suffix to try.
  std::unordered_set<std::string_view> names;
  std::unordered_map<std::string_view, uint64_t> next_suffix;
  size_t bytes = 0;
  for (FoundTensor& found : *found_tensors) {
    TorchTensor t;
    t.file = file;
    t.name = std::move(found.name);
    if (auto taken = names.find(t.name); taken != names.end()) {
      uint64_t& n = next_suffix.try_emplace(*taken, 2).first->second;
      std::string other;
      do {
        other = t.name + "#" + std::to_string(n++);
      } while (names.count(other) > 0);
      t.name = std::move(other);
    }
    describer.describe(found.value, t);
    bytes += listing_bytes(t);
    if (bytes + describer.cache_bytes() > kMaxTorchListingBytes) {
      return Status::error(file + ": listing its tensors would take more than " +
                           std::to_string(kMaxTorchListingBytes >> 20) + " MiB of memory (after " +
                           std::to_string(tensors.size()) + " tensors; shapes, names or messages too long?)");
    }
    tensors.push_back(std::move(t));
    names.insert(tensors.back().name);
  }
  return tensors;
}

}  // namespace

StatusOr<std::vector<TorchTensor>> list_torch_tensors(const std::string& file) {
  try {
    return list_tensors(file);
  } catch (const std::bad_alloc&) {
    return Status::error(file + ": out of memory while listing its tensors");
  } catch (const std::exception& e) {
    return Status::error(file + ": cannot list its tensors: " + e.what());
  }
}

StatusOr<std::unique_ptr<TensorSource>> open_torch_source(const TorchTensor& tensor, size_t chunk_bytes,
                                                          CompareReads reads) {
  if (!tensor.error.empty()) return Status::error(tensor.error);
  if (wire::dtype_size(tensor.dtype) == 0) return Status::error(tensor.display_name() + ": no dtype");
  const int fd = ::open(tensor.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(tensor.file + ": cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < tensor.data_offset ||
      static_cast<uint64_t>(st.st_size) - tensor.data_offset < tensor.storage_bytes) {
    ::close(fd);
    return Status::error(tensor.display_name() + ": the file is shorter than when it was listed");
  }
  // The source owns fd only once it is built.
  try {
    if (auto mapped = reads == CompareReads::kMapped ? open_mapped(tensor) : nullptr) {
      ::close(fd);
      return mapped;
    }
    return std::unique_ptr<TensorSource>(new TorchSource(tensor, fd, chunk_bytes));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return Status::error(tensor.display_name() + ": out of memory while opening it");
  } catch (const std::exception& e) {
    ::close(fd);
    return Status::error(tensor.display_name() + ": cannot open it: " + e.what());
  }
}

}  // namespace tensorscope::compare
