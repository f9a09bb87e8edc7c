// registration.h — the supervisor's side of a producer's registration handshake: the
// checks of its request (ABI and protocol versions, session, the segment's name, owner
// and pid), and the reply that accepts it.
//
// Used by the supervisor (supervisor.cc), on its own thread. Every refusal comes back as
// an error whose message the client is sent and logs (control_protocol.md, "Registration").
// Thread safety: pure functions but for the segment file they open.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "supervisor/reference_choice.h"
#include "tensorscope/base/status.h"
#include "tensorscope/shared/message_channel.h"
#include "tensorscope/shared/shared_segment.h"

namespace tensorscope::daemon {

// A registration whose checks passed: the producer's segment, opened and checked.
struct AcceptedRegistration {
  std::string segment_path;
  int segment_fd = -1;  // the caller's to close
  std::unique_ptr<SharedSegment> segment;
};

// Checks `request` (a "register" message) from a peer with `peer` credentials against
// this daemon's session and runtime directory, and opens the segment it names.
StatusOr<AcceptedRegistration> check_registration(const nlohmann::json& request, const PeerCredentials& peer,
                                                  const std::string& session, const std::string& runtime_dir);

// The "registered" reply: the producer's id and what this daemon reads (CUDA IPC payloads
// when `cuda_ipc`, with `cuda_note` saying why not; module trees; summaries), and the
// reference run its summaries are compared with (with a note the client logs).
nlohmann::json registered_reply(uint64_t producer_id, bool cuda_ipc, const std::string& cuda_note,
                                const ReferenceChoice& reference);

}  // namespace tensorscope::daemon
