// run_info_writer: untrusted run_info is bounded, git facts of a real repository (commit,
// branch, dirty, a patch that applies to a fresh clone), non-repositories, foreign
// directories, a git that hangs, and the helper process that writes the files.
#include "supervisor/run_info_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace tensorscope::daemon {
namespace {

using nlohmann::json;

int shell(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string shell_output(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A repository with one commit on branch "main", then uncommitted work: a changed text
// file, a changed binary file, a staged new file and an untracked file.
std::string make_dirty_repo(const std::string& root) {
  const std::string repo = root + "/repo";
  const std::string git = "git -C " + repo + " -c user.name=t -c user.email=t@example.invalid ";
  EXPECT_EQ(shell("mkdir -p " + repo + "/sub && git -C " + repo + " init -q -b main"), 0);
  EXPECT_EQ(shell("printf 'line 1\\nline 2\\n' > " + repo + "/train.py && printf '\\000\\001\\002' > " + repo +
                  "/blob.bin && " + git + "add -A && " + git + "commit -q -m first"),
            0);
  EXPECT_EQ(shell("printf 'line 1\\nline 2 changed\\n' > " + repo + "/train.py && printf '\\000\\377\\002\\003' > " +
                  repo + "/blob.bin && printf 'new\\n' > " + repo + "/sub/new.py && " + git + "add sub/new.py && " +
                  "printf 'x\\n' > " + repo + "/untracked.txt"),
            0);
  return repo;
}

TEST(RunInfoWriter, DirtyRepositoryGivesCommitBranchAndAPatchThatApplies) {
  testing::TempDir tmp("ts-runinfo");
  const std::string repo = make_dirty_repo(tmp.path());
  const std::string head = shell_output("git -C " + repo + " rev-parse HEAD");
  ASSERT_EQ(head.size(), 40u);

  // From a subdirectory of the work tree: the patch is still relative to the top.
  GitProbe git = probe_git({repo + "/sub"});
  ASSERT_TRUE(git.info.is_object()) << git.info.dump();
  EXPECT_EQ(git.info.value("commit", ""), head);
  EXPECT_EQ(git.info.value("branch", ""), "main");
  EXPECT_EQ(git.info.value("dirty", false), true);
  EXPECT_EQ(git.info.value("detached", true), false);
  EXPECT_EQ(git.info.value("changed_files", 0), 3);
  EXPECT_EQ(git.info.value("untracked_files", 0), 1);
  EXPECT_EQ(git.info.value("toplevel", ""), repo);
  EXPECT_EQ(git.info.value("patch_truncated", true), false);
  ASSERT_FALSE(git.patch.empty());
  EXPECT_NE(git.patch.find("GIT binary patch"), std::string::npos);

  const std::string session_dir = tmp.path() + "/session";
  ASSERT_EQ(::mkdir(session_dir.c_str(), 0700), 0);
  json doc = build_run_info(json{{"cwd", repo + "/sub"}}, RunInfoProducer{7, 4242, 3, "s"});
  ASSERT_TRUE(write_run_info_files(session_dir, run_info_base_name(3, 4242), doc, &git).is_ok());
  const std::string json_path = session_dir + "/run_info/rank3_pid4242.json";
  const std::string patch_path = session_dir + "/run_info/rank3_pid4242.patch";
  const json written = json::parse(read_file(json_path));
  EXPECT_EQ(written["git"]["patch"], "rank3_pid4242.patch");
  EXPECT_EQ(written["git"]["commit"], head);
  EXPECT_EQ(written["rank"], 3);
  EXPECT_EQ(written["pid"], 4242);
  EXPECT_EQ(read_file(patch_path), git.patch);
  struct stat st {};
  ASSERT_EQ(::stat(json_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(patch_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // The patch turns a fresh clone of the commit into the dirty tree (tracked files).
  const std::string clone = tmp.path() + "/clone";
  ASSERT_EQ(shell("git clone -q " + repo + " " + clone), 0);
  EXPECT_EQ(shell("git -C " + clone + " apply --check " + patch_path), 0);
  ASSERT_EQ(shell("git -C " + clone + " apply " + patch_path), 0);
  EXPECT_EQ(shell("cmp -s " + clone + "/blob.bin " + repo + "/blob.bin"), 0);
  EXPECT_EQ(shell("cmp -s " + clone + "/train.py " + repo + "/train.py"), 0);
  EXPECT_EQ(shell("cmp -s " + clone + "/sub/new.py " + repo + "/sub/new.py"), 0);

  // A later registration with a clean tree removes the stale patch.
  GitProbe clean = git;
  clean.patch.clear();
  ASSERT_TRUE(write_run_info_files(session_dir, run_info_base_name(3, 4242), doc, &clean).is_ok());
  EXPECT_NE(::access(patch_path.c_str(), F_OK), 0);
}

TEST(RunInfoWriter, CleanRepositoryDetachedHeadAndNoCommits) {
  testing::TempDir tmp("ts-runinfo");
  const std::string repo = make_dirty_repo(tmp.path());
  ASSERT_EQ(shell("git -C " + repo + " -c user.name=t -c user.email=t@example.invalid commit -qam second && rm " +
                  repo + "/untracked.txt && git -C " + repo + " checkout -q --detach"),
            0);
  GitProbe git = probe_git({repo});
  ASSERT_TRUE(git.info.is_object()) << git.info.dump();
  EXPECT_EQ(git.info.value("dirty", true), false);
  EXPECT_TRUE(git.info["branch"].is_null());
  EXPECT_EQ(git.info.value("detached", false), true);
  EXPECT_TRUE(git.patch.empty());

  const std::string empty_repo = tmp.path() + "/empty";
  ASSERT_EQ(shell("git init -q " + empty_repo + " && touch " + empty_repo + "/a"), 0);
  GitProbe fresh = probe_git({empty_repo});
  ASSERT_TRUE(fresh.info.is_object()) << fresh.info.dump();
  EXPECT_TRUE(fresh.info["commit"].is_null());
  EXPECT_EQ(fresh.info.value("dirty", false), true);
  EXPECT_TRUE(fresh.patch.empty());
}

TEST(RunInfoWriter, NonRepositoryMissingAndForeignDirectoriesGiveNoGit) {
  testing::TempDir tmp("ts-runinfo");
  GitProbe none = probe_git({tmp.path(), tmp.path() + "/missing", "relative/dir"});
  EXPECT_TRUE(none.info.is_null()) << none.info.dump();
  EXPECT_EQ(none.notes.size(), 3u);

  // A repository owned by another uid is not looked at.
  const std::string repo = make_dirty_repo(tmp.path());
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(repo.c_str(), 65534, 65534), 0);
  }
  const std::string foreign = ::geteuid() == 0 ? repo : "/";  // "/" is root's
  GitProbe refused = probe_git({foreign});
  EXPECT_TRUE(refused.info.is_null()) << refused.info.dump();
  ASSERT_EQ(refused.notes.size(), 1u);
  EXPECT_NE(refused.notes[0].find("not owned"), std::string::npos) << refused.notes[0];
}

TEST(RunInfoWriter, MissingOrHangingGitIsAnErrorNotAHang) {
  testing::TempDir tmp("ts-runinfo");
  GitOptions missing;
  missing.git = tmp.path() + "/no-such-git";
  GitProbe a = probe_git({tmp.path()}, missing);
  ASSERT_TRUE(a.info.is_object());
  EXPECT_NE(a.info.value("error", "").find("cannot run"), std::string::npos) << a.info.dump();

  const std::string script = tmp.path() + "/slow-git";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nsleep 30 &\nsleep 30\n";  // a grandchild too: the group is killed
  }
  ASSERT_EQ(::chmod(script.c_str(), 0700), 0);
  GitOptions slow;
  slow.git = script;
  slow.timeout_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  GitProbe b = probe_git({tmp.path()}, slow);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(b.info.is_object());
  EXPECT_NE(b.info.value("error", "").find("no answer"), std::string::npos) << b.info.dump();
  EXPECT_LT(seconds, 5.0);
}

TEST(RunInfoWriter, LargeDiffIsCutAndSaysSo) {
  testing::TempDir tmp("ts-runinfo");
  const std::string repo = make_dirty_repo(tmp.path());
  ASSERT_EQ(shell("head -c 200000 /dev/zero | tr '\\0' 'x' > " + repo + "/train.py"), 0);
  GitOptions small;
  small.max_patch_bytes = 4096;
  GitProbe git = probe_git({repo}, small);
  ASSERT_TRUE(git.info.is_object()) << git.info.dump();
  EXPECT_EQ(git.info.value("patch_truncated", false), true);
  EXPECT_EQ(git.patch.size(), 4096u);
  EXPECT_FALSE(git.notes.empty());
}

TEST(RunInfoWriter, HostileRunInfoIsTypedAndBounded) {
  json hostile = {
      {"argv", json::array({"ok", 5, json::object(), std::string(100000, 'a')})},
      {"argv_truncated", "yes"},
      {"executable", 12},
      {"cwd", std::string(1 << 20, '/')},
      {"hostname", json::array()},
      {"pid", "123"},
      {"rank", 1.5},
      {"env", {{"RANK", "3"}, {"BAD NAME", "x"}, {"NUM", 4}, {"LONG", std::string(1 << 20, 'v')}}},
      {"versions", "1.0"},
      {"secret_payload", std::string(1 << 20, 's')},
      {"nested", {{"a", {{"b", {{"c", 1}}}}}}},
  };
  for (int i = 0; i < 1000; ++i) hostile["env"]["VAR_" + std::to_string(i)] = "v";
  std::vector<std::string> notes;
  const json clean = sanitize_run_info(hostile, &notes);
  EXPECT_EQ(clean["argv"].size(), 2u);  // "ok" and the long one, cut
  EXPECT_EQ(clean["argv"][0], "ok");
  EXPECT_LE(clean["argv"][1].get<std::string>().size(), kRunInfoMaxArgvBytes);
  EXPECT_EQ(clean["argv_truncated"], true);
  EXPECT_FALSE(clean.contains("executable"));
  EXPECT_EQ(clean["cwd"].get<std::string>().size(), kRunInfoMaxPathBytes);
  EXPECT_FALSE(clean.contains("hostname"));
  EXPECT_FALSE(clean.contains("pid"));
  EXPECT_FALSE(clean.contains("rank"));
  EXPECT_FALSE(clean.contains("versions"));
  EXPECT_FALSE(clean.contains("secret_payload"));
  EXPECT_FALSE(clean.contains("nested"));
  EXPECT_EQ(clean["env"]["RANK"], "3");
  EXPECT_FALSE(clean["env"].contains("BAD NAME"));
  EXPECT_FALSE(clean["env"].contains("NUM"));
  EXPECT_LE(clean["env"].size(), kRunInfoMaxEnvEntries);
  EXPECT_LE(clean["env"]["LONG"].get<std::string>().size(), kRunInfoMaxEnvValueBytes);
  EXPECT_LE(notes.size(), kRunInfoMaxNotes + 1);
  EXPECT_LT(clean.dump().size(), std::size_t{2} << 20);

  // Not an object at all, and absent.
  std::vector<std::string> more;
  EXPECT_TRUE(sanitize_run_info(json::array({1, 2}), &more).empty());
  EXPECT_TRUE(sanitize_run_info(json(), &more).empty());
  EXPECT_EQ(more.size(), 2u);

  // The document: the producer's pid and rank win; the client's differing claims are kept apart.
  const json doc = build_run_info(json{{"pid", 1}, {"rank", 9}, {"cwd", "/x"}, {"argv", {"train"}}},
                                  RunInfoProducer{5, 777, 2, "sess"});
  EXPECT_EQ(doc["pid"], 777);
  EXPECT_EQ(doc["rank"], 2);
  EXPECT_EQ(doc["client_pid"], 1);
  EXPECT_EQ(doc["client_rank"], 9);
  EXPECT_EQ(doc["producer_id"], 5);
  EXPECT_EQ(doc["session"], "sess");
  EXPECT_EQ(doc["cwd"], "/x");
  EXPECT_TRUE(doc["daemon"]["opencv"].is_string());
  EXPECT_FALSE(doc["daemon"]["opencv"].get<std::string>().empty());
  EXPECT_TRUE(doc["daemon"]["tensorscope"].is_string());
  EXPECT_NE(doc["daemon"]["tensorscope"], "unknown");
  EXPECT_TRUE(doc["registered_at"].is_string());
  EXPECT_EQ(git_candidate_dirs(json{{"cwd", "/a/b"}, {"executable", "/c/d/exe"}}),
            (std::vector<std::string>{"/a/b", "/c/d"}));
  EXPECT_TRUE(git_candidate_dirs(json{{"cwd", "rel"}, {"executable", 3}}).empty());
}

TEST(RunInfoWriter, HelperProcessWritesTheFinalDocument) {
  testing::TempDir tmp("ts-runinfo");
  const std::string repo = make_dirty_repo(tmp.path());
  const std::string session_dir = tmp.path() + "/session";
  ASSERT_EQ(::mkdir(session_dir.c_str(), 0700), 0);
  const pid_t helper = record_run_info(session_dir, json{{"cwd", repo}, {"argv", {"train", "--lr", "0.1"}}},
                                       RunInfoProducer{1, 99, 0, "s"});
  ASSERT_GT(helper, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(helper, &status, 0), helper);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const json doc = json::parse(read_file(session_dir + "/run_info/rank0_pid99.json"));
  EXPECT_EQ(doc["argv"], json({"train", "--lr", "0.1"}));
  ASSERT_TRUE(doc["git"].is_object()) << doc.dump();
  EXPECT_EQ(doc["git"]["dirty"], true);
  EXPECT_EQ(doc["git"]["patch"], "rank0_pid99.patch");
  struct stat st {};
  ASSERT_EQ(::stat((session_dir + "/run_info").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace tensorscope::daemon
