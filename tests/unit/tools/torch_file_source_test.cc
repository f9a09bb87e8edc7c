// torch_file_source_test.cc — list_torch_tensors and open_torch_source on hand-built
// .pt files (no libtorch): names of lone tensors, dicts, nested containers, Parameters
// and TorchScript-style modules; contiguous reads and gathered views (storage offset,
// transposed, stride 0) at several chunk sizes; storages beyond 4 GiB; and bad input:
// unsupported dtypes and kinds, elements outside their storage, missing or compressed
// storages, big-endian and legacy files, every truncation and every single-byte
// corruption of a small file; hostile files (long names repeated through shared
// containers, too many tensors, too much to walk, too large a listing) refused with an
// error within bounded memory; many repeated names renamed in linear time.
#include "compare/torch_file_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <unordered_set>
#include <vector>

#include "compare/tensor_compare.h"
#include "temp_dir.h"
#include "torch_file_builder.h"
#include "torch_test_values.h"

namespace tensorscope::compare {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::PickleBytes;
using testing::TempDir;
using testing::torch_zip_spec;
using wire::DType;

// Reads every element of the tensor through open_torch_source.
StatusOr<std::vector<double>> read_all_by(const TorchTensor& t, size_t chunk_bytes, CompareReads reads) {
  auto source = open_torch_source(t, chunk_bytes, reads);
  if (!source) return source.status();
  std::vector<double> out;
  const uint64_t total = (*source)->numel();
  while (out.size() < total) {
    const unsigned char* data = nullptr;
    auto n = (*source)->peek(&data);
    if (!n) return n.status();
    if (*n == 0) return Status::error("ended early");
    const size_t old = out.size();
    out.resize(old + *n);
    convert_to_double(data, t.dtype, *n, out.data() + old);
    (*source)->consume(*n);
  }
  const unsigned char* data = nullptr;
  auto rest = (*source)->peek(&data);
  if (!rest || *rest != 0) return Status::error("data after the last element");
  return out;
}

// The tensor's values read through a buffer of chunk_bytes, checked against those read
// from the file's mapping (contiguous tensors; the others are gathered either way).
StatusOr<std::vector<double>> read_all(const TorchTensor& t, size_t chunk_bytes) {
  auto buffered = read_all_by(t, chunk_bytes, CompareReads::kBuffered);
  auto mapped = read_all_by(t, chunk_bytes, CompareReads::kMapped);
  if (bool(buffered) != bool(mapped)) {
    return Status::error("mapped and buffered reads disagree: " + buffered.message() + " / " + mapped.message());
  }
  if (buffered && *buffered != *mapped) {
    bool same = buffered->size() == mapped->size();
    for (size_t i = 0; same && i < buffered->size(); ++i) {
      same = std::isnan((*buffered)[i]) ? std::isnan((*mapped)[i]) : (*buffered)[i] == (*mapped)[i];
    }
    if (!same) return Status::error("mapped and buffered reads give other values");
  }
  return buffered;
}

std::string write_pt(const TempDir& dir, const std::string& name, const testing::ZipSpec& spec) {
  const std::string path = dir.path() + "/" + name;
  EXPECT_TRUE(testing::write_zip_file(path, spec));
  return path;
}

std::vector<float> iota_floats(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return v;
}

TEST(TorchFileSourceTest, LoneTensorIsNamedEmpty) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1}).stop();
  const std::vector<float> values = iota_floats(6);
  const std::string path =
      write_pt(dir, "one.pt", torch_zip_spec("one", p.bytes(), {{"0", testing::bytes_of(values)}}));
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 1u);
  const TorchTensor& t = (*tensors)[0];
  EXPECT_EQ(t.name, "");
  EXPECT_EQ(t.file, path);
  EXPECT_EQ(t.dtype, DType::kFloat32);
  EXPECT_THAT(t.shape, ElementsAre(2, 3));
  EXPECT_TRUE(t.contiguous());
  EXPECT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.storage_entry, "one/data/0");
  EXPECT_EQ(t.display_name(), path);
  auto read = read_all(t, 8);
  ASSERT_TRUE(read) << read.message();
  EXPECT_EQ(*read, std::vector<double>(values.begin(), values.end()));
}

TEST(TorchFileSourceTest, ContainersNameTheirTensors) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("a").tensor("FloatStorage", "0", 6, 0, {6}, {1});
  p.str("b").empty_dict().str("c").tensor("DoubleStorage", "1", 2, 0, {2}, {1}).setitem();
  p.str("l").empty_list().mark();
  p.tensor("FloatStorage", "0", 6, 2, {2}, {1});  // shares storage 0
  p.tensor("LongStorage", "2", 1, 0, {}, {});
  p.appends();
  p.str("t").mark().tensor("FloatStorage", "0", 6, 0, {3}, {2}).str("not a tensor").tuple();
  // A Parameter wraps its tensor; OrderedDict + BUILD state like a state_dict.
  p.str("param").global("torch._utils", "_rebuild_parameter").mark();
  p.tensor("FloatStorage", "0", 6, 0, {1}, {1}).boolean(true);
  p.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
  p.str("sd").global("collections", "OrderedDict").empty_tuple().reduce();
  p.str("fc.weight").tensor("FloatStorage", "0", 6, 0, {2}, {1}).setitem();
  p.empty_dict().str("_metadata").none().setitem().build();
  p.integer(7).tensor("FloatStorage", "0", 6, 5, {1}, {1});  // an int key
  p.setitems().stop();
  const std::vector<double> doubles = {1.5, -2.5};
  const std::vector<int64_t> longs = {int64_t{1} << 40};
  const std::string path = write_pt(dir, "multi.pt",
                                    torch_zip_spec("archive", p.bytes(),
                                                   {{"0", testing::bytes_of(iota_floats(6))},
                                                    {"1", testing::bytes_of(doubles)},
                                                    {"2", testing::bytes_of(longs)}}));
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  std::vector<std::string> names;
  for (const TorchTensor& t : *tensors) {
    names.push_back(t.name);
    EXPECT_TRUE(t.error.empty()) << t.error;
  }
  EXPECT_THAT(names, ElementsAre("a", "b.c", "l.0", "l.1", "t.0", "param", "sd.fc.weight", "7"));
  EXPECT_EQ((*tensors)[1].dtype, DType::kFloat64);
  EXPECT_EQ((*tensors)[3].dtype, DType::kInt64);
  EXPECT_TRUE((*tensors)[3].shape.empty());
  EXPECT_EQ((*tensors)[1].display_name(), path + " (tensor 'b.c')");
  auto l0 = read_all((*tensors)[2], 4096);
  ASSERT_TRUE(l0) << l0.message();
  EXPECT_THAT(*l0, ElementsAre(-2.0, -1.5));
  auto scalar = read_all((*tensors)[3], 4096);
  ASSERT_TRUE(scalar) << scalar.message();
  EXPECT_THAT(*scalar, ElementsAre(static_cast<double>(int64_t{1} << 40)));
  auto strided = read_all((*tensors)[4], 4096);
  ASSERT_TRUE(strided) << strided.message();
  EXPECT_THAT(*strided, ElementsAre(-3.0, -2.0, -1.0));
  auto last = read_all((*tensors)[7], 4096);
  ASSERT_TRUE(last) << last.message();
  EXPECT_THAT(*last, ElementsAre(-0.5));
}

TEST(TorchFileSourceTest, TorchScriptModuleStateAndTypeTags) {
  TempDir dir("pt");
  // torch::save(std::vector<Tensor>): a __torch__ module whose attributes "0", "1" are
  // the tensors.
  PickleBytes p;
  p.proto().global("__torch__", "Module").empty_tuple().newobj();
  p.empty_dict().mark();
  p.str("0").tensor("FloatStorage", "0", 6, 0, {6}, {1});
  p.str("1").tensor("FloatStorage", "0", 6, 0, {3, 2}, {1, 3});
  p.setitems().build().stop();
  // torch::pickle_save(Dict<str, Tensor>): restore_type_tag(dict, type) around the dict.
  PickleBytes q;
  q.proto().global("torch.jit._pickle", "restore_type_tag");
  q.empty_dict().str("w").tensor("FloatStorage", "0", 6, 0, {6}, {1}).setitem();
  q.str("Dict[str, Tensor]").op(0x86).reduce().stop();
  const std::string storage = testing::bytes_of(iota_floats(6));
  const std::string module = write_pt(dir, "module.pt", torch_zip_spec("module", p.bytes(), {{"0", storage}}, ""));
  const std::string tagged = write_pt(dir, "tagged.pt", torch_zip_spec("archive", q.bytes(), {{"0", storage}}));
  auto tensors = list_torch_tensors(module);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[0].name, "0");
  EXPECT_EQ((*tensors)[1].name, "1");
  EXPECT_FALSE((*tensors)[1].contiguous());
  auto transposed = read_all((*tensors)[1], 8);
  ASSERT_TRUE(transposed) << transposed.message();
  // [3, 2] with strides (1, 3): element (r, c) is storage[r + 3c].
  EXPECT_THAT(*transposed, ElementsAre(-3.0, -1.5, -2.5, -1.0, -2.0, -0.5));
  tensors = list_torch_tensors(tagged);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].name, "w");
}

// Views gathered through small and large windows give the logical values.
TEST(TorchFileSourceTest, NonContiguousViewsAtEveryChunkSize) {
  TempDir dir("pt");
  const int64_t n = 4096;
  std::vector<double> base(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) base[static_cast<size_t>(i)] = static_cast<double>(i % 1000) - 500.0;
  struct View {
    int64_t offset;
    std::vector<int64_t> size, stride;
  };
  const std::vector<View> views = {
      {0, {64, 64}, {1, 64}},                  // transposed 64 x 64
      {7, {10, 3, 4}, {300, 1, 75}},           // offset, mixed strides
      {100, {5, 6}, {0, 2}},                   // stride 0 (expand)
      {4095, {1, 1}, {9999, 1}},               // one element at the end, huge unused stride
      {3, {0, 5}, {1, 1}},                     // empty
      {10, {3, 1, 4}, {4, 77, 1}},             // contiguous despite the size-1 stride
      {0, {16, 16, 16}, {1, 256, 16}},         // a permutation of a contiguous [16, 16, 16]
      {0, {8, 4, 16, 8}, {128, 1024, 1, 16}},  // a 4-d permutation
      {5, {3, 7, 2}, {0, 500, 0}},             // two expanded dims
  };
  PickleBytes p;
  p.proto().empty_list().mark();
  for (const View& v : views) p.tensor("DoubleStorage", "0", n, v.offset, v.size, v.stride);
  p.appends().stop();
  const std::string path =
      write_pt(dir, "views.pt", torch_zip_spec("views", p.bytes(), {{"0", testing::bytes_of(base)}}));
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), views.size());
  EXPECT_TRUE((*tensors)[5].contiguous());
  for (size_t i = 0; i < views.size(); ++i) {
    const TorchTensor& t = (*tensors)[i];
    ASSERT_TRUE(t.error.empty()) << t.error;
    const std::vector<double> expected = testing::view_values(base, views[i].offset, views[i].size, views[i].stride);
    for (size_t chunk : {size_t{8}, size_t{24}, size_t{136}, size_t{1000}, size_t{8192}, size_t{1} << 20}) {
      auto got = read_all(t, chunk);
      ASSERT_TRUE(got) << got.message();
      EXPECT_EQ(*got, expected) << "view " << i << " chunk " << chunk;
    }
  }
}

TEST(TorchFileSourceTest, EveryDtype) {
  TempDir dir("pt");
  const std::vector<std::pair<std::string, std::string>> storage_types = {
      {"float32", "FloatStorage"},     {"float64", "DoubleStorage"}, {"float16", "HalfStorage"},
      {"bfloat16", "BFloat16Storage"}, {"int8", "CharStorage"},      {"int16", "ShortStorage"},
      {"int32", "IntStorage"},         {"int64", "LongStorage"},     {"uint8", "ByteStorage"},
      {"bool", "BoolStorage"}};
  for (const auto& [dtype, storage_type] : storage_types) {
    const std::vector<double> values = testing::torch_test_base(dtype);
    PickleBytes p;
    p.proto().tensor(storage_type, "0", 15, 0, {5, 3}, {1, 5}).stop();  // transposed
    const std::string path =
        write_pt(dir, dtype + ".pt", torch_zip_spec("x", p.bytes(), {{"0", testing::torch_test_bytes(dtype, values)}}));
    auto tensors = list_torch_tensors(path);
    ASSERT_TRUE(tensors) << tensors.message();
    ASSERT_EQ(tensors->size(), 1u);
    EXPECT_EQ(wire::dtype_name((*tensors)[0].dtype), dtype);
    auto got = read_all((*tensors)[0], 16);
    ASSERT_TRUE(got) << dtype << ": " << got.message();
    EXPECT_EQ(*got, testing::view_values(values, 0, {5, 3}, {1, 5})) << dtype;
  }
  // The newer spelling: a dtype global instead of a storage class.
  PickleBytes p;
  p.proto().tensor("bfloat16", "0", 2, 0, {2}, {1}).stop();
  const std::string path =
      write_pt(dir, "dtype_global.pt",
               torch_zip_spec("x", p.bytes(), {{"0", testing::torch_test_bytes("bfloat16", {1.5, -2.0})}}));
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  EXPECT_EQ((*tensors)[0].dtype, DType::kBFloat16);
  auto got = read_all((*tensors)[0], 16);
  ASSERT_TRUE(got) << got.message();
  EXPECT_THAT(*got, ElementsAre(1.5, -2.0));
}

TEST(TorchFileSourceTest, UnreadableTensorsAreListedWithAnErrorNamingThem) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("complex").tensor("ComplexFloatStorage", "0", 2, 0, {2}, {1});
  p.str("outside").tensor("FloatStorage", "1", 4, 1, {2, 2}, {2, 1});  // reaches index 4
  p.str("missing").tensor("FloatStorage", "9", 4, 0, {4}, {1});
  p.str("packed").tensor("FloatStorage", "2", 4, 0, {4}, {1});
  p.str("short").tensor("FloatStorage", "3", 4, 0, {4}, {1});  // the entry has 8 bytes
  p.str("quantized").global("torch._utils", "_rebuild_qtensor").mark().none().tuple().reduce();
  p.str("negative").tensor("FloatStorage", "1", 4, 0, {2}, {-1});
  p.str("fine").tensor("FloatStorage", "1", 4, 0, {4}, {1});
  p.setitems().stop();
  const std::string floats = testing::bytes_of(iota_floats(4));
  testing::ZipSpec spec = torch_zip_spec(
      "archive", p.bytes(), {{"0", std::string(16, '\0')}, {"1", floats}, {"2", floats}, {"3", floats.substr(0, 8)}});
  for (auto& e : spec.entries) {
    if (e.name == "archive/data/2") e.method = 8;
  }
  const std::string path = write_pt(dir, "bad.pt", spec);
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 8u);
  const std::vector<std::string> messages = {
      "dtype complex64 (torch.ComplexFloatStorage) is not supported",
      "reach storage index 4",
      "storage entry 'archive/data/9' is missing",
      "compressed (deflate)",
      "has only 8 bytes",
      "quantized tensors (torch._utils._rebuild_qtensor) are not supported",
      "negative size or stride",
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const TorchTensor& t = (*tensors)[i];
    EXPECT_THAT(t.error, HasSubstr(messages[i])) << i;
    EXPECT_THAT(t.error, HasSubstr(path + " (tensor '" + t.name + "')")) << i;
    auto source = open_torch_source(t, 1024);
    ASSERT_FALSE(source);
    EXPECT_EQ(source.message(), t.error);
  }
  EXPECT_TRUE((*tensors)[7].error.empty()) << (*tensors)[7].error;
}

TEST(TorchFileSourceTest, FileLevelErrorsNameTheFile) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().tensor("FloatStorage", "0", 1, 0, {1}, {1}).stop();
  const std::string one_float = testing::bytes_of(iota_floats(1));
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  testing::ZipSpec two = torch_zip_spec("a", p.bytes(), {{"0", one_float}});
  testing::ZipSpec other = torch_zip_spec("b", p.bytes(), {{"0", one_float}});
  two.entries.insert(two.entries.end(), other.entries.begin(), other.entries.end());
  testing::ZipSpec no_pkl;
  no_pkl.entries.push_back({"a/data/0", one_float});
  PickleBytes bad_pickle;
  bad_pickle.proto().op('I').raw("1\n").stop();
  const std::vector<Case> cases = {
      {"big.pt", testing::build_zip(torch_zip_spec("big", p.bytes(), {{"0", one_float}}, "big")), "big-endian"},
      {"weird.pt", testing::build_zip(torch_zip_spec("w", p.bytes(), {{"0", one_float}}, "middle")),
       "unknown byteorder"},
      {"legacy.pt", std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e", 15),
       "legacy (pre-1.6, non-zip) format"},
      {"text.pt", "hello, not a zip", "not a zip archive"},
      {"empty.pt", "", "not a zip archive"},
      {"two.pt", testing::build_zip(two), "several PyTorch archives"},
      {"nopkl.pt", testing::build_zip(no_pkl), "without <folder>/data.pkl"},
      {"badpkl.pt", testing::build_zip(torch_zip_spec("x", bad_pickle.bytes(), {})),
       "x/data.pkl: corrupt or unsupported pickle: unsupported opcode 0x49"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.path() + "/" + c.name;
    ASSERT_TRUE(testing::write_bytes(path, c.bytes));
    auto tensors = list_torch_tensors(path);
    ASSERT_FALSE(tensors) << c.name;
    EXPECT_THAT(tensors.message(), HasSubstr(path)) << c.name;
    EXPECT_THAT(tensors.message(), HasSubstr(c.message)) << c.name;
  }
  auto missing = list_torch_tensors(dir.path() + "/nope.pt");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.message(), HasSubstr("nope.pt: no such file"));
}

// A small valid file cut at every length: always an error naming the file, never a crash.
TEST(TorchFileSourceTest, EveryTruncationIsAnError) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("w").tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  p.str("t").tensor("FloatStorage", "0", 6, 0, {3, 2}, {1, 3});
  p.setitems().stop();
  const std::string full =
      testing::build_zip(torch_zip_spec("archive", p.bytes(), {{"0", testing::bytes_of(iota_floats(6))}}));
  const std::string path = dir.path() + "/cut.pt";
  ASSERT_TRUE(testing::write_bytes(path, full));
  ASSERT_TRUE(list_torch_tensors(path));
  for (size_t len = 0; len < full.size(); ++len) {
    ASSERT_TRUE(testing::write_bytes(path, full.substr(0, len)));
    auto tensors = list_torch_tensors(path);
    ASSERT_FALSE(tensors) << "length " << len;
    EXPECT_THAT(tensors.message(), HasSubstr(path)) << len;
  }
}

// Any one byte changed: listed or refused, and whatever is listed reads or fails cleanly.
TEST(TorchFileSourceTest, EverySingleByteCorruptionIsHandled) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("w").tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  p.str("t").tensor("FloatStorage", "0", 6, 1, {2, 2}, {1, 3});
  p.setitems().stop();
  testing::ZipSpec spec = torch_zip_spec("archive", p.bytes(), {{"0", testing::bytes_of(iota_floats(6))}});
  spec.align = 0;
  const std::string full = testing::build_zip(spec);
  const std::string path = dir.path() + "/flip.pt";
  size_t listed = 0, refused = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    std::string bad = full;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    ASSERT_TRUE(testing::write_bytes(path, bad));
    auto tensors = list_torch_tensors(path);
    if (!tensors) {
      ++refused;
      EXPECT_THAT(tensors.message(), HasSubstr(path));
      continue;
    }
    ++listed;
    for (const TorchTensor& t : *tensors) {
      if (!t.error.empty()) continue;
      auto values = read_all(t, 8);
      if (values) {
        EXPECT_LE(values->size(), 1u << 20);
      }
    }
  }
  EXPECT_GT(listed, 0u);
  EXPECT_GT(refused, 0u);
}

// A storage of 5 GiB (left sparse): ZIP64 sizes and offsets, reads past 4 GiB.
TEST(TorchFileSourceTest, StorageBeyondFourGiB) {
  TempDir dir("pt");
  const int64_t numel = (int64_t{5} << 30) / 4 + 2;
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("big").tensor("FloatStorage", "0", numel, 0, {numel}, {1});
  p.str("end").tensor("FloatStorage", "1", 2, 0, {2}, {1});
  p.str("tail").tensor("FloatStorage", "0", numel, numel - 2, {2}, {1});
  p.setitems().stop();
  testing::ZipSpec spec;
  spec.zip64_extra = true;
  spec.entries.push_back({"archive/data.pkl", p.bytes()});
  spec.entries.push_back({"archive/data/0", "", static_cast<uint64_t>(numel) * 4});
  spec.entries.push_back({"archive/data/1", testing::bytes_of(iota_floats(2))});
  const std::string path = write_pt(dir, "big.pt", spec);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  if (static_cast<uint64_t>(st.st_blocks) * 512 > (uint64_t{1} << 30)) {
    GTEST_SKIP() << "the file system does not keep sparse files sparse";
  }
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 3u);
  for (const TorchTensor& t : *tensors) ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ((*tensors)[0].storage_bytes, static_cast<uint64_t>(numel) * 4);
  EXPECT_GT((*tensors)[1].data_offset, uint64_t{5} << 30);
  auto end = read_all((*tensors)[1], 1024);
  ASSERT_TRUE(end) << end.message();
  EXPECT_THAT(*end, ElementsAre(-3.0, -2.5));
  auto tail = read_all((*tensors)[2], 1024);
  ASSERT_TRUE(tail) << tail.message();
  EXPECT_THAT(*tail, ElementsAre(0.0, 0.0));
  auto big = open_torch_source((*tensors)[0], 1 << 16, CompareReads::kBuffered);
  ASSERT_TRUE(big) << big.message();
  const unsigned char* data = nullptr;
  auto n = (*big)->peek(&data);
  ASSERT_TRUE(n) << n.message();
  EXPECT_EQ(*n, size_t{1} << 14);  // at most chunk_bytes at a time
  auto mapped = open_torch_source((*tensors)[0], 1 << 16);
  ASSERT_TRUE(mapped) << mapped.message();
  (*mapped)->consume(0);
  n = (*mapped)->peek(&data);
  ASSERT_TRUE(n) << n.message();
  EXPECT_EQ(*n, kMappedStepBytes / 4);                 // a step of the mapping, nothing held in memory
  (*mapped)->consume(static_cast<size_t>(numel) - 2);  // past 4 GiB into the mapping
  n = (*mapped)->peek(&data);
  ASSERT_TRUE(n) << n.message();
  ASSERT_EQ(*n, 2u);
  EXPECT_EQ(data[0] | data[7], 0);  // the sparse file's zeros
}

// ---- hostile files ----------------------------------------------------------------------

// A .pt file whose data.pkl is `pickle`, with one float storage "0" of `numel` elements.
std::string write_hostile(const TempDir& dir, const std::string& name, const std::string& pickle, size_t numel = 6) {
  return write_pt(dir, name, torch_zip_spec("archive", pickle, {{"0", testing::bytes_of(iota_floats(numel))}}));
}

// Lists `path` in a child process whose address space may grow only 1 GiB more: the
// listing must fail with a message naming the file and containing `want`, never
// exhaust the memory, throw or abort.
void expect_refused(const std::string& path, const std::string& want) {
  EXPECT_EXIT(
      {
        if (!testing::limit_address_space(1024)) std::_Exit(3);
        auto tensors = list_torch_tensors(path);
        const bool ok = !tensors && tensors.message().find(path) != std::string::npos &&
            tensors.message().find(want) != std::string::npos;
        std::fprintf(stderr, "%s\n", tensors ? "listed" : tensors.message().substr(0, 300).c_str());
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << path << ": want '" << want << "'";
}

// `depth` levels of {A: prev, B: prev} over one tensor, the keys (of `key_bytes` bytes)
// shared through the memo: 2^depth tensors whose names are depth keys long.
std::string shared_dict_dag(int depth, size_t key_bytes) {
  PickleBytes p;
  p.proto().str(std::string(key_bytes, 'a')).put(0).pop();
  p.str(std::string(key_bytes, 'b')).put(1).pop();
  p.tensor("FloatStorage", "0", 6, 0, {6}, {1}).put(2);
  for (int level = 0; level < depth; ++level) {
    p.mark().get(0).get(static_cast<uint8_t>(2 + level)).get(1).get(static_cast<uint8_t>(2 + level));
    p.dict().put(static_cast<uint8_t>(3 + level));
  }
  return p.stop().bytes();
}

// `depth` levels of [prev, prev] over `leaf` (a pickle fragment that leaves one value
// on the stack): 2^depth references to it.
std::string shared_list_dag(int depth, const std::string& leaf) {
  PickleBytes p;
  p.proto().raw(leaf).long_put(0);
  for (int level = 0; level < depth; ++level) {
    p.mark().long_get(static_cast<uint32_t>(level)).long_get(static_cast<uint32_t>(level)).list();
    p.long_put(static_cast<uint32_t>(level + 1));
  }
  return p.stop().bytes();
}

std::string tensor_fragment(const std::vector<int64_t>& shape = {6}, const std::vector<int64_t>& stride = {1}) {
  PickleBytes p;
  p.tensor("FloatStorage", "0", 6, 0, shape, stride);
  return p.bytes();
}

// 20 levels of {A: prev, B: prev} with 4 KiB keys (a 9 KB file): 2^20 tensors with
// names of 80 KiB, some 86 GB copied out before names were capped.
TEST(TorchFileSourceTest, LongNamesThroughSharedDictsAreRefused) {
  TempDir dir("pt");
  const std::string path = write_hostile(dir, "dag.pt", shared_dict_dag(20, 4096));
  expect_refused(path, "a tensor name longer than 4096 bytes (starting 'aaaa");
  auto tensors = list_torch_tensors(path);  // cheap now: refused at the second level
  ASSERT_FALSE(tensors);
}

// 199 nested dicts reusing one 1 MiB key: a single name of 199 MiB.
TEST(TorchFileSourceTest, OneLongKeyReusedByNestedDictsIsRefused) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().str(std::string(1 << 20, 'k')).put(0).pop();
  for (int i = 0; i < 199; ++i) p.mark().get(0);
  p.raw(tensor_fragment());
  for (int i = 0; i < 199; ++i) p.dict();
  const std::string path = write_hostile(dir, "chain.pt", p.stop().bytes());
  expect_refused(path, "a tensor name longer than 4096 bytes (starting 'kkkk");
}

// Names up to kMaxTorchNameBytes are fine; long keys of containers holding no tensor
// are never refused.
TEST(TorchFileSourceTest, NamesUpToTheLimitAndLongKeysWithoutTensors) {
  TempDir dir("pt");
  const std::string longest(kMaxTorchNameBytes - 2, 'n');  // "a." + longest: at the limit
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("a").empty_dict().str(longest).raw(tensor_fragment()).setitem();
  p.str(std::string(100000, 'x')).empty_list().mark().integer(1).str("text").appends();
  p.setitems().stop();
  auto tensors = list_torch_tensors(write_hostile(dir, "long.pt", p.bytes()));
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].name, "a." + longest);
  EXPECT_TRUE((*tensors)[0].error.empty()) << (*tensors)[0].error;

  PickleBytes q;  // one byte more
  q.proto().empty_dict().str("a").empty_dict().str(longest + "n").raw(tensor_fragment());
  q.setitem().setitem().stop();
  const std::string too_long = write_hostile(dir, "too_long.pt", q.bytes());
  auto refused = list_torch_tensors(too_long);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.message(), HasSubstr(too_long + ": a tensor name longer than 4096 bytes"));
}

// 2^19 references to one tensor through [prev, prev] lists: over kMaxTorchTensors.
TEST(TorchFileSourceTest, TensorsReachedAgainThroughSharedListsAreCounted) {
  TempDir dir("pt");
  const std::string path = write_hostile(dir, "fan.pt", shared_list_dag(19, tensor_fragment()));
  expect_refused(path, "more than " + std::to_string(kMaxTorchTensors) + " tensors");
  // Just under the limit: listed.
  auto tensors = list_torch_tensors(write_hostile(dir, "fan17.pt", shared_list_dag(17, tensor_fragment())));
  ASSERT_TRUE(tensors) << tensors.message();
  EXPECT_EQ(tensors->size(), size_t{1} << 17);
  EXPECT_EQ((*tensors)[5].name, "0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.1");
}

// 9000 tensors named by one 4000-byte key each: 36 MB of names in all.
TEST(TorchFileSourceTest, NamesInAllAreCapped) {
  TempDir dir("pt");
  PickleBytes leaf;
  leaf.empty_dict().str(std::string(4000, 'w')).raw(tensor_fragment()).setitem();
  PickleBytes p;
  p.proto().raw(leaf.bytes()).put(0).pop().empty_list().mark();
  for (int i = 0; i < 9000; ++i) p.get(0);
  const std::string path = write_hostile(dir, "names.pt", p.appends().stop().bytes());
  expect_refused(path, "tensor names longer than " + std::to_string(kMaxTorchNameTotalBytes >> 20) + " MiB in all");
}

// A dict of 20000 entries (no tensor) reached 4096 times: 82M steps, refused quickly
// instead of walked for as long as it takes.
TEST(TorchFileSourceTest, WalkingSharedContainersIsBounded) {
  TempDir dir("pt");
  PickleBytes leaf;
  leaf.empty_dict().mark();
  for (int i = 0; i < 20000; ++i) leaf.integer(i).integer(i);
  leaf.setitems();
  const std::string path = write_hostile(dir, "walk.pt", shared_list_dag(12, leaf.bytes()));
  expect_refused(path, "objects and container items to visit");
}

// A 255-dim tensor reached 2^17 times: its shape and stride alone would take 530 MB.
TEST(TorchFileSourceTest, TheListingIsCapped) {
  TempDir dir("pt");
  const std::string path = write_hostile(
      dir, "dims.pt", shared_list_dag(17, tensor_fragment(std::vector<int64_t>(255, 1), std::vector<int64_t>(255, 0))));
  expect_refused(path,
                 "listing its tensors would take more than " + std::to_string(kMaxTorchListingBytes >> 20) + " MiB");
}

// A storage key too long for any zip entry: that tensor's error, quoting only its start.
TEST(TorchFileSourceTest, StorageKeyTooLongIsATensorError) {
  TempDir dir("pt");
  PickleBytes p;
  p.proto().empty_dict().mark();
  p.str("bad").tensor("FloatStorage", std::string(5000, '7'), 6, 0, {6}, {1});
  p.str("good").raw(tensor_fragment());
  p.setitems().stop();
  auto tensors = list_torch_tensors(write_hostile(dir, "key.pt", p.bytes()));
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_THAT((*tensors)[0].error, HasSubstr("(tensor 'bad'): corrupt tensor: its storage key of 5000 bytes"));
  EXPECT_LT((*tensors)[0].error.size(), 400u);
  EXPECT_TRUE((*tensors)[1].error.empty()) << (*tensors)[1].error;
}

// 200000 tensors under one repeated key: renamed x, x#2, ..., x#200000 with a counter
// per name (trying #2, #3, ... afresh for each copy took hours).
TEST(TorchFileSourceTest, ManyRepeatedNamesAreRenamedInLinearTime) {
  TempDir dir("pt");
  const int copies = 200000;
  PickleBytes p;
  p.proto().str("x").put(0).pop().raw(tensor_fragment()).put(1).pop();
  p.str("x#3").put(2).pop();  // a name the renaming must skip
  p.empty_dict().mark();
  p.get(2).get(1);  // "x#3" first
  for (int i = 0; i < copies; ++i) p.get(0).get(1);
  const std::string path = write_hostile(dir, "dup.pt", p.setitems().stop().bytes());
  auto tensors = list_torch_tensors(path);
  ASSERT_TRUE(tensors) << tensors.message();
  ASSERT_EQ(tensors->size(), size_t{copies} + 1);
  std::unordered_set<std::string> names;
  for (const TorchTensor& t : *tensors) {
    EXPECT_TRUE(names.insert(t.name).second) << "repeated name " << t.name;
  }
  EXPECT_EQ((*tensors)[0].name, "x#3");
  EXPECT_EQ((*tensors)[1].name, "x");
  EXPECT_EQ((*tensors)[2].name, "x#2");
  EXPECT_EQ((*tensors)[3].name, "x#4");
  EXPECT_EQ((*tensors)[copies].name, "x#" + std::to_string(copies + 1));
  EXPECT_EQ(names.count("x#" + std::to_string(copies)), 1u);
}

}  // namespace
}  // namespace tensorscope::compare
