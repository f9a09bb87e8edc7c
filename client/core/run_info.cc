// run_info.cc — see run_info.h.
#include "run_info.h"

#include "tensorscope/base/clock.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#ifdef TENSORSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#ifndef TENSORSCOPE_VERSION
#define TENSORSCOPE_VERSION "unknown"
#endif

namespace tensorscope {
namespace {

// Reads at most `max_bytes` of a /proc file; *truncated when there was more.
std::string read_proc_file(const char* path, std::size_t max_bytes, bool* truncated) {
  *truncated = false;
  std::string out;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    const std::size_t room = max_bytes - out.size();
    if (static_cast<std::size_t>(n) > room) {
      out.append(buffer, room);
      *truncated = true;
      break;
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

void collect_argv(nlohmann::json* info) {
  bool truncated = false;
  const std::string raw = read_proc_file("/proc/self/cmdline", kRunInfoMaxArgvBytes, &truncated);
  nlohmann::json argv = nlohmann::json::array();
  std::size_t start = 0;
  while (start < raw.size()) {
    if (argv.size() >= kRunInfoMaxArgs) {
      truncated = true;
      break;
    }
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();  // the last one, cut by the bound
    argv.push_back(bounded_utf8(raw.substr(start, end - start), kRunInfoMaxArgvBytes));
    start = end + 1;
  }
  (*info)["argv"] = std::move(argv);
  (*info)["argv_truncated"] = truncated;
}

void collect_paths(nlohmann::json* info) {
  char buffer[PATH_MAX + 1];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n > 0)
    (*info)["executable"] = bounded_utf8(std::string(buffer, static_cast<std::size_t>(n)), kRunInfoMaxPathBytes);
  if (::getcwd(buffer, sizeof(buffer)) != nullptr) {
    (*info)["cwd"] = bounded_utf8(buffer, kRunInfoMaxPathBytes);
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) (*info)["hostname"] = bounded_utf8(host, 255);
}

void collect_env(nlohmann::json* info) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& name : run_info_env_allow_list()) {
    const char* value = std::getenv(name.c_str());
    if (value != nullptr) env[name] = bounded_utf8(value, kRunInfoMaxEnvValueBytes);
  }
  (*info)["env"] = std::move(env);
}

void collect_versions(nlohmann::json* info, const nlohmann::json& framework_versions) {
  nlohmann::json versions = {{"tensorscope", TENSORSCOPE_VERSION}};
  if (framework_versions.is_object()) {
    for (const auto& [name, value] : framework_versions.items()) {
      if (value.is_string()) versions[name] = bounded_utf8(value.get<std::string>(), 128);
    }
  }
#ifdef TENSORSCOPE_WITH_CUDA
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess && runtime > 0) {
    versions["cuda_runtime"] = std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
  }
#endif
  (*info)["versions"] = std::move(versions);
}

}  // namespace

const std::vector<std::string>& run_info_env_allow_list() {
  static const std::vector<std::string> names = {
      // torchrun / torch.distributed
      "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "GROUP_WORLD_SIZE",
      "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
      "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
      // devices and threads
      "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "OMP_NUM_THREADS",
      "MKL_NUM_THREADS",
      // schedulers and MPI launchers
      "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_STEP_ID", "SLURM_PROCID",
      "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE"};
  return names;
}

std::string bounded_utf8(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

nlohmann::json collect_run_info(int rank, const nlohmann::json& framework_versions) noexcept {
  try {
    nlohmann::json info = nlohmann::json::object();
    info["pid"] = static_cast<long>(::getpid());
    info["rank"] = rank;
    info["collected_unix_ms"] = unix_time_ms();
    collect_argv(&info);
    collect_paths(&info);
    collect_env(&info);
    collect_versions(&info, framework_versions);
    return info;
  } catch (...) {  // allocation failure: registration goes on without it
    return nlohmann::json();
  }
}

}  // namespace tensorscope
