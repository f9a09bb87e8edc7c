// collect_run_info: only allow-listed environment variables, bounded strings, the facts
// of this very process (argv, executable, cwd, pid), versions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

// client/src is private to the client library; this test reaches it by path.
#include "../../../client/core/run_info.h"

namespace tensorscope {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(RunInfo, OnlyAllowListedEnvironmentVariablesAreSent) {
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "do-not-leak-aws");
  ScopedEnv token("HF_TOKEN", "do-not-leak-hf");
  ScopedEnv password("DATABASE_PASSWORD", "do-not-leak-db");
  ScopedEnv rank("RANK", "3");
  ScopedEnv world("WORLD_SIZE", "8");
  ScopedEnv devices("CUDA_VISIBLE_DEVICES", "2,3");
  const nlohmann::json info = collect_run_info(3);
  ASSERT_TRUE(info.is_object());
  const nlohmann::json& env = info["env"];
  EXPECT_EQ(env.value("RANK", ""), "3");
  EXPECT_EQ(env.value("WORLD_SIZE", ""), "8");
  EXPECT_EQ(env.value("CUDA_VISIBLE_DEVICES", ""), "2,3");
  EXPECT_FALSE(env.contains("AWS_SECRET_ACCESS_KEY"));
  EXPECT_FALSE(env.contains("HF_TOKEN"));
  EXPECT_FALSE(env.contains("DATABASE_PASSWORD"));
  EXPECT_FALSE(env.contains("PATH"));
  EXPECT_FALSE(env.contains("HOME"));
  const std::string text = info.dump();
  EXPECT_EQ(text.find("do-not-leak"), std::string::npos) << text;
  for (const auto& [name, value] : env.items()) {
    const auto& allowed = run_info_env_allow_list();
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), name), allowed.end()) << name;
  }
}

TEST(RunInfo, DescribesThisProcess) {
  const nlohmann::json info = collect_run_info(5, {{"libtorch", "1.13.1"}, {"not_text", 3}});
  EXPECT_EQ(info.value("pid", 0L), static_cast<long>(::getpid()));
  EXPECT_EQ(info.value("rank", -1), 5);
  ASSERT_TRUE(info["argv"].is_array());
  ASSERT_FALSE(info["argv"].empty());
  EXPECT_NE(info["argv"][0].get<std::string>().find("client_unit_tests"), std::string::npos);
  EXPECT_EQ(info.value("argv_truncated", true), false);
  EXPECT_NE(info.value("executable", "").find("client_unit_tests"), std::string::npos);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(info.value("cwd", ""), cwd);
  EXPECT_FALSE(info.value("hostname", "").empty());
  EXPECT_GT(info.value("collected_unix_ms", int64_t{0}), int64_t{0});
  const nlohmann::json& versions = info["versions"];
  EXPECT_FALSE(versions.value("tensorscope", "").empty());
  EXPECT_NE(versions.value("tensorscope", ""), "unknown");
  EXPECT_EQ(versions.value("libtorch", ""), "1.13.1");  // the caller's framework versions
  EXPECT_FALSE(versions.contains("not_text"));
}

TEST(RunInfo, StringsAreBoundedAndCheap) {
  ScopedEnv nodelist("SLURM_JOB_NODELIST", std::string(100000, 'n'));
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json info;
  for (int i = 0; i < 20; ++i) info = collect_run_info(0);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
  EXPECT_EQ(info["env"]["SLURM_JOB_NODELIST"].get<std::string>().size(), kRunInfoMaxEnvValueBytes);
  EXPECT_LT(ms, 50.0);
  EXPECT_LT(info.dump().size(), kRunInfoMaxArgvBytes + 64 * kRunInfoMaxEnvValueBytes);

  // Cuts fall on UTF-8 character boundaries.
  EXPECT_EQ(bounded_utf8("ab\xC3\xA9", 3), "ab");
  EXPECT_EQ(bounded_utf8("ab\xC3\xA9", 4), "ab\xC3\xA9");
  EXPECT_EQ(bounded_utf8("abc", 0), "");
}

}  // namespace
}  // namespace tensorscope
