// option_setter.h — TENSORSCOPE_OPTION_SETTER: one option of an options class with a
// chained setter and a getter, in the style of libtorch's options
// (`ClientOptions().session("s").every_n(10)`).
//
// Used by the public option classes (ClientOptions, TrackOptions). Thread safety: the
// classes it builds are value types.
#pragma once

#include <utility>

// Inside class `Class`: a private member `name_` of `Type`, initialized to
// `default_value`, a setter `Class& name(Type)` and a getter `const Type& name() const`.
#define TENSORSCOPE_OPTION_SETTER(Class, Type, name, default_value) \
 public:                                                            \
  Class& name(Type value) {                                         \
    name##_ = std::move(value);                                     \
    return *this;                                                   \
  }                                                                 \
  const Type& name() const { return name##_; }                      \
                                                                    \
 private:                                                           \
  Type name##_ = default_value;
