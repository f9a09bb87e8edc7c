// status.cc — see tensorscope/base/status.h.
#include "tensorscope/base/status.h"

#include "tensorscope/base/posix_file.h"

namespace tensorscope {

Status Status::from_errno(const std::string& what, int err) { return Status::error(what + ": " + errno_text(err)); }

}  // namespace tensorscope
