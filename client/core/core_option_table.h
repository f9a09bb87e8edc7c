// core_option_table.h — the visitor over every option of a client (the list in
// tensorscope/client_option_list.h), and the check both clients make with it.
//
// Used by ClientCore (an option out of bounds: every push is refused, and stats() says
// which), by the Python extension (Core(options) reads the dict through this table and
// raises ValueError/TypeError with the same words before any client exists). A visitor
// has option(name, field, rule) overloads for the rules of option_rules: Text (a
// std::string), Integer (a template over the field's integer type), Number (a double),
// Flag (a bool) and Rank (a std::optional<int>). Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "client_core.h"
#include "tensorscope/client_option_list.h"

namespace tensorscope {

// Calls v.option(name, o.<field>, rule) for every option, in the list's order. `O`:
// CoreOptions, or const CoreOptions for a visitor that only reads.
template <typename V, typename O>
void visit_core_options(V& v, O& o) {
  using namespace option_rules;
#define TENSORSCOPE_VISIT_OPTION(Type, name, default_value, rule) v.option(#name, o.name, rule);
  TENSORSCOPE_CLIENT_OPTIONS(TENSORSCOPE_VISIT_OPTION)
#undef TENSORSCOPE_VISIT_OPTION
}

// "" when every option is within its bounds, else the first problem, worded as the
// Python package words it: "every_n must be at least 1, not 0", "ring_slots must be
// between 1 and 1048576, not 0", "session ...", "runtime_dir contains a NUL character".
std::string core_options_problem(const CoreOptions& options);

// "must be at least 1" / "must be between 1 and 1048576": the words of an integer's bounds.
std::string integer_bounds(const option_rules::Integer& rule);

}  // namespace tensorscope
