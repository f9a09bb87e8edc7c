#include "tensorscope/shared/status_query.h"

#include "tensorscope/shared/control_protocol.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/runtime_paths.h"

namespace tensorscope {

StatusOr<nlohmann::json> query_daemon_status(const std::string& runtime_dir, const std::string& session,
                                             int timeout_ms) {
  const std::string path = session_socket_path(default_runtime_dir(runtime_dir), session);
  auto fd = connect_unix(path);
  if (!fd) return Status::error("no daemon runs for session '" + session + "' (" + fd.message() + ")");
  MessageChannel channel(*fd);
  Status sent = channel.send({{control::kType, control::kStatus}});
  auto reply = sent ? channel.receive(timeout_ms) : StatusOr<nlohmann::json>(sent);
  if (!reply || control::message_type(*reply) != control::kStatus) {
    return Status::error(
        "the daemon for session '" + session + "' did not answer: " +
        (reply ? reply->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : reply.message()));
  }
  return std::move(*reply);
}

}  // namespace tensorscope
