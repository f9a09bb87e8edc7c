// run_info.h — what this training process is: command line, working directory, host,
// a few environment variables, versions. Sent once per registration (the "run_info"
// object of the `hello`), written by the daemon to <output>/<session>/run_info/.
//
// Used inside the training process, by ClientCore, once per client. Only the variables
// named in run_info_env_allow_list() are read from the environment: never the whole
// environment, which may hold secrets. Every string is bounded (argv in all at most
// kRunInfoMaxArgvBytes); the result is small (well under 100 KiB).
// Thread safety: collect_run_info() is reentrant (reads /proc and getenv only).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tensorscope {

inline constexpr std::size_t kRunInfoMaxArgvBytes = std::size_t{64} << 10;  // all arguments
inline constexpr std::size_t kRunInfoMaxArgs = 4096;
inline constexpr std::size_t kRunInfoMaxPathBytes = 4096;  // executable, cwd
inline constexpr std::size_t kRunInfoMaxEnvValueBytes = 4096;

// The environment variables that may appear in run_info (distributed-training ranks and
// rendezvous, device selection, thread counts, scheduler job ids).
const std::vector<std::string>& run_info_env_allow_list();

// {"argv": [...], "argv_truncated": bool, "executable": str, "cwd": str, "hostname": str,
//  "pid": int, "rank": int, "collected_unix_ms": int, "env": {NAME: value, ...},
//  "versions": {"tensorscope": str, "cuda_runtime": str (CUDA builds), and each string
//  of `framework_versions` ({"libtorch": ...} from the C++ client, {"python": ..., "torch":
//  ...} from the Python package)}}
// A fact that cannot be read is left out. Never throws.
nlohmann::json collect_run_info(int rank, const nlohmann::json& framework_versions = nlohmann::json::object()) noexcept;

// `text` cut to at most `max_bytes`, at a UTF-8 character boundary.
std::string bounded_utf8(const std::string& text, std::size_t max_bytes);

}  // namespace tensorscope
