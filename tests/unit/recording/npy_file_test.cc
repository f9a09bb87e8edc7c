// npy_file_test.cc — write_npy / NpyReader: byte-exact round trips of every dtype, the
// header layout, chunked reads, the atomic write, corrupt and hostile headers, and (when
// /usr/bin/python3 has numpy) files exchanged with numpy.load / numpy.save.
#include "tensorscope/recording/npy_file.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dir_listing.h"
#include "temp_dir.h"

namespace tensorscope::recording {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using wire::DType;

const std::vector<DType> kAllDTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                       DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                       DType::kUInt8,   DType::kBool};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using testing::list_dir;

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Reads every data byte through `chunk`-byte reads.
std::string read_all(NpyReader& reader, size_t chunk) {
  std::string out;
  std::vector<char> buf(chunk);
  while (true) {
    StatusOr<size_t> n = reader.read(buf.data(), buf.size());
    EXPECT_TRUE(n.is_ok()) << n.message();
    if (!n.is_ok() || *n == 0) break;
    out.append(buf.data(), *n);
  }
  return out;
}

// An .npy file with the given version and header text taken as is (no padding added),
// with `header_len` written in the length field (the text's size when not given).
std::string npy_bytes(int major, int minor, const std::string& header, const std::string& data,
                      int64_t header_len = -1) {
  const uint64_t len = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += static_cast<char>(minor);
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) s += static_cast<char>((len >> (8 * i)) & 0xff);
  return s + header + data;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "()" : s;
}

TEST(NpyFile, RoundTripsEveryDtypeAndShapeByteExact) {
  TempDir dir("ts-npy");
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3, 0, 2}, {7}, {2, 3, 4}, {1, 1, 5}};
  uint32_t seed = 1;
  for (const DType dtype : kAllDTypes) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(std::string(wire::dtype_name(dtype)) + " " + shape_str(shape));
      int64_t numel = 1;
      for (const int64_t d : shape) numel *= d;
      const std::string data = random_bytes(numel * wire::dtype_size(dtype), seed++);
      const std::string path = dir.path() + "/t.npy";
      Status s = write_npy(path, dtype, shape, data.data(), data.size());
      ASSERT_TRUE(s.is_ok()) << s.message();

      StatusOr<NpyReader> r = NpyReader::open(path);
      ASSERT_TRUE(r.is_ok()) << r.message();
      EXPECT_EQ(r->dtype(), dtype);
      EXPECT_EQ(r->descr(), npy_descr(dtype));
      EXPECT_EQ(r->shape(), shape);
      EXPECT_FALSE(r->fortran_order());
      EXPECT_EQ(r->format_major(), 1);
      EXPECT_EQ(r->numel(), static_cast<uint64_t>(numel));
      EXPECT_EQ(r->data_bytes(), data.size());
      EXPECT_EQ(r->data_offset() % 64, 0u);
      EXPECT_EQ(read_all(*r, 5), data);
      EXPECT_EQ(r->remaining_bytes(), 0u);
    }
  }
}

TEST(NpyFile, HeaderIsWhatNumpyWrites) {
  TempDir dir("ts-npy");
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
    std::string dict;
  };
  const std::vector<Case> cases = {
      {DType::kFloat32, {2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
      {DType::kFloat64, {5}, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"},
      {DType::kFloat16, {}, "{'descr': '<f2', 'fortran_order': False, 'shape': (), }"},
      {DType::kInt8, {0}, "{'descr': '|i1', 'fortran_order': False, 'shape': (0,), }"},
      {DType::kInt16, {1}, "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), }"},
      {DType::kInt32, {1}, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }"},
      {DType::kInt64, {1}, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }"},
      {DType::kUInt8, {1}, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }"},
      {DType::kBool, {1}, "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }"},
      {DType::kBFloat16, {2}, "{'descr': [('bfloat16', '<u2')], 'fortran_order': False, 'shape': (2,), }"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    int64_t numel = 1;
    for (const int64_t d : c.shape) numel *= d;
    const std::string data(numel * wire::dtype_size(c.dtype), '\x01');
    const std::string path = dir.path() + "/h.npy";
    ASSERT_TRUE(write_npy(path, c.dtype, c.shape, data.data(), data.size()).is_ok());
    const std::string bytes = read_file(path);
    ASSERT_GE(bytes.size(), 10u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t header_len =
        static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    ASSERT_EQ(bytes.size(), 10 + header_len + data.size());
    EXPECT_EQ((10 + header_len) % 64, 0u);
    const std::string header = bytes.substr(10, header_len);
    EXPECT_EQ(header.substr(0, c.dict.size()), c.dict);
    EXPECT_EQ(header.back(), '\n');
    EXPECT_EQ(header.find_first_not_of(' ', c.dict.size()), header_len - 1);
    EXPECT_EQ(bytes.substr(10 + header_len), data);
    EXPECT_EQ(npy_descr(c.dtype), c.dict.substr(10, c.dict.find(", 'fortran_order'") - 10));
  }
  EXPECT_EQ(npy_descr(DType::kInvalid), "");
}

TEST(NpyFile, StreamsAFileLargerThanTheReadChunk) {
  TempDir dir("ts-npy");
  const std::string data = random_bytes(4 * 1000003, 7);  // ~4 MB of float32
  const std::string path = dir.path() + "/big.npy";
  ASSERT_TRUE(write_npy(path, DType::kFloat32, {1000003}, data.data(), data.size()).is_ok());
  StatusOr<NpyReader> r = NpyReader::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->data_bytes(), data.size());
  // 65537: not a multiple of the element size, so chunks end mid-element.
  std::string got;
  std::vector<char> buf(65537);
  int reads = 0;
  while (true) {
    const uint64_t before = r->remaining_bytes();
    StatusOr<size_t> n = r->read(buf.data(), buf.size());
    ASSERT_TRUE(n.is_ok()) << n.message();
    EXPECT_EQ(*n, std::min<uint64_t>(before, buf.size()));
    if (*n == 0) break;
    got.append(buf.data(), *n);
    ++reads;
  }
  EXPECT_GT(reads, 60);
  EXPECT_TRUE(got == data);
  StatusOr<size_t> again = r->read(buf.data(), buf.size());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, 0u);
}

TEST(NpyFile, UsesFormatTwoWhenTheHeaderNeedsIt) {
  TempDir dir("ts-npy");
  const std::vector<int64_t> shape(25000, 1);  // "1, " x 25000: over 65535 header bytes
  const double value = 2.5;
  const std::string path = dir.path() + "/many_dims.npy";
  ASSERT_TRUE(write_npy(path, DType::kFloat64, shape, &value, sizeof(value)).is_ok());
  const std::string bytes = read_file(path);
  EXPECT_EQ(bytes[6], 2);
  EXPECT_EQ(bytes[7], 0);
  StatusOr<NpyReader> r = NpyReader::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->format_major(), 2);
  EXPECT_EQ(r->shape(), shape);
  EXPECT_EQ(r->data_offset() % 64, 0u);
  EXPECT_EQ(r->descr(), "'<f8'");
  double back = 0;
  StatusOr<size_t> n = r->read(&back, sizeof(back));
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(*n, sizeof(back));
  EXPECT_EQ(back, value);
}

TEST(NpyFile, AtomicWriteLeavesOnlyTheFinalFile) {
  TempDir dir("ts-npy");
  const std::string path = dir.path() + "/a.npy";
  const std::string first = random_bytes(4 * 100, 3);
  ASSERT_TRUE(write_npy(path, DType::kInt32, {100}, first.data(), first.size()).is_ok());
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"a.npy"});
  // Replacing an existing file.
  const std::string second = random_bytes(8 * 10, 4);
  ASSERT_TRUE(write_npy(path, DType::kInt64, {2, 5}, second.data(), second.size()).is_ok());
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"a.npy"});
  StatusOr<NpyReader> r = NpyReader::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->dtype(), DType::kInt64);
  EXPECT_EQ(read_all(*r, 1 << 16), second);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777 & ~0644, 0u);
}

TEST(NpyFile, AFailedWriteKeepsTheOldFileAndRemovesItsTemporary) {
  TempDir dir("ts-npy");
  const std::string path = dir.path() + "/keep.npy";
  const std::string old_data = random_bytes(64, 5);
  ASSERT_TRUE(write_npy(path, DType::kUInt8, {64}, old_data.data(), old_data.size()).is_ok());
  const std::string old_bytes = read_file(path);

  // In a child whose file size limit (RLIMIT_FSIZE) makes the data write fail halfway.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = 64 * 1024;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
    const std::string big(1 << 20, '\x7f');
    const Status s = write_npy(path, DType::kUInt8, {1 << 20}, big.data(), big.size());
    if (s.is_ok()) ::_exit(1);
    if (s.message().find("cannot write") == std::string::npos) ::_exit(2);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write succeeded, 2: wrong message, 3: setrlimit";
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"keep.npy"});
  EXPECT_TRUE(read_file(path) == old_bytes);
}

TEST(NpyFile, WriteRefusesBadArguments) {
  TempDir dir("ts-npy");
  const std::string path = dir.path() + "/bad.npy";
  const std::string data(24, '\0');
  Status s = write_npy(path, DType::kFloat32, {2, 4}, data.data(), data.size());
  EXPECT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("does not match shape (2, 4) of float32 (32 bytes)"));
  EXPECT_THAT(s.message(), HasSubstr(path));
  s = write_npy(path, DType::kInvalid, {6}, data.data(), data.size());
  EXPECT_THAT(s.message(), HasSubstr("invalid dtype"));
  s = write_npy(path, static_cast<DType>(77), {6}, data.data(), data.size());
  EXPECT_THAT(s.message(), HasSubstr("invalid dtype"));
  s = write_npy(path, DType::kFloat32, {-2, -3}, data.data(), data.size());
  EXPECT_THAT(s.message(), HasSubstr("invalid shape"));
  s = write_npy(path, DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40}, data.data(), data.size());
  EXPECT_THAT(s.message(), HasSubstr("invalid shape"));
  const std::vector<int64_t> too_many_dims(kMaxNpyDims + 1, 1);
  s = write_npy(path, DType::kUInt8, too_many_dims, data.data(), 1);
  EXPECT_THAT(s.message(), HasSubstr("65536 dims, more than 65535"));
  s = write_npy(path, DType::kUInt8, {24}, nullptr, 24);
  EXPECT_THAT(s.message(), HasSubstr("data is null"));
  s = write_npy(dir.path() + "/no/such/dir/x.npy", DType::kUInt8, {24}, data.data(), 24);
  EXPECT_THAT(s.message(), HasSubstr("cannot create"));
  s = write_npy(dir.path() + "/", DType::kUInt8, {24}, data.data(), 24);
  EXPECT_THAT(s.message(), HasSubstr("not a file path"));
  s = write_npy("", DType::kUInt8, {24}, data.data(), 24);
  EXPECT_FALSE(s.is_ok());
  EXPECT_TRUE(list_dir(dir.path()).empty());
  // An empty array needs no data pointer.
  EXPECT_TRUE(write_npy(path, DType::kFloat32, {0, 3}, nullptr, 0).is_ok());
}

TEST(NpyFile, OpenReportsFilesThatAreNotThere) {
  TempDir dir("ts-npy");
  StatusOr<NpyReader> r = NpyReader::open(dir.path() + "/missing.npy");
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.message(), HasSubstr(dir.path() + "/missing.npy: cannot open"));
  r = NpyReader::open(dir.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.message(), HasSubstr("is a directory"));
  const std::string fifo = dir.path() + "/fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = NpyReader::open(fifo);  // must not wait for a writer
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.message(), HasSubstr("not a regular file"));
}

std::string dict(const std::string& descr, const std::string& fortran, const std::string& shape) {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

TEST(NpyFile, CorruptTruncatedAndHostileHeadersAreErrors) {
  TempDir dir("ts-npy");
  const std::string f4x6(24, '\0');
  const std::string good = dict("'<f4'", "False", "(2, 3)");
  struct Case {
    std::string name;
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"empty file", "", "too short: 0 bytes"},
      {"not npy", "PK\x03\x04 this is a zip file", "bad magic"},
      {"magic only", "\x93NUMPY", "too short"},
      {"version 4", npy_bytes(4, 0, good, f4x6), "unsupported .npy format version 4.0"},
      {"version 0", npy_bytes(0, 0, good, f4x6), "unsupported .npy format version 0.0"},
      {"version 1.1", npy_bytes(1, 1, good, f4x6), "version 1.1"},
      {"no header length", std::string("\x93NUMPY\x02\x00\x10", 9), "truncated header"},
      {"header past the end", npy_bytes(1, 0, good, "", 5000), "truncated header"},
      {"huge v2 header length", npy_bytes(2, 0, good, f4x6, 0xffffffffLL),
       "header length 4294967295 exceeds the limit"},
      {"empty header", npy_bytes(1, 0, "", ""), "unexpected end of header"},
      {"blank header", npy_bytes(1, 0, "      \n", ""), "unexpected end of header"},
      {"list", npy_bytes(1, 0, "[1, 2]\n", ""), "header is not a dict (got a list)"},
      {"string", npy_bytes(1, 0, "'<f4'\n", ""), "header is not a dict (got a string)"},
      {"missing shape", npy_bytes(1, 0, "{'descr': '<f4', 'fortran_order': False}", f4x6),
       "header is missing key 'shape'"},
      {"missing descr", npy_bytes(1, 0, "{'fortran_order': False, 'shape': (2, 3)}", f4x6),
       "header is missing key 'descr'"},
      {"missing fortran_order", npy_bytes(1, 0, "{'descr': '<f4', 'shape': (2, 3)}", f4x6),
       "header is missing key 'fortran_order'"},
      {"extra key", npy_bytes(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", f4x6),
       "unexpected key 'extra'"},
      {"duplicate key",
       npy_bytes(1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", f4x6),
       "key 'descr' twice"},
      {"key not a string", npy_bytes(1, 0, "{1: '<f4'}", f4x6), "key that is not a string: 1"},
      {"complex", npy_bytes(1, 0, dict("'<c8'", "False", "(3,)"), f4x6), "unsupported dtype '<c8'"},
      {"uint16", npy_bytes(1, 0, dict("'<u2'", "False", "(12,)"), f4x6), "unsupported dtype '<u2'"},
      {"object", npy_bytes(1, 0, dict("'|O'", "False", "(3,)"), f4x6), "unsupported dtype '|O'"},
      {"big-endian", npy_bytes(1, 0, dict("'>f4'", "False", "(2, 3)"), f4x6),
       "big-endian dtype '>f4' is not supported"},
      {"descr not a string", npy_bytes(1, 0, dict("42", "False", "(2, 3)"), f4x6), "unsupported dtype 42"},
      {"other structured dtype", npy_bytes(1, 0, dict("[('x', '<f4')]", "False", "(2, 3)"), f4x6),
       "unsupported dtype [('x', '<f4')] (structured dtypes other than"},
      {"fortran_order not a bool", npy_bytes(1, 0, dict("'<f4'", "'no'", "(2, 3)"), f4x6),
       "'fortran_order' must be True or False, got 'no'"},
      {"fortran_order 2-d", npy_bytes(1, 0, dict("'<f4'", "True", "(2, 3)"), f4x6),
       "fortran_order=True (column-major data) is not supported for shape (2, 3)"},
      {"shape a list", npy_bytes(1, 0, dict("'<f4'", "False", "[2, 3]"), f4x6),
       "'shape' must be a tuple of integers, got a list [2, 3]"},
      {"shape an int", npy_bytes(1, 0, dict("'<f4'", "False", "(6)"), f4x6),
       "'shape' must be a tuple of integers, got an integer (6)"},
      {"shape holds a string", npy_bytes(1, 0, dict("'<f4'", "False", "(2, 'a')"), f4x6), "got a string 'a'"},
      {"shape holds a float", npy_bytes(1, 0, dict("'<f4'", "False", "(2, 3.0)"), f4x6), "unsupported number"},
      {"negative dim", npy_bytes(1, 0, dict("'<f4'", "False", "(2, -1)"), f4x6), "negative dimension -1"},
      {"dim over int64", npy_bytes(1, 0, dict("'<f4'", "False", "(99999999999999999999,)"), f4x6),
       "dimension 99999999999999999999 in 'shape' is too large"},
      {"dim 2^63", npy_bytes(1, 0, dict("'|u1'", "False", "(9223372036854775808,)"), f4x6), "is too large"},
      {"shape product overflows", npy_bytes(1, 0, dict("'<f4'", "False", "(4611686018427387904, 4)"), f4x6),
       "is too large (float32 data over 2^63-1 bytes)"},
      {"bytes overflow", npy_bytes(1, 0, dict("'<f8'", "False", "(2305843009213693952,)"), f4x6), "is too large"},
      {"huge shape, tiny file", npy_bytes(1, 0, dict("'<f4'", "False", "(1099511627776,)"), f4x6),
       "file size mismatch: the header says 4398046511104 data bytes"},
      {"truncated data", npy_bytes(1, 0, good, f4x6.substr(0, 20)), "(truncated)"},
      {"trailing bytes", npy_bytes(1, 0, good, f4x6 + "xx"), "(trailing bytes)"},
      {"unterminated string", npy_bytes(1, 0, "{'descr': '<f4", ""), "unterminated string"},
      {"unbalanced", npy_bytes(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", ""), "missing ')'"},
      {"no colon", npy_bytes(1, 0, "{'descr' '<f4'}", ""), "expected ':' after a dict key"},
      {"no comma", npy_bytes(1, 0, "{'descr': '<f4' 'shape': (1,)}", ""), "expected ',' or '}'"},
      {"deep nesting", npy_bytes(2, 0, std::string(200000, '('), ""), "nested more than 16"},
      {"deep dict nesting", npy_bytes(1, 0, std::string(5000, '{'), ""), "nested more than 16"},
      {"too many values",
       npy_bytes(2, 0,
                 dict(
                     "'|u1'", "False",
                     "(" +
                         [] {
                           std::string dims;
                           for (int i = 0; i < 70000; ++i) dims += "1,";
                           return dims;
                         }() +
                         ")"),
                 "x"),
       "more than 65551 values"},
      {"junk after dict", npy_bytes(1, 0, good + " xyz\n", f4x6), "junk after the header dict"},
      {"unknown name", npy_bytes(1, 0, dict("float32", "False", "(2, 3)"), f4x6), "unexpected name 'float32'"},
      {"binary junk", npy_bytes(1, 0, std::string("\x00\xff\x01{", 4), f4x6), "not a valid Python literal"},
      {"call expression", npy_bytes(1, 0, "{'descr': __import__('os')}", ""), "unexpected name"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    const std::string path = dir.path() + "/case" + std::to_string(i) + ".npy";
    write_file(path, c.bytes);
    StatusOr<NpyReader> r = NpyReader::open(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_THAT(r.message(), HasSubstr(path + ": "));
    EXPECT_THAT(r.message(), HasSubstr(c.expected));
  }
}

TEST(NpyFile, AcceptsHeadersOtherWritersProduce) {
  TempDir dir("ts-npy");
  const std::string f4x6(24, '\x05');
  struct Case {
    std::string name;
    std::string bytes;
    DType dtype;
    std::vector<int64_t> shape;
    bool fortran;
  };
  const std::vector<Case> cases = {
      {"double quotes, no trailing comma",
       npy_bytes(1, 0, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}\n", f4x6),
       DType::kFloat32,
       {2, 3},
       false},
      {"keys in another order",
       npy_bytes(1, 0, "{'shape': (6,), 'descr': '<i4', 'fortran_order': False}", f4x6),
       DType::kInt32,
       {6},
       false},
      {"python 2 long", npy_bytes(1, 0, dict("'<f4'", "False", "(2L, 3L)"), f4x6), DType::kFloat32, {2, 3}, false},
      {"native order", npy_bytes(1, 0, dict("'=i2'", "False", "(12,)"), f4x6), DType::kInt16, {12}, false},
      {"no order", npy_bytes(1, 0, dict("'f8'", "False", "(3,)"), f4x6), DType::kFloat64, {3}, false},
      {"one-byte with '<'", npy_bytes(1, 0, dict("'<b1'", "False", "(24,)"), f4x6), DType::kBool, {24}, false},
      {"fortran 1-d", npy_bytes(1, 0, dict("'<f4'", "True", "(6,)"), f4x6), DType::kFloat32, {6}, true},
      {"fortran with unit dims",
       npy_bytes(1, 0, dict("'<f4'", "True", "(1, 6, 1)"), f4x6),
       DType::kFloat32,
       {1, 6, 1},
       true},
      {"version 2", npy_bytes(2, 0, dict("'<f2'", "False", "(3, 4)"), f4x6), DType::kFloat16, {3, 4}, false},
      {"version 3", npy_bytes(3, 0, dict("'<i8'", "False", "(3,)"), f4x6), DType::kInt64, {3}, false},
      {"0-d", npy_bytes(1, 0, dict("'<f4'", "False", "()"), f4x6.substr(0, 4)), DType::kFloat32, {}, false},
      {"bfloat16",
       npy_bytes(1, 0, dict("[('bfloat16', '<u2')]", "False", "(3, 4)"), f4x6),
       DType::kBFloat16,
       {3, 4},
       false},
      {"spaces and tabs",
       npy_bytes(1, 0, " {\t'descr' :'<f4' ,'fortran_order':False,'shape':( 2 , 3 , ) }\r\n", f4x6),
       DType::kFloat32,
       {2, 3},
       false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    const std::string path = dir.path() + "/ok" + std::to_string(i) + ".npy";
    write_file(path, c.bytes);
    StatusOr<NpyReader> r = NpyReader::open(path);
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->dtype(), c.dtype);
    EXPECT_EQ(r->shape(), c.shape);
    EXPECT_EQ(r->fortran_order(), c.fortran);
    const std::string data = read_all(*r, 7);
    EXPECT_EQ(data, f4x6.substr(0, data.size()));
    EXPECT_EQ(data.size(), r->data_bytes());
  }
}

TEST(NpyFile, ReadFailsWhenTheFileShrinksAfterOpen) {
  TempDir dir("ts-npy");
  const std::string path = dir.path() + "/shrink.npy";
  const std::string data = random_bytes(8000, 9);
  ASSERT_TRUE(write_npy(path, DType::kFloat64, {1000}, data.data(), data.size()).is_ok());
  StatusOr<NpyReader> r = NpyReader::open(path);
  ASSERT_TRUE(r.is_ok()) << r.message();
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(r->data_offset() + 100)), 0);
  std::vector<char> buf(8000);
  StatusOr<size_t> n = r->read(buf.data(), buf.size());
  ASSERT_FALSE(n.is_ok());
  EXPECT_THAT(n.message(), HasSubstr("unexpected end of file"));
  EXPECT_THAT(n.message(), HasSubstr(path));
}

TEST(NpyFile, ReaderCanBeMoved) {
  TempDir dir("ts-npy");
  const std::string path = dir.path() + "/m.npy";
  const std::string data = random_bytes(10, 11);
  ASSERT_TRUE(write_npy(path, DType::kInt8, {10}, data.data(), data.size()).is_ok());
  StatusOr<NpyReader> r = NpyReader::open(path);
  ASSERT_TRUE(r.is_ok());
  char first[4];
  ASSERT_TRUE(r->read(first, 4).is_ok());
  NpyReader moved = std::move(*r);
  NpyReader assigned = std::move(moved);
  EXPECT_EQ(assigned.remaining_bytes(), 6u);
  EXPECT_EQ(std::string(first, 4) + read_all(assigned, 3), data);
  EXPECT_FALSE(moved.read(first, 4).is_ok());  // NOLINT: moved-from reports, never crashes
}

// Random damage to a valid file's first bytes and random truncations: every result is
// either a clean error or a file whose data reads back completely.
TEST(NpyFile, DamagedFilesNeverCrash) {
  TempDir dir("ts-npy");
  const std::string path = dir.path() + "/fuzz.npy";
  const std::string data = random_bytes(4 * 6, 13);
  ASSERT_TRUE(write_npy(path, DType::kFloat32, {2, 3}, data.data(), data.size()).is_ok());
  const std::string valid = read_file(path);
  std::mt19937 rng(12345);
  int opened = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = valid;
    if (iter % 4 == 3) {
      bytes.resize(rng() % valid.size());
    } else {
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        const size_t at = rng() % 80;
        bytes[at] = static_cast<char>(iter % 2 ? rng() & 0xff : "(){}[]',:0123456789-L \n"[rng() % 24]);
      }
    }
    write_file(path, bytes);
    StatusOr<NpyReader> r = NpyReader::open(path);
    if (!r.is_ok()) {
      EXPECT_THAT(r.message(), HasSubstr(path));
      continue;
    }
    ++opened;
    EXPECT_EQ(read_all(*r, 8).size(), r->data_bytes());
  }
  EXPECT_LT(opened, 3000);
}

// ---- numpy interoperability (needs /usr/bin/python3 with numpy) ----

bool numpy_available() {
  static const bool available = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return available;
}

// Runs `script` with /usr/bin/python3 and `args`; returns its stdout, or "" and a failure.
std::string run_python(const std::string& dir, const std::string& script, const std::string& args) {
  const std::string script_path = dir + "/script.py";
  const std::string out_path = dir + "/script.out";
  write_file(script_path, script);
  const std::string command = "/usr/bin/python3 '" + script_path + "' " + args + " >'" + out_path + "' 2>&1";
  const int rc = std::system(command.c_str());
  const std::string out = read_file(out_path);
  EXPECT_EQ(rc, 0) << command << "\n" << out;
  return rc == 0 ? out : "";
}

// Known values that every dtype holds exactly, with their float16 and bfloat16 bits.
struct Known {
  double value;
  uint16_t f16;
  uint16_t bf16;
};
const Known kKnown[] = {{0.0, 0x0000, 0x0000}, {1.0, 0x3c00, 0x3f80},  {-2.0, 0xc000, 0xc000}, {0.5, 0x3800, 0x3f00},
                        {3.0, 0x4200, 0x4040}, {-1.5, 0xbe00, 0xbfc0}, {100.0, 0x5640, 0x42c8}};

// `n` known values of `dtype` as bytes, and their sum.
std::string known_bytes(DType dtype, size_t n, double* sum) {
  std::string out;
  *sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const Known& k = kKnown[i % std::size(kKnown)];
    double v = k.value;
    if (dtype == DType::kBool) v = v != 0 ? 1 : 0;
    if (dtype == DType::kUInt8) v = std::abs(std::trunc(v));
    if (dtype == DType::kInt8 || dtype == DType::kInt16 || dtype == DType::kInt32 || dtype == DType::kInt64) {
      v = std::trunc(v);
    }
    *sum += v;
    auto put = [&out](const auto& x) { out.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
    switch (dtype) {
      case DType::kFloat32: put(static_cast<float>(v)); break;
      case DType::kFloat64: put(v); break;
      case DType::kFloat16: put(k.f16); break;
      case DType::kBFloat16: put(k.bf16); break;
      case DType::kInt8: put(static_cast<int8_t>(v)); break;
      case DType::kInt16: put(static_cast<int16_t>(v)); break;
      case DType::kInt32: put(static_cast<int32_t>(v)); break;
      case DType::kInt64: put(static_cast<int64_t>(v)); break;
      case DType::kUInt8: put(static_cast<uint8_t>(v)); break;
      case DType::kBool: put(static_cast<uint8_t>(v)); break;
      case DType::kInvalid: break;
    }
  }
  return out;
}

std::string hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (const char c : bytes) {
    s += kHex[static_cast<unsigned char>(c) >> 4];
    s += kHex[static_cast<unsigned char>(c) & 0xf];
  }
  return s;
}

TEST(NpyNumpy, NumpyLoadsEveryFileWeWrite) {
  if (!numpy_available()) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  TempDir dir("ts-npy");
  const std::map<DType, std::string> numpy_descr = {
      {DType::kFloat32, "<f4"}, {DType::kFloat64, "<f8"}, {DType::kFloat16, "<f2"}, {DType::kBFloat16, "bfloat16"},
      {DType::kInt8, "|i1"},    {DType::kInt16, "<i2"},   {DType::kInt32, "<i4"},   {DType::kInt64, "<i8"},
      {DType::kUInt8, "|u1"},   {DType::kBool, "|b1"}};
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {}, {0, 4}, {7}};
  std::vector<std::string> expected;
  std::string args;
  int index = 0;
  for (const DType dtype : kAllDTypes) {
    for (const auto& shape : shapes) {
      int64_t numel = 1;
      for (const int64_t d : shape) numel *= d;
      double sum = 0;
      const std::string data = known_bytes(dtype, static_cast<size_t>(numel), &sum);
      const std::string name = "f" + std::to_string(index++) + ".npy";
      ASSERT_TRUE(write_npy(dir.path() + "/" + name, dtype, shape, data.data(), data.size()).is_ok());
      args += " '" + dir.path() + "/" + name + "'";
      std::ostringstream line;
      line << name << " " << numpy_descr.at(dtype) << " " << shape_str(shape) << " " << (data.empty() ? "-" : hex(data))
           << " " << sum;
      expected.push_back(line.str());
    }
  }
  // For each file: name, dtype (or "bfloat16"), shape, raw bytes, and the sum of the
  // values as numpy sees them (bfloat16 converted through its bits).
  const std::string script = R"PY(
import os, sys
import numpy as np
for path in sys.argv[1:]:
    a = np.load(path, allow_pickle=False)
    if a.dtype.names == ('bfloat16',):
        bits = a['bfloat16']
        raw = bits.tobytes()
        values = (bits.astype('<u4') << np.uint32(16)).view('<f4')
        kind = 'bfloat16'
    else:
        raw = a.tobytes()
        values = a
        kind = a.dtype.str
    shape = 'x'.join(str(d) for d in a.shape) or '()'
    total = float(values.astype('f8').sum())
    print(os.path.basename(path), kind, shape, raw.hex() or '-', '%g' % total)
)PY";
  const std::string out = run_python(dir.path(), script, args);
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, expected.size()) << line;
    EXPECT_EQ(line, expected[i]);
    ++i;
  }
  EXPECT_EQ(i, expected.size()) << out;
}

TEST(NpyNumpy, ReadsWhatNumpySaves) {
  if (!numpy_available()) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  TempDir dir("ts-npy");
  const std::string script = R"PY(
import sys
import numpy as np
d = sys.argv[1]
np.save(d + '/f4.npy', (np.arange(12, dtype='<f4') * 0.5).reshape(3, 4))
np.save(d + '/f8.npy', np.array([1.5, -2.25, 1e300]))
np.save(d + '/f2.npy', np.array([1, -2, 0.5], dtype='<f2'))
np.save(d + '/i1.npy', np.array([-128, 127, 0], dtype='i1'))
np.save(d + '/i2.npy', np.array([-32768, 32767], dtype='<i2'))
np.save(d + '/i4.npy', np.array([-2**31, 2**31 - 1], dtype='<i4'))
np.save(d + '/i8.npy', np.array([-2**63, 2**63 - 1, 0], dtype='<i8'))
np.save(d + '/u1.npy', np.array([0, 255, 7], dtype='u1'))
np.save(d + '/b1.npy', np.array([True, False, True]))
np.save(d + '/scalar.npy', np.array(3.25))
np.save(d + '/empty.npy', np.zeros((0, 3), dtype='<f4'))
np.save(d + '/bf16.npy', np.array([(0x3f80,), (0xc000,)], dtype=[('bfloat16', '<u2')]))
np.save(d + '/big.npy', np.arange(300000, dtype='<i4'))
np.save(d + '/fortran.npy', np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))
np.save(d + '/complex.npy', np.array([1 + 2j], dtype='<c8'))
np.save(d + '/u2.npy', np.array([1, 2], dtype='<u2'))
for version in [(2, 0), (3, 0)]:
    with open(d + '/v%d.npy' % version[0], 'wb') as f:
        np.lib.format.write_array(f, np.array([[1, 2], [3, 4]], dtype='<i2'), version=version)
)PY";
  run_python(dir.path(), script, "'" + dir.path() + "'");

  auto bytes_of = [](const auto& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  std::vector<float> f4(12);
  for (int i = 0; i < 12; ++i) f4[i] = 0.5f * static_cast<float>(i);
  std::vector<int32_t> big(300000);
  for (int i = 0; i < 300000; ++i) big[i] = i;
  struct Case {
    std::string file;
    DType dtype;
    std::vector<int64_t> shape;
    std::string data;
  };
  const std::vector<Case> cases = {
      {"f4.npy", DType::kFloat32, {3, 4}, bytes_of(f4)},
      {"f8.npy", DType::kFloat64, {3}, bytes_of(std::vector<double>{1.5, -2.25, 1e300})},
      {"f2.npy", DType::kFloat16, {3}, bytes_of(std::vector<uint16_t>{0x3c00, 0xc000, 0x3800})},
      {"i1.npy", DType::kInt8, {3}, bytes_of(std::vector<int8_t>{-128, 127, 0})},
      {"i2.npy", DType::kInt16, {2}, bytes_of(std::vector<int16_t>{-32768, 32767})},
      {"i4.npy",
       DType::kInt32,
       {2},
       bytes_of(std::vector<int32_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()})},
      {"i8.npy",
       DType::kInt64,
       {3},
       bytes_of(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0})},
      {"u1.npy", DType::kUInt8, {3}, bytes_of(std::vector<uint8_t>{0, 255, 7})},
      {"b1.npy", DType::kBool, {3}, bytes_of(std::vector<uint8_t>{1, 0, 1})},
      {"scalar.npy", DType::kFloat64, {}, bytes_of(std::vector<double>{3.25})},
      {"empty.npy", DType::kFloat32, {0, 3}, ""},
      {"bf16.npy", DType::kBFloat16, {2}, bytes_of(std::vector<uint16_t>{0x3f80, 0xc000})},
      {"big.npy", DType::kInt32, {300000}, bytes_of(big)},
      {"v2.npy", DType::kInt16, {2, 2}, bytes_of(std::vector<int16_t>{1, 2, 3, 4})},
      {"v3.npy", DType::kInt16, {2, 2}, bytes_of(std::vector<int16_t>{1, 2, 3, 4})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    StatusOr<NpyReader> r = NpyReader::open(dir.path() + "/" + c.file);
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->dtype(), c.dtype);
    EXPECT_EQ(r->shape(), c.shape);
    EXPECT_TRUE(read_all(*r, 4096) == c.data);
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"fortran.npy", "fortran_order=True (column-major data) is not supported"},
      {"complex.npy", "unsupported dtype '<c8'"},
      {"u2.npy", "unsupported dtype '<u2'"},
  };
  for (const auto& [file, message] : refused) {
    StatusOr<NpyReader> r = NpyReader::open(dir.path() + "/" + file);
    ASSERT_FALSE(r.is_ok()) << file;
    EXPECT_THAT(r.message(), HasSubstr(message));
  }
}

}  // namespace
}  // namespace tensorscope::recording
