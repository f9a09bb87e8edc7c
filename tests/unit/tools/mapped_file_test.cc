// mapped_file_test.cc — MappedFile and catch_bus_error: a file's bytes through its
// mapping; a read past the end of a file truncated while mapped caught on the reading
// thread (alone, and on every thread of a comparison) and reported as an error naming the
// file; a bus error outside any guard still ending the process as it would without one.
#include "compare/mapped_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "compare/hdf5_source.h"
#include "compare/tensor_compare.h"
#include "temp_dir.h"

namespace tensorscope::compare {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::string write_bytes(const TempDir& dir, const std::string& name, const std::vector<unsigned char>& bytes) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<unsigned char> counting(size_t n) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  return bytes;
}

TEST(MappedFileTest, MapsTheWholeFile) {
  TempDir dir;
  const auto bytes = counting(100000);
  auto file = MappedFile::open(write_bytes(dir, "f.bin", bytes));
  ASSERT_TRUE(file) << file.message();
  ASSERT_EQ(file->size(), bytes.size());
  EXPECT_EQ(std::memcmp(file->data(), bytes.data(), bytes.size()), 0);
  EXPECT_FALSE(file->shrunk());

  MappedFile moved = std::move(*file);  // the mapping goes with the move
  EXPECT_EQ(moved.data()[99999], bytes[99999]);

  auto empty = MappedFile::open(write_bytes(dir, "empty.bin", {}));
  ASSERT_TRUE(empty) << empty.message();
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_EQ(empty->data(), nullptr);
}

TEST(MappedFileTest, ErrorsNameThePath) {
  TempDir dir;
  auto missing = MappedFile::open(dir.path() + "/missing.bin");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.message(), HasSubstr("missing.bin"));
  auto folder = MappedFile::open(dir.path());
  ASSERT_FALSE(folder);
  EXPECT_THAT(folder.message(), HasSubstr("not a regular file"));
}

TEST(MappedFileTest, AReadPastATruncatedEndIsCaught) {
  TempDir dir;
  const std::string path = write_bytes(dir, "f.bin", counting(1 << 20));
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file) << file.message();
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);  // another process truncates it
  EXPECT_TRUE(file->shrunk());

  volatile unsigned char seen = 0;
  EXPECT_TRUE(catch_bus_error([&] { seen = file->data()[100]; }));
  EXPECT_EQ(seen, static_cast<unsigned char>(100 * 7));
  for (int attempt = 0; attempt < 3; ++attempt) {  // the handler stays, the signal is not left blocked
    EXPECT_FALSE(catch_bus_error([&] { seen = file->data()[512 * 1024]; })) << attempt;
  }
  // Nested guards: the inner one takes its own fault, the outer one goes on.
  bool inner = true;
  EXPECT_TRUE(catch_bus_error([&] { inner = catch_bus_error([&] { seen = file->data()[(1 << 20) - 1]; }); }));
  EXPECT_FALSE(inner);
}

// The comparison of a truncated mapping on every core fails on whichever threads read past
// the end, and compare_npy_files would say which file (shrank_while_compared).
TEST(MappedFileTest, EveryThreadOfAComparisonIsGuarded) {
  TempDir dir;
  const size_t n = size_t{1} << 20;  // floats: parts on several threads
  std::vector<unsigned char> values(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 1000) * 0.5f;
    std::memcpy(&values[i * 4], &v, 4);
  }
  const std::string path_a = write_bytes(dir, "a.bin", values), path_b = write_bytes(dir, "b.bin", values);
  auto a = MappedFile::open(path_a);
  auto b = MappedFile::open(path_b);
  ASSERT_TRUE(a && b);

  TensorComparer whole({});
  ASSERT_TRUE(whole.add_raw_on_cores(a->data(), wire::DType::kFloat32, b->data(), wire::DType::kFloat32, n));
  EXPECT_EQ(whole.result().total, n);
  EXPECT_EQ(whole.result().mismatches, 0u);

  for (size_t keep : {size_t{4096}, n * 4 - 8192}) {  // the first part's pages, or the last part's, are lost
    ASSERT_EQ(::truncate(path_b.c_str(), static_cast<off_t>(keep)), 0);
    TensorComparer cut({});
    EXPECT_FALSE(cut.add_raw_on_cores(a->data(), wire::DType::kFloat32, b->data(), wire::DType::kFloat32, n)) << keep;
    EXPECT_TRUE(b->shrunk());
    EXPECT_FALSE(a->shrunk());
  }
  EXPECT_THAT(shrank_while_compared(path_b).message(), HasSubstr("b.bin: the file became shorter"));
}

// float32 values straight from a mapping, the way .pt files' contiguous tensors are read.
class MappedFloats final : public TensorSource {
 public:
  MappedFloats(const MappedFile& file, std::string name)
      : file_(file), name_(std::move(name)), shape_{static_cast<int64_t>(file.size() / 4)} {}
  const std::string& name() const override { return name_; }
  wire::DType dtype() const override { return wire::DType::kFloat32; }
  const std::vector<int64_t>& shape() const override { return shape_; }
  StatusOr<size_t> peek(const unsigned char** data) override {
    *data = file_.data() + consumed_ * 4;
    return static_cast<size_t>(shape_[0]) - consumed_;
  }
  void consume(size_t n) override { consumed_ += n; }
  bool shrunk() const override { return file_.shrunk(); }

 private:
  const MappedFile& file_;
  std::string name_;
  std::vector<int64_t> shape_;
  size_t consumed_ = 0;
};

TEST(MappedFileTest, CompareSourcesNamesTheSourceThatShrank) {
  TempDir dir;
  const std::vector<unsigned char> zeros(size_t{4} << 20);
  const std::string path_a = write_bytes(dir, "a.bin", zeros), path_b = write_bytes(dir, "b.bin", zeros);
  auto a = MappedFile::open(path_a);
  auto b = MappedFile::open(path_b);
  ASSERT_TRUE(a && b);
  MappedFloats source_a(*a, "a.pt (tensor 'w')"), source_b(*b, "b.pt (tensor 'w')");
  ASSERT_EQ(::truncate(path_a.c_str(), 8192), 0);
  auto result = compare_sources(source_a, source_b, {});
  ASSERT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("a.pt (tensor 'w'): the file became shorter while it was compared"));
}

// Without a guard on the faulting thread the process ends by SIGBUS, as without the handler.
TEST(MappedFileDeathTest, AFaultOutsideAGuardIsNotSwallowed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        TempDir dir;
        const std::string path = write_bytes(dir, "f.bin", counting(1 << 20));
        auto file = MappedFile::open(path);
        if (!file) std::_Exit(3);
        catch_bus_error([] {});  // the handler is installed
        if (::truncate(path.c_str(), 0) != 0) std::_Exit(4);
        volatile unsigned char seen = file->data()[512 * 1024];
        (void)seen;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace tensorscope::compare
