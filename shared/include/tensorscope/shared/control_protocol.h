// control_protocol.h — the messages of the control protocol: their type names, the
// fields both sides read, and the protocol's version.
//
// Included by both ends of every control connection (see message_channel.h for the
// framing): the client (client/core/connection.cc) and the `tensorscope` tool talk to
// the supervisor over the session's Unix socket; the supervisor talks to its workers
// over a socket pair. A message is a JSON object whose "type" field names it. Changing
// a message's meaning or a field both sides rely on means bumping kControlProtocolVersion
// (the client sends it when it registers; the supervisor refuses another version).
// The data path (segments, rings, records) has its own version, wire::kAbiVersion.
//
// Client -> supervisor (one request per connection, one reply):
//   register  {abi, protocol, pid, rank, session, segment, segment_size, run_info?}
//             -> registered {producer_id, cuda_ipc, module_tree, cuda_note} and the
//                connection stays open for the producer's life; or error {message}
//   status    {} -> status {workers, producers, ...} (supervisor.cc status_json); or
//             error {message}
// Supervisor -> worker:
//   config    {config, worker_index, session_dir}   first, once
//   attach    {producer_id, rank} + the segment's descriptor (SCM_RIGHTS)
//   detach    {producer_id}          the producer left: drain its ring, then detached
//   shutdown  {}                     finish every file and exit
// Worker -> supervisor:
//   heartbeat {stats}  file {entry}  attach_failed {producer_id, message}
//   detached {producer_id}  bye {}
// Thread safety: constants and a pure function.
//
// Design: docs/design/control_protocol.md (framing, versions, every field of every message).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tensorscope::control {

inline constexpr int kControlProtocolVersion = 1;

// Message types (the "type" field).
inline constexpr char kRegister[] = "register";
inline constexpr char kRegistered[] = "registered";
inline constexpr char kError[] = "error";
inline constexpr char kStatus[] = "status";
inline constexpr char kConfig[] = "config";
inline constexpr char kAttach[] = "attach";
inline constexpr char kDetach[] = "detach";
inline constexpr char kShutdown[] = "shutdown";
inline constexpr char kHeartbeat[] = "heartbeat";
inline constexpr char kFile[] = "file";
inline constexpr char kAnomaly[] = "anomaly";  // worker -> supervisor: {"anomaly": {...}}
inline constexpr char kAttachFailed[] = "attach_failed";
inline constexpr char kDetached[] = "detached";
inline constexpr char kBye[] = "bye";

// Fields more than one message carries.
inline constexpr char kType[] = "type";
inline constexpr char kMessage[] = "message";
inline constexpr char kProducerId[] = "producer_id";
inline constexpr char kProtocol[] = "protocol";

// The message's type: its "type" field when the message is an object and the field a
// string, otherwise "" (never throws).
inline std::string message_type(const nlohmann::json& message) {
  if (!message.is_object()) return std::string();
  const auto it = message.find(kType);
  return it != message.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// {"type": "error", "message": text}.
inline nlohmann::json error_message(const std::string& text) { return {{kType, kError}, {kMessage, text}}; }

}  // namespace tensorscope::control
