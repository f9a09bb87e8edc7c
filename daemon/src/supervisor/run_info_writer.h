// run_info_writer.h — <output>/<session>/run_info/rank<r>_pid<pid>.json (and .patch):
// what each training process that registered was running.
//
// Used by the supervisor of tensorscoped: after a successful registration it calls
// record_run_info() with the `run_info` object of the client's `hello`. That object is
// untrusted: sanitize_run_info() keeps only known keys with the right types and cuts
// every string and list to a bound. The daemon adds what it knows itself (producer id,
// pid from SO_PEERCRED, rank from the segment header, registration time, its own
// tensorscope and OpenCV versions).
//
// Git: in the client's working directory (else its executable's directory), when that
// directory is owned by our uid, `git rev-parse`, `git status --porcelain` and
// `git diff HEAD --binary` give the commit, branch, dirty state and the uncommitted diff
// (saved as rank<r>_pid<pid>.patch, at most 32 MiB, truncation noted). Each git command
// runs with a 5 s timeout (its process group is killed after it), no terminal prompt,
// no optional locks, no fsmonitor, no external diff or textconv. None of it runs in the
// supervisor: record_run_info() forks a short-lived helper process (the supervisor is
// single-threaded, so the fork is safe) which writes the JSON at once with
// "git": {"pending": true}, runs git (helpers take turns on a lock file), then rewrites
// the JSON with the git facts. Files are replaced atomically (temporary name, fsync,
// rename), mode 0600 in a 0700 directory: command lines and diffs can hold secrets.
// Every failure is logged and written into the JSON; none reaches the supervisor.
// Thread safety: sanitize_run_info, build_run_info, probe_git and write_run_info_files
// are reentrant; record_run_info keeps process-wide helper bookkeeping and is called
// from one thread (the supervisor's event loop).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorscope/base/status.h"
#include "tensorscope/shared/output_dir.h"  // kRunInfoDirName, run_info_base_name

namespace tensorscope::daemon {

// Bounds applied to a client's run_info.
inline constexpr std::size_t kRunInfoMaxArgvBytes = std::size_t{64} << 10;  // all arguments
inline constexpr std::size_t kRunInfoMaxArgs = 4096;
inline constexpr std::size_t kRunInfoMaxPathBytes = 4096;
inline constexpr std::size_t kRunInfoMaxHostnameBytes = 255;
inline constexpr std::size_t kRunInfoMaxEnvEntries = 128;
inline constexpr std::size_t kRunInfoMaxEnvValueBytes = 4096;
inline constexpr std::size_t kRunInfoMaxVersions = 16;
inline constexpr std::size_t kRunInfoMaxVersionBytes = 256;
inline constexpr std::size_t kRunInfoMaxNotes = 32;

// What the supervisor vouches for.
struct RunInfoProducer {
  uint64_t producer_id = 0;
  long pid = 0;  // the peer's pid (SO_PEERCRED)
  int rank = 0;  // from the producer's segment header
  std::string session;
};

struct GitOptions {
  int timeout_ms = 5000;                                // per git command
  std::size_t max_patch_bytes = std::size_t{32} << 20;  // the diff is cut here
  std::string git = "git";                              // looked up in PATH unless it has a '/'
};

struct GitProbe {
  // null: no repository in any candidate directory; {"error": ...}: git could not say;
  // else {"dir", "toplevel", "commit" (null before the first commit), "branch" (null
  // when detached), "detached", "dirty", "changed_files", "untracked_files",
  // "patch_bytes", "patch_truncated"}.
  nlohmann::json info;
  std::string patch;  // `git diff HEAD --binary` output (maybe truncated)
  std::vector<std::string> notes;
};

// A client's run_info with only the known keys of the right types, every string and list
// bounded: argv (strings), argv_truncated, executable, cwd, hostname, pid, rank,
// collected_unix_ms, env (NAME -> string), versions (name -> string). What was dropped or
// cut is described in *notes. Never throws.
nlohmann::json sanitize_run_info(const nlohmann::json& untrusted, std::vector<std::string>* notes);

// The run_info document without git facts: the sanitized client facts (its pid and rank
// only where they differ from the producer's, as client_pid / client_rank), the producer,
// registration time, "daemon" (pid, hostname, tensorscope and OpenCV versions), "notes".
nlohmann::json build_run_info(const nlohmann::json& untrusted, const RunInfoProducer& producer);

// Directories to look for the training program's repository in: the client's cwd, then
// the directory of its executable (absolute paths only).
std::vector<std::string> git_candidate_dirs(const nlohmann::json& run_info);

// Runs git (blocking: up to 5 commands, each bounded by options.timeout_ms) in the first
// candidate directory that is owned by our uid and inside a git work tree. Never throws.
GitProbe probe_git(const std::vector<std::string>& dirs, const GitOptions& options = {});

// Atomically writes <session_dir>/run_info/<base>.json (mode 0600; the directory is made
// 0700 when missing). With `git`: doc["git"] = git->info, its notes are appended, and a
// non-empty patch is written first as <base>.patch and named in doc["git"]["patch"] (a
// stale patch of an earlier registration is removed when the diff is now empty).
Status write_run_info_files(const std::string& session_dir, const std::string& base, nlohmann::json doc,
                            const GitProbe* git);

// Called by the supervisor after a registration: builds the document and forks a helper
// that writes it, runs git and rewrites it. Returns the helper's pid, or -1 when the work
// was done inline without git (fork failed, too many helpers running). The caller need not
// wait for the helper (the supervisor's reaper collects it). Logs failures; never throws.
pid_t record_run_info(const std::string& session_dir, const nlohmann::json& untrusted, const RunInfoProducer& producer,
                      const GitOptions& options = {}) noexcept;

}  // namespace tensorscope::daemon
