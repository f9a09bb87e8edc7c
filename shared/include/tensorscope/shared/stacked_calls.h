// stacked_calls.h — the name of a stream that holds a module's calls of one step stacked
// into a calls x features matrix (the clients' TrackOptions::calls,
// tensorscope/call_stacking.h): "<stream>#calls", then what follows one call's stream
// ("[0]", ".grad"). The daemon draws such a matrix with its rows labelled as calls.
// Thread safety: constants and pure functions.
#pragma once

#include <string_view>

namespace tensorscope {

inline constexpr std::string_view kStackedCallsSuffix = "#calls";

// Whether `stream` is a module's stacked calls.
inline bool is_stacked_calls_stream(std::string_view stream) {
  return stream.find(kStackedCallsSuffix) != std::string_view::npos;
}

}  // namespace tensorscope
