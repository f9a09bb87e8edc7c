// byte_fields.h — internal: a fixed-size field written into or read from a byte buffer at
// an offset, in the machine's (little-endian) byte order, whatever the alignment; what the
// record payload formats (summary_format.cc, row_labels_format.cc) are built from.
// Callers check the bounds. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace tensorscope::internal {

template <typename T>
void put_field(std::string& out, size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T get_field(std::string_view in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

}  // namespace tensorscope::internal
