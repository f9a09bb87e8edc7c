#include "inherited_descriptors.h"

#include <unistd.h>

#include <algorithm>

namespace tensorscope::daemon {

void close_inherited_descriptors() {
  if (::close_range(3, ~0U, 0) == 0) return;
  const long max_fd = ::sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (max_fd > 0 ? std::min(max_fd, 65536L) : 1024L); ++fd) ::close(static_cast<int>(fd));
}

}  // namespace tensorscope::daemon
