// named_enum.h — an enum and the names of its values from one list, so that a value
// without a name cannot be written: the list is an X-macro whose every entry is
// X(enumerator, "name"), and TENSORSCOPE_NAMED_ENUM makes of it
//   enum class Type : Underlying { the enumerators, numbered 0, 1, ... in list order };
//   inline constexpr std::array<std::string_view, N> names = { their names, by value };
// Used by every vocabulary of the wire, the client and the daemon's config (render
// modes, tensor kinds, push results, the config's enumerated keys). Thread safety:
// constants only.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#define TENSORSCOPE_NAMED_ENUM_VALUE(id, name) id,
#define TENSORSCOPE_NAMED_ENUM_NAME(id, name) std::string_view(name),

#define TENSORSCOPE_NAMED_ENUM(Type, Underlying, names, LIST)          \
  enum class Type : Underlying { LIST(TENSORSCOPE_NAMED_ENUM_VALUE) }; \
  inline constexpr std::array names = {LIST(TENSORSCOPE_NAMED_ENUM_NAME)}

namespace tensorscope {

// Whether names[from..] are each set and all distinct: a static_assert beside each
// TENSORSCOPE_NAMED_ENUM (an enum may leave a value before `from` unnamed, as the render
// modes' kDefault).
template <size_t N>
constexpr bool named_and_distinct(const std::array<std::string_view, N>& names, size_t from = 0) {
  for (size_t i = from; i < N; ++i) {
    if (names[i].empty()) return false;
    for (size_t j = from; j < i; ++j) {
      if (names[j] == names[i]) return false;
    }
  }
  return true;
}

}  // namespace tensorscope
