// reference_choice.cc — see reference_choice.h.
#include "supervisor/reference_choice.h"

#include <sys/stat.h>

#include "tensorscope/base/posix_path.h"
#include "tensorscope/shared/session_name.h"

namespace tensorscope::daemon {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

ReferenceChoice choose_reference(const std::string& from_client, const std::string& configured,
                                 const std::string& output_dir, const std::string& session_dir) {
  const std::string& name = from_client.empty() ? configured : from_client;
  if (name.empty()) return {};
  // A plain name is first a session beside this one, then a folder here.
  const bool session_name = name.find('/') == std::string::npos && static_cast<bool>(validate_session_name(name));
  std::string dir;
  if (session_name && (is_directory(output_dir + "/" + name) || !is_directory(name))) {
    dir = resolved_path(output_dir + "/" + name);
  } else {
    dir = resolved_path(name);
  }
  if (dir == resolved_path(session_dir)) {
    return {"", "the reference '" + name + "' is this session itself: nothing is compared"};
  }
  if (!is_directory(dir)) {
    return {dir, "the reference '" + name + "' (" + dir + ") is not there yet: its summaries are compared once it is"};
  }
  return {dir, ""};
}

}  // namespace tensorscope::daemon
