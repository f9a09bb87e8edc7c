// web_assets.h — the page's files, built into the binary (view/web, embedded at build
// time by embed_assets.cmake): no CDN, no download at run time; works offline and
// through `ssh -L`.
// Used by the view server. Thread safety: immutable after first use.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace tensorscope::view {

struct WebAsset {
  std::string_view path;  // "/index.html", "/main.js", ...
  const char* data;
  size_t size;
};

const std::vector<WebAsset>& web_assets();

}  // namespace tensorscope::view
