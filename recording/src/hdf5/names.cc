// names.cc — see names.h.
#include "hdf5/names.h"

#include <algorithm>

namespace tensorscope::recording::hdf5 {

std::string group_base_name(const std::string& stream) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const bool all_dots = std::all_of(stream.begin(), stream.end(), [](char c) { return c == '.'; });
  std::string out;
  out.reserve(stream.size());
  for (const char ch : stream) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '%' || c == '/' || c == '@' || c < 0x20 || c == 0x7f || (all_dots && c == '.')) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string partial_stem(const std::string& name) {
  const size_t suffix = sizeof(kPartialSuffix) - 1;
  if (name.size() < suffix + 2 || name[0] != '.' || name.compare(name.size() - suffix, suffix, kPartialSuffix) != 0) {
    return "";
  }
  return name.substr(1, name.size() - suffix - 1);
}

}  // namespace tensorscope::recording::hdf5
