#include "tensorscope/shared/runtime_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensorscope/base/posix_path.h"

namespace tensorscope {

std::string default_runtime_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("TENSORSCOPE_RUNTIME_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  const std::string base = (::access("/dev/shm", W_OK) == 0) ? "/dev/shm" : "/tmp";
  return automatic_runtime_dir(base, std::getenv("XDG_RUNTIME_DIR"));
}

std::string automatic_runtime_dir(const std::string& shared_base, const char* xdg_runtime_dir) {
  const std::string shared = shared_base + "/tensorscope-" + std::to_string(::geteuid());
  struct stat st {};
  if (::lstat(shared.c_str(), &st) != 0) return shared;  // free: ours to make
  if (S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) return shared;
  // Taken by someone else: the per-user runtime directory, when there is one of ours.
  if (xdg_runtime_dir == nullptr || xdg_runtime_dir[0] != '/') return shared;
  struct stat xdg {};
  if (::lstat(xdg_runtime_dir, &xdg) != 0 || !S_ISDIR(xdg.st_mode) || xdg.st_uid != ::geteuid() ||
      (xdg.st_mode & 077) != 0) {
    return shared;
  }
  return std::string(xdg_runtime_dir) + "/tensorscope";
}

Status ensure_private_dir(const std::string& path) {
  if (path.empty()) return Status::error("runtime directory path is empty");
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    // Parents get default permissions; the directory itself is 0700.
    (void)make_directories(path.substr(0, slash));
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::from_errno("cannot create runtime directory " + path, errno);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return Status::from_errno("cannot stat runtime directory " + path, errno);
  }
  // Someone else's name in a shared directory: say how to go on without it.
  const std::string elsewhere = " (set TENSORSCOPE_RUNTIME_DIR, or XDG_RUNTIME_DIR, to a directory of yours)";
  if (!S_ISDIR(st.st_mode)) {
    return Status::error("runtime directory " + path + " is not a directory (or is a symlink)" + elsewhere);
  }
  if (st.st_uid != ::geteuid()) {
    return Status::error("runtime directory " + path + " is owned by uid " + std::to_string(st.st_uid) +
                         ", not by us (uid " + std::to_string(::geteuid()) + ")" + elsewhere);
  }
  if ((st.st_mode & 077) != 0) {
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 0777));
    return Status::error("runtime directory " + path + " has mode " + mode +
                         "; it must be 0700 (chmod 700 it or remove it)");
  }
  return Status::ok();
}

std::string session_socket_path(const std::string& runtime_dir, const std::string& session) {
  return runtime_dir + "/" + session + ".sock";
}

std::string segment_file_name(const std::string& session, long pid, unsigned generation) {
  return session + "." + std::to_string(pid) + "." + std::to_string(generation) + ".seg";
}

std::string segment_file_path(const std::string& runtime_dir, const std::string& session, long pid,
                              unsigned generation) {
  return runtime_dir + "/" + segment_file_name(session, pid, generation);
}

std::string session_lock_path(const std::string& runtime_dir, const std::string& session) {
  return runtime_dir + "/" + session + ".lock";
}

std::string autostart_lock_path(const std::string& runtime_dir, const std::string& session) {
  return runtime_dir + "/" + session + ".autostart.lock";
}

long segment_file_pid(const std::string& file_name) {
  std::string name = file_name;
  const std::string creating = ".creating";
  if (name.size() > creating.size() + 1 && name[0] == '.' &&
      name.compare(name.size() - creating.size(), creating.size(), creating) == 0) {
    name = name.substr(1, name.size() - creating.size() - 1);
  }
  const std::string suffix = ".seg";
  if (name.find('/') != std::string::npos || name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return 0;
  }
  name.resize(name.size() - suffix.size());  // <session>.<pid>.<generation>
  const size_t gen_dot = name.rfind('.');
  if (gen_dot == std::string::npos || gen_dot == 0 || gen_dot + 1 == name.size()) return 0;
  const size_t pid_dot = name.rfind('.', gen_dot - 1);
  if (pid_dot == std::string::npos || pid_dot == 0 || pid_dot + 1 == gen_dot) return 0;
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  const std::string pid = name.substr(pid_dot + 1, gen_dot - pid_dot - 1);
  if (!digits(pid) || !digits(name.substr(gen_dot + 1))) return 0;
  const long value = std::stol(pid);
  return value <= 0x7fffffffL ? value : 0;
}

bool is_segment_file_name(const std::string& name, const std::string& session) {
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) return false;
  const std::string prefix = session + ".";
  const std::string suffix = ".seg";
  if (name.size() <= prefix.size() + suffix.size()) return false;
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  const std::string middle = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  // <pid>.<generation>
  const size_t dot = middle.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == middle.size()) return false;
  for (size_t i = 0; i < middle.size(); ++i) {
    if (i == dot) continue;
    if (middle[i] < '0' || middle[i] > '9') return false;
  }
  return true;
}

}  // namespace tensorscope
