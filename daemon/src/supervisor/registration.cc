// registration.cc — see registration.h.
#include "supervisor/registration.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "tensorscope/base/posix_file.h"
#include "tensorscope/base/text_input.h"
#include "tensorscope/shared/control_protocol.h"
#include "tensorscope/shared/runtime_paths.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope::daemon {
namespace {

constexpr const char* kSameVersion = ": use the same tensorscope version in the client and the daemon";

Status check_versions(const nlohmann::json& m) {
  if (!m.contains("abi") || !m["abi"].is_number_unsigned()) return Status::error("registration without an ABI version");
  const uint64_t abi = m["abi"].get<uint64_t>();
  if (abi != wire::kAbiVersion) {
    return Status::error("client speaks wire ABI version " + std::to_string(abi) + " but this daemon speaks version " +
                         std::to_string(wire::kAbiVersion) + kSameVersion);
  }
  const auto protocol = m.find(control::kProtocol);
  if (protocol == m.end() || !protocol->is_number_integer() ||
      protocol->get<int64_t>() != control::kControlProtocolVersion) {
    return Status::error("client speaks control protocol version " +
                         (protocol == m.end()         ? std::string("(none)")
                              : protocol->is_number() ? protocol->dump()
                                                      : quote_for_message(protocol->dump())) +
                         " but this daemon speaks version " + std::to_string(control::kControlProtocolVersion) +
                         kSameVersion);
  }
  return Status::ok();
}

}  // namespace

StatusOr<AcceptedRegistration> check_registration(const nlohmann::json& m, const PeerCredentials& peer,
                                                  const std::string& session, const std::string& runtime_dir) {
  if (Status versions = check_versions(m); !versions) return versions;
  const auto requested_session = m.value("session", std::string());
  if (requested_session != session)
    return Status::error("registration for session " + quote_for_message(requested_session));
  const auto segment_name = m.value("segment", std::string());
  if (!is_segment_file_name(segment_name, session)) {
    return Status::error("bad segment name " + quote_for_message(segment_name));
  }
  const std::string expected_prefix = session + "." + std::to_string(peer.pid) + ".";
  if (segment_name.rfind(expected_prefix, 0) != 0) {
    return Status::error("segment '" + segment_name + "' does not belong to the connecting pid " +
                         std::to_string(peer.pid));
  }
  AcceptedRegistration accepted;
  accepted.segment_path = runtime_dir + "/" + segment_name;
  accepted.segment_fd = ::open(accepted.segment_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (accepted.segment_fd < 0) {
    return Status::error("cannot open segment " + accepted.segment_path + ": " + errno_text(errno));
  }
  auto segment = SharedSegment::open_descriptor(accepted.segment_fd, accepted.segment_path);
  if (!segment || (*segment)->header()->producer_pid != peer.pid) {
    ::close(accepted.segment_fd);
    if (!segment) return segment.status();
    return Status::error("segment header names pid " + std::to_string((*segment)->header()->producer_pid) +
                         ", the peer is pid " + std::to_string(peer.pid));
  }
  accepted.segment = std::move(*segment);
  return accepted;
}

nlohmann::json registered_reply(uint64_t producer_id, bool cuda_ipc, const std::string& cuda_note,
                                const ReferenceChoice& reference) {
  // Whether the workers can read CUDA IPC payloads; when not, the client copies CUDA
  // tensors through pinned host memory and the ring instead (and says so in stats()).
  return {{control::kType, control::kRegistered},
          {control::kProducerId, producer_id},
          {"cuda_ipc", cuda_ipc},
          {"module_tree", true},
          {"summaries", true},
          {"cuda_note", cuda_note},
          {"reference", reference.dir},
          {"reference_note", reference.note}};
}

}  // namespace tensorscope::daemon
