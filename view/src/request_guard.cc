#include "tensorscope/view/request_guard.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>

#include "tensorscope/base/posix_file.h"

namespace tensorscope::view {
namespace {

constexpr size_t kMaxTargetBytes = 4096;
constexpr size_t kMaxQueryParameters = 32;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<std::string> percent_decode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return Status::error("a '%' escape is cut short");
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return Status::error("a bad '%' escape");
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return Status::error("a NUL byte");
    out.push_back(c);
  }
  return out;
}

bool is_loopback(const std::string& address) {
  return address == "127.0.0.1" || address == "::1" || address == "localhost" || address.rfind("127.", 0) == 0;
}

}  // namespace

StatusOr<std::string> make_token() {
  uint8_t bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::error("cannot draw a random token: " + errno_text(errno));
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (uint8_t b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

StatusOr<Target> parse_target(std::string_view target) {
  if (target.size() > kMaxTargetBytes) return Status::error("the request target is too long");
  if (target.empty() || target[0] != '/') return Status::error("the request target is not a path");
  const size_t q = target.find('?');
  auto path = percent_decode(target.substr(0, q), false);
  if (!path) return Status::error("path: " + path.message());
  Target out;
  out.path = std::move(*path);
  if (q == std::string_view::npos) return out;
  std::string_view rest = target.substr(q + 1);
  size_t count = 0;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    if (++count > kMaxQueryParameters) return Status::error("too many query parameters");
    const size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
    if (!key || !value) return Status::error("query: " + (key ? value.message() : key.message()));
    out.query.emplace(std::move(*key), std::move(*value));
  }
  return out;
}

std::vector<std::string> allowed_host_names(const std::string& bind_address, const std::vector<std::string>& extra) {
  std::vector<std::string> names;
  auto add = [&names](std::string n) {
    if (!n.empty() && n.find(':') != std::string::npos && n.front() != '[') n = "[" + n + "]";  // IPv6
    for (const auto& have : names) {
      if (have == n) return;
    }
    if (!n.empty()) names.push_back(std::move(n));
  };
  add(bind_address);
  if (is_loopback(bind_address)) {
    add("127.0.0.1");
    add("localhost");
    add("::1");
  }
  for (const auto& e : extra) add(e);
  return names;
}

bool host_allowed(std::string_view host, const std::vector<std::string>& names, int port) {
  const std::string with_port = ":" + std::to_string(port);
  for (const auto& n : names) {
    if (host == n) return true;
    if (host.size() == n.size() + with_port.size() && host.substr(0, n.size()) == n &&
        host.substr(n.size()) == with_port) {
      return true;
    }
  }
  return false;
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& names, int port) {
  if (origin.empty()) return true;
  constexpr std::string_view kScheme = "http://";
  if (origin.substr(0, kScheme.size()) != kScheme) return false;
  return host_allowed(origin.substr(kScheme.size()), names, port);
}

}  // namespace tensorscope::view
