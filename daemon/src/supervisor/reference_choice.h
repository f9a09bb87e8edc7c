// reference_choice.h — which run a training process is compared with (config `reference`,
// worker/divergence_watch.h): the one its client names (Client(reference=...)), else the
// daemon's reference.session; as a folder the workers read.
//
// A name is a folder (absolute, or relative to the daemon's working directory; the client
// makes its own absolute) or a session name under output_dir. A folder that is not there
// yet is taken (a reference started at the same time), with a note; this session itself
// is refused. The note goes to the log and to the client, which logs it.
//
// Used by the supervisor at each registration. Thread safety: reentrant (reads the
// working directory and the file system).
#pragma once

#include <string>

namespace tensorscope::daemon {

struct ReferenceChoice {
  std::string dir;   // "" : not compared
  std::string note;  // why not, or what to know ("" : nothing)
};

ReferenceChoice choose_reference(const std::string& from_client, const std::string& configured,
                                 const std::string& output_dir, const std::string& session_dir);

}  // namespace tensorscope::daemon
