// request_guard.h — the view server's checks on every request: the start's token, the
// Host header (against DNS rebinding), the Origin of a WebSocket upgrade, and the parsing
// of request targets (path and query, percent-decoded, bounded).
//
// Used by the view server's HTTP sessions. Pure functions of their arguments, except
// make_token (reads the kernel's random source). Thread safety: none needed.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::view {

// 32 hex digits from getrandom(2) (128 bits).
StatusOr<std::string> make_token();

// Compares in time independent of where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

struct Target {
  std::string path;                          // percent-decoded, starts with '/'
  std::map<std::string, std::string> query;  // percent-decoded; a repeated key keeps the first
};

// Splits and decodes "/path?a=1&b=2". Errors: not starting with '/', bad percent
// escapes, a NUL byte, more than 32 query parameters, longer than 4096 bytes.
StatusOr<Target> parse_target(std::string_view target);

// The names a browser may use to reach a server bound to `bind_address`: the address
// itself, and for a loopback address also "localhost", "127.0.0.1" and "[::1]"; plus
// `extra` (names given with --allow-host).
std::vector<std::string> allowed_host_names(const std::string& bind_address, const std::vector<std::string>& extra);

// True when `host` (the Host header) is one of `names`, with ":<port>" or without it.
bool host_allowed(std::string_view host, const std::vector<std::string>& names, int port);

// True when `origin` (the Origin header of a WebSocket upgrade) is absent (a client that
// is not a browser) or "http://<one of names>[:port]".
bool origin_allowed(std::string_view origin, const std::vector<std::string>& names, int port);

}  // namespace tensorscope::view
