// npy_file.cc — see npy_file.h.
#include "tensorscope/recording/npy_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <string_view>
#include <utility>

#include "tensorscope/base/atomic_file.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/base/posix_file.h"

namespace tensorscope::recording {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy files are written and read as little-endian");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kArrayAlign = 64;  // numpy.lib.format.ARRAY_ALIGN
constexpr size_t kV1MaxHeader = 65535;
constexpr int kMaxLiteralDepth = 16;
// Values in one header (a shape of kMaxNpyDims dims and the rest); bounds what parsing
// a hostile header may allocate to a few MiB.
constexpr size_t kMaxLiteralValues = kMaxNpyDims + 16;
constexpr size_t kMaxShownBytes = 80;
constexpr char kBFloat16Descr[] = "[('bfloat16', '<u2')]";

// Untrusted bytes for a message: printable ASCII kept, backslash and the rest escaped,
// cut after kMaxShownBytes with "...".
std::string shown(std::string_view s) { return escape_for_message(s, kMaxShownBytes); }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  s += ")";
  return s;
}

// numel of `shape` for elements of `item_bytes` bytes, such that numel * item_bytes
// fits in int64; false on a negative dim or overflow.
bool checked_numel(const std::vector<int64_t>& shape, size_t item_bytes, uint64_t* numel) {
  constexpr uint64_t kLimit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  bool has_zero = false;
  for (const int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) has_zero = true;
  }
  if (has_zero) {
    *numel = 0;
    return true;
  }
  const uint64_t max_numel = kLimit / std::max<uint64_t>(item_bytes, 1);
  uint64_t n = 1;
  for (const int64_t d : shape) {
    const auto u = static_cast<uint64_t>(d);
    if (n > max_numel / u) return false;
    n *= u;
  }
  *numel = n;
  return true;
}

// ---- the header: a Python literal ----

struct PyValue {
  enum class Kind { kString, kInt, kTrue, kFalse, kNone, kTuple, kList, kDict };
  Kind kind = Kind::kNone;
  std::string text;            // kString: the decoded string
  int64_t integer = 0;         // kInt
  bool int_overflow = false;   // kInt: does not fit in int64
  std::vector<PyValue> items;  // kTuple/kList: elements; kDict: key0, value0, key1, ...
  std::string_view source;     // the literal as written in the header
};

const char* kind_name(PyValue::Kind k) {
  switch (k) {
    case PyValue::Kind::kString: return "a string";
    case PyValue::Kind::kInt: return "an integer";
    case PyValue::Kind::kTrue:
    case PyValue::Kind::kFalse: return "a bool";
    case PyValue::Kind::kNone: return "None";
    case PyValue::Kind::kTuple: return "a tuple";
    case PyValue::Kind::kList: return "a list";
    case PyValue::Kind::kDict: return "a dict";
  }
  return "a value";
}

// Parses the subset of Python literals numpy writes (and numpy.load would accept):
// strings, integers, True/False/None, tuples, lists and dicts, nested at most
// kMaxLiteralDepth deep, kMaxLiteralValues values in all. Never reads outside `text`.
class LiteralParser {
 public:
  explicit LiteralParser(std::string_view text) : text_(text) {}

  // The whole text must be one literal followed only by whitespace.
  bool parse(PyValue* out, std::string* error) {
    skip_space();
    if (!value(out, 0)) {
      *error = error_;
      return false;
    }
    skip_space();
    if (pos_ != text_.size()) {
      *error = "junk after the header dict at byte " + std::to_string(pos_) + ": " + shown(text_.substr(pos_));
      return false;
    }
    return true;
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_ident(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_'; }

  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }

  bool fail(const std::string& what) {
    if (error_.empty()) {
      error_ = "header is not a valid Python literal: " + what + " at byte " + std::to_string(pos_);
    }
    return false;
  }

  bool value(PyValue* out, int depth) {
    if (depth > kMaxLiteralDepth) {
      return fail("nested more than " + std::to_string(kMaxLiteralDepth) + " levels deep");
    }
    if (++values_ > kMaxLiteralValues) {
      return fail("more than " + std::to_string(kMaxLiteralValues) + " values");
    }
    skip_space();
    if (at_end()) return fail("unexpected end of header");
    const size_t start = pos_;
    const char c = text_[pos_];
    bool ok = false;
    if (c == '\'' || c == '"') {
      ok = string(out);
    } else if (is_digit(c) || c == '-' || c == '+') {
      ok = integer(out);
    } else if (c == '(') {
      ok = sequence(out, ')', PyValue::Kind::kTuple, depth);
    } else if (c == '[') {
      ok = sequence(out, ']', PyValue::Kind::kList, depth);
    } else if (c == '{') {
      ok = dict(out, depth);
    } else if (is_ident(c)) {
      ok = name(out);
    } else {
      return fail("unexpected character '" + shown(text_.substr(pos_, 1)) + "'");
    }
    if (ok && out->source.empty()) out->source = text_.substr(start, pos_ - start);
    return ok;
  }

  bool string(PyValue* out) {
    const char quote = text_[pos_++];
    out->kind = PyValue::Kind::kString;
    while (true) {
      if (at_end()) return fail("unterminated string");
      const char c = text_[pos_++];
      if (c == quote) return true;
      if (c == '\n') return fail("unterminated string");
      if (c != '\\') {
        out->text += c;
        continue;
      }
      if (at_end()) return fail("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '\\': out->text += '\\'; break;
        case '\'': out->text += '\''; break;
        case '"': out->text += '"'; break;
        case 'n': out->text += '\n'; break;
        case 't': out->text += '\t'; break;
        case 'r': out->text += '\r'; break;
        case '0': out->text += '\0'; break;
        default:  // Python keeps unknown escapes as written
          out->text += '\\';
          out->text += e;
      }
    }
  }

  bool integer(PyValue* out) {
    bool negative = false;
    if (text_[pos_] == '-' || text_[pos_] == '+') {
      negative = text_[pos_] == '-';
      ++pos_;
      skip_space();
    }
    if (at_end() || !is_digit(text_[pos_])) return fail("expected a digit");
    // Magnitude up to 2^63 (so that -2^63 fits); more is an overflow.
    constexpr uint64_t kMaxMagnitude = uint64_t{1} << 63;
    uint64_t magnitude = 0;
    bool overflow = false;
    while (!at_end() && is_digit(text_[pos_])) {
      const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (magnitude > (kMaxMagnitude - digit) / 10) overflow = true;
      if (!overflow) magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    // Python 2 wrote long integers with an 'L' suffix ("(3L, 4L)").
    if (!at_end() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    if (!at_end() && (is_ident(text_[pos_]) || text_[pos_] == '.')) {
      return fail("unsupported number");
    }
    if (!overflow && !negative && magnitude == kMaxMagnitude) overflow = true;
    out->kind = PyValue::Kind::kInt;
    out->int_overflow = overflow;
    if (!overflow) {
      out->integer = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    }
    return true;
  }

  bool name(PyValue* out) {
    const size_t start = pos_;
    while (!at_end() && is_ident(text_[pos_])) ++pos_;
    const std::string_view word = text_.substr(start, pos_ - start);
    if (word == "True") {
      out->kind = PyValue::Kind::kTrue;
    } else if (word == "False") {
      out->kind = PyValue::Kind::kFalse;
    } else if (word == "None") {
      out->kind = PyValue::Kind::kNone;
    } else {
      pos_ = start;
      return fail("unexpected name '" + shown(word) + "'");
    }
    return true;
  }

  // "(" / "[" elements ")" / "]". A parenthesized single value without a comma is the
  // value itself, as in Python: "(5)" is 5, "(5,)" a tuple.
  bool sequence(PyValue* out, char close, PyValue::Kind kind, int depth) {
    const size_t start = pos_;
    ++pos_;
    std::vector<PyValue> items;
    bool saw_comma = false;
    while (true) {
      skip_space();
      if (at_end()) return fail(std::string("missing '") + close + "'");
      if (text_[pos_] == close) {
        ++pos_;
        break;
      }
      PyValue item;
      if (!value(&item, depth + 1)) return false;
      items.push_back(std::move(item));
      skip_space();
      if (at_end()) return fail(std::string("missing '") + close + "'");
      if (text_[pos_] == ',') {
        saw_comma = true;
        ++pos_;
      } else if (text_[pos_] != close) {
        return fail(std::string("expected ',' or '") + close + "'");
      }
    }
    if (kind == PyValue::Kind::kTuple && items.size() == 1 && !saw_comma) {
      *out = std::move(items[0]);
      out->source = text_.substr(start, pos_ - start);
      return true;
    }
    out->kind = kind;
    out->items = std::move(items);
    return true;
  }

  bool dict(PyValue* out, int depth) {
    ++pos_;
    out->kind = PyValue::Kind::kDict;
    while (true) {
      skip_space();
      if (at_end()) return fail("missing '}'");
      if (text_[pos_] == '}') {
        ++pos_;
        return true;
      }
      PyValue key;
      if (!value(&key, depth + 1)) return false;
      skip_space();
      if (at_end() || text_[pos_] != ':') return fail("expected ':' after a dict key");
      ++pos_;
      PyValue item;
      if (!value(&item, depth + 1)) return false;
      out->items.push_back(std::move(key));
      out->items.push_back(std::move(item));
      skip_space();
      if (at_end()) return fail("missing '}'");
      if (text_[pos_] == ',') {
        ++pos_;
      } else if (text_[pos_] != '}') {
        return fail("expected ',' or '}'");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t values_ = 0;
  std::string error_;
};

// descr string (e.g. "<f4") to DType; kInvalid with *problem set otherwise.
wire::DType dtype_from_descr_string(const std::string& descr, std::string* problem) {
  std::string_view s = descr;
  char order = '=';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    order = s[0];
    s.remove_prefix(1);
  }
  struct Entry {
    std::string_view code;
    wire::DType dtype;
  };
  static constexpr Entry kTable[] = {
      {"f4", wire::DType::kFloat32}, {"f8", wire::DType::kFloat64}, {"f2", wire::DType::kFloat16},
      {"i1", wire::DType::kInt8},    {"i2", wire::DType::kInt16},   {"i4", wire::DType::kInt32},
      {"i8", wire::DType::kInt64},   {"u1", wire::DType::kUInt8},   {"b1", wire::DType::kBool},
  };
  for (const Entry& e : kTable) {
    if (s != e.code) continue;
    // Byte order does not matter for one-byte types; '|' ("not applicable") is only
    // valid for them.
    const bool one_byte = wire::dtype_size(e.dtype) == 1;
    if (one_byte) return e.dtype;
    if (order == '>') {
      *problem = "big-endian dtype '" + shown(descr) + "' is not supported";
      return wire::DType::kInvalid;
    }
    if (order == '|') break;
    return e.dtype;  // '<', '=' or none: little-endian here
  }
  *problem = "unsupported dtype '" + shown(descr) + "'";
  return wire::DType::kInvalid;
}

wire::DType dtype_from_descr(const PyValue& v, std::string* problem) {
  if (v.kind == PyValue::Kind::kString) return dtype_from_descr_string(v.text, problem);
  // The one structured descr we write: [('bfloat16', '<u2')].
  if (v.kind == PyValue::Kind::kList && v.items.size() == 1) {
    const PyValue& field = v.items[0];
    if (field.kind == PyValue::Kind::kTuple && field.items.size() == 2 &&
        field.items[0].kind == PyValue::Kind::kString && field.items[0].text == "bfloat16" &&
        field.items[1].kind == PyValue::Kind::kString &&
        (field.items[1].text == "<u2" || field.items[1].text == "=u2" || field.items[1].text == "u2")) {
      return wire::DType::kBFloat16;
    }
  }
  *problem = "unsupported dtype " + shown(v.source) +
      (v.kind == PyValue::Kind::kList
           ? " (structured dtypes other than " + std::string(kBFloat16Descr) + " are not supported)"
           : "");
  return wire::DType::kInvalid;
}

Status write_npy_impl(const std::string& path, wire::DType dtype, const std::vector<int64_t>& shape, const void* data,
                      size_t bytes) {
  if (path.empty()) return Status::error("write_npy: empty path");
  const std::string descr = npy_descr(dtype);
  if (descr.empty()) {
    return Status::error(path + ": invalid dtype " + std::to_string(static_cast<unsigned>(dtype)));
  }
  if (shape.size() > kMaxNpyDims) {
    return Status::error(path + ": " + std::to_string(shape.size()) + " dims, more than " +
                         std::to_string(kMaxNpyDims));
  }
  const size_t item = wire::dtype_size(dtype);
  uint64_t numel = 0;
  if (!checked_numel(shape, item, &numel)) {
    return Status::error(path + ": invalid shape " + shape_text(shape) +
                         " (a negative dim, or more than 2^63-1 bytes)");
  }
  const uint64_t expected = numel * item;
  if (expected != bytes) {
    return Status::error(path + ": data size " + std::to_string(bytes) + " bytes does not match shape " +
                         shape_text(shape) + " of " + wire::dtype_name(dtype) + " (" + std::to_string(expected) +
                         " bytes)");
  }
  if (bytes > 0 && data == nullptr) return Status::error(path + ": data is null");

  // Header: numpy's dict text, padded with spaces and a final '\n' so that the data
  // starts on a multiple of 64 bytes.
  std::string dict = "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Version 1.0 (2-byte header length) unless the padded header needs more.
  const auto padded_len = [&dict](size_t prefix_bytes) {
    const size_t unpadded = prefix_bytes + dict.size() + 1;
    return dict.size() + 1 + (kArrayAlign - unpadded % kArrayAlign) % kArrayAlign;
  };
  int major = 1;
  size_t prefix = kMagicBytes + 2 + 2;
  size_t header_len = padded_len(prefix);
  if (header_len > kV1MaxHeader) {
    major = 2;
    prefix = kMagicBytes + 2 + 4;
    header_len = padded_len(prefix);
  }
  const size_t padding = header_len - dict.size() - 1;
  if (header_len > std::numeric_limits<uint32_t>::max() || header_len > kMaxNpyHeaderBytes) {
    return Status::error(path + ": shape " + shape_text(shape).substr(0, 40) +
                         "... has too many dims for an .npy header");
  }
  std::string header(kMagic, kMagicBytes);
  header += static_cast<char>(major);
  header += '\0';
  for (size_t i = 0; i < prefix - kMagicBytes - 2; ++i) {
    header += static_cast<char>((header_len >> (8 * i)) & 0xff);
  }
  header += dict;
  header.append(padding, ' ');
  header += '\n';

  AtomicWriteOptions options;
  options.temp_prefix = kTempNpyPrefix;
  return write_file_atomically(path, header, std::string_view(static_cast<const char*>(data), bytes), options);
}

}  // namespace

std::string npy_descr(wire::DType dtype) {
  switch (dtype) {
    case wire::DType::kFloat32: return "'<f4'";
    case wire::DType::kFloat64: return "'<f8'";
    case wire::DType::kFloat16: return "'<f2'";
    case wire::DType::kBFloat16: return kBFloat16Descr;
    case wire::DType::kInt8: return "'|i1'";
    case wire::DType::kInt16: return "'<i2'";
    case wire::DType::kInt32: return "'<i4'";
    case wire::DType::kInt64: return "'<i8'";
    case wire::DType::kUInt8: return "'|u1'";
    case wire::DType::kBool: return "'|b1'";
    case wire::DType::kInvalid: break;
  }
  return "";
}

Status write_npy(const std::string& path, wire::DType dtype, const std::vector<int64_t>& shape, const void* data,
                 size_t bytes) {
  Status s;
  try {
    s = write_npy_impl(path, dtype, shape, data, bytes);
  } catch (const std::exception& e) {
    s = Status::error(path + ": cannot write: " + e.what());
  } catch (...) {
    s = Status::error(path + ": cannot write: unknown error");
  }
  return s;
}

// ---- NpyReader ----

NpyReader::NpyReader(NpyReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      dtype_(other.dtype_),
      descr_(std::move(other.descr_)),
      shape_(std::move(other.shape_)),
      fortran_order_(other.fortran_order_),
      major_(other.major_),
      numel_(other.numel_),
      data_offset_(other.data_offset_),
      data_bytes_(other.data_bytes_),
      consumed_(other.consumed_) {}

NpyReader& NpyReader::operator=(NpyReader&& other) noexcept {
  if (this != &other) {
    close_fd();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    dtype_ = other.dtype_;
    descr_ = std::move(other.descr_);
    shape_ = std::move(other.shape_);
    fortran_order_ = other.fortran_order_;
    major_ = other.major_;
    numel_ = other.numel_;
    data_offset_ = other.data_offset_;
    data_bytes_ = other.data_bytes_;
    consumed_ = other.consumed_;
  }
  return *this;
}

NpyReader::~NpyReader() { close_fd(); }

void NpyReader::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

StatusOr<NpyReader> NpyReader::open(const std::string& path) {
  try {
    const auto error = [&path](const std::string& problem) { return Status::error(path + ": " + problem); };
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      return error("cannot open: " + errno_text(err));
    }
    NpyReader reader;
    reader.path_ = path;
    reader.fd_ = fd;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      return error("cannot stat: " + errno_text(err));
    }
    if (S_ISDIR(st.st_mode)) return error("is a directory, not an .npy file");
    if (!S_ISREG(st.st_mode)) return error("not a regular file");
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    const auto file_size = static_cast<uint64_t>(st.st_size);

    // Magic and version.
    unsigned char prefix[12] = {};
    auto read = pread_full(fd, prefix, std::min<uint64_t>(sizeof(prefix), file_size), 0, path);
    if (!read) return read.status();
    size_t got = *read;
    if (got < kMagicBytes + 2 || std::memcmp(prefix, kMagic, kMagicBytes) != 0) {
      if (got >= kMagicBytes && std::memcmp(prefix, kMagic, kMagicBytes) != 0) {
        return error("not an .npy file (bad magic: expected \\x93NUMPY, got " +
                     shown(std::string_view(reinterpret_cast<const char*>(prefix), kMagicBytes)) + ")");
      }
      return error("not an .npy file (too short: " + std::to_string(file_size) + " bytes)");
    }
    const int major = prefix[6];
    const int minor = prefix[7];
    if (major < 1 || major > 3 || minor != 0) {
      return error("unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (1.0, 2.0 and 3.0 are supported)");
    }
    const size_t len_bytes = major == 1 ? 2 : 4;
    const size_t header_start = kMagicBytes + 2 + len_bytes;
    if (got < header_start) {
      return error("truncated header (file of " + std::to_string(file_size) + " bytes ends inside the header length)");
    }
    uint64_t header_len = 0;
    for (size_t i = 0; i < len_bytes; ++i) {
      header_len |= static_cast<uint64_t>(prefix[kMagicBytes + 2 + i]) << (8 * i);
    }
    if (header_len > kMaxNpyHeaderBytes) {
      return error("header length " + std::to_string(header_len) + " exceeds the limit of " +
                   std::to_string(kMaxNpyHeaderBytes) + " bytes");
    }
    if (header_start + header_len > file_size) {
      return error("truncated header (header of " + std::to_string(header_len) + " bytes, but the file has " +
                   std::to_string(file_size) + " bytes)");
    }
    std::string header(header_len, '\0');
    read = pread_full(fd, header.data(), header.size(), header_start, path);
    if (!read) return read.status();
    if (*read != header.size()) return error("truncated header (file shrank while reading)");

    // The dict.
    PyValue dict;
    std::string problem;
    if (!LiteralParser(header).parse(&dict, &problem)) return error(problem);
    if (dict.kind != PyValue::Kind::kDict) {
      return error(std::string("header is not a dict (got ") + kind_name(dict.kind) + ")");
    }
    const PyValue* descr = nullptr;
    const PyValue* fortran = nullptr;
    const PyValue* shape = nullptr;
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const PyValue& key = dict.items[i];
      if (key.kind != PyValue::Kind::kString) {
        return error("header has a key that is not a string: " + shown(key.source));
      }
      const PyValue** slot = key.text == "descr" ? &descr
          : key.text == "fortran_order"          ? &fortran
          : key.text == "shape"                  ? &shape
                                                 : nullptr;
      if (slot == nullptr) return error("header has unexpected key '" + shown(key.text) + "'");
      if (*slot != nullptr) return error("header has key '" + key.text + "' twice");
      *slot = &dict.items[i + 1];
    }
    if (descr == nullptr) return error("header is missing key 'descr'");
    if (fortran == nullptr) return error("header is missing key 'fortran_order'");
    if (shape == nullptr) return error("header is missing key 'shape'");

    reader.dtype_ = dtype_from_descr(*descr, &problem);
    if (reader.dtype_ == wire::DType::kInvalid) return error(problem);
    reader.descr_ = std::string(descr->source);

    if (fortran->kind != PyValue::Kind::kTrue && fortran->kind != PyValue::Kind::kFalse) {
      return error("'fortran_order' must be True or False, got " + shown(fortran->source));
    }
    reader.fortran_order_ = fortran->kind == PyValue::Kind::kTrue;

    if (shape->kind != PyValue::Kind::kTuple) {
      return error(std::string("'shape' must be a tuple of integers, got ") + kind_name(shape->kind) + " " +
                   shown(shape->source));
    }
    reader.shape_.reserve(shape->items.size());
    for (const PyValue& d : shape->items) {
      if (d.kind != PyValue::Kind::kInt) {
        return error(std::string("'shape' must be a tuple of integers, got ") + kind_name(d.kind) + " " +
                     shown(d.source) + " in " + shown(shape->source));
      }
      if (d.int_overflow) {
        return error("dimension " + shown(d.source) + " in 'shape' is too large");
      }
      if (d.integer < 0) {
        return error("negative dimension " + std::to_string(d.integer) + " in 'shape' " + shown(shape->source));
      }
      reader.shape_.push_back(d.integer);
    }
    const size_t item = wire::dtype_size(reader.dtype_);
    if (!checked_numel(reader.shape_, item, &reader.numel_)) {
      return error("'shape' " + shown(shape->source) + " is too large (" + wire::dtype_name(reader.dtype_) +
                   " data over 2^63-1 bytes)");
    }
    reader.data_bytes_ = reader.numel_ * item;
    if (reader.fortran_order_) {
      const auto non_trivial =
          std::count_if(reader.shape_.begin(), reader.shape_.end(), [](int64_t d) { return d > 1; });
      if (non_trivial > 1) {
        return error("fortran_order=True (column-major data) is not supported for shape " + shape_text(reader.shape_) +
                     "; save it in C order");
      }
    }
    const uint64_t data_offset = header_start + header_len;
    const uint64_t expected = data_offset + reader.data_bytes_;
    if (file_size != expected) {
      return error("file size mismatch: the header says " + std::to_string(reader.data_bytes_) + " data bytes (" +
                   wire::dtype_name(reader.dtype_) + ", shape " + shape_text(reader.shape_) + ") after a " +
                   std::to_string(data_offset) + "-byte header, i.e. " + std::to_string(expected) +
                   " bytes, but the file has " + std::to_string(file_size) +
                   (file_size < expected ? " (truncated)" : " (trailing bytes)"));
    }
    reader.major_ = major;
    reader.data_offset_ = data_offset;
    return reader;
  } catch (const std::exception& e) {
    return Status::error(path + ": cannot read: " + e.what());
  } catch (...) {
    return Status::error(path + ": cannot read: unknown error");
  }
}

StatusOr<size_t> NpyReader::read(void* dst, size_t bytes) {
  if (fd_ < 0) return Status::error(path_ + ": reader is not open");
  const uint64_t left = data_bytes_ - consumed_;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, left));
  if (n == 0) return size_t{0};
  if (dst == nullptr) return Status::error(path_ + ": read into a null buffer");
  const uint64_t offset = data_offset_ + consumed_;
  auto read = pread_full(fd_, dst, n, offset, path_);
  if (!read) return read.status();
  const size_t got = *read;
  if (got != n) {
    return Status::error(path_ + ": unexpected end of file at byte " + std::to_string(offset + got) +
                         " (the file became shorter since it was opened)");
  }
  consumed_ += n;
  return n;
}

}  // namespace tensorscope::recording
