// index_writer_test.cc — index.json: add/replace, sorting, atomic rewrite, corrupt files,
// and validation of entries that arrive as JSON.
#include "supervisor/index_writer.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace tensorscope::daemon {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "ts_index_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const char* made = ::mkdtemp(buf.data());
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = made != nullptr ? made : "/nonexistent";
  }
  ~TempDir() {
    ::chmod(path_.c_str(), 0700);
    std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

IndexEntry entry(const std::string& path, int64_t frames = 10) {
  IndexEntry e;
  e.path = path;
  e.stream = "stream/" + path;
  e.device = "cuda0";
  e.kind = "video";
  e.mode = "histogram";
  e.rank = 1;
  e.pid = 4242;
  e.frames = frames;
  e.first_step = 100;
  e.last_step = 100 + frames;
  return e;
}

TEST(IndexWriterTest, AddWritesSortedFileAndReplacesByPath) {
  TempDir dir;
  IndexWriter w(dir.path());
  ASSERT_TRUE(w.load().is_ok());  // no file yet: fine
  EXPECT_TRUE(w.entries().empty());
  ASSERT_TRUE(w.add(entry("c.mp4")).is_ok());
  ASSERT_TRUE(w.add(entry("a.mp4")).is_ok());
  ASSERT_TRUE(w.add(entry("b.mp4")).is_ok());
  ASSERT_TRUE(w.add(entry("a.mp4", 99)).is_ok());  // replaces

  const nlohmann::json doc = nlohmann::json::parse(read_text(w.index_path()));
  ASSERT_TRUE(doc["files"].is_array());
  ASSERT_EQ(doc["files"].size(), 3u);
  EXPECT_EQ(doc["files"][0]["path"], "a.mp4");
  EXPECT_EQ(doc["files"][0]["frames"], 99);
  EXPECT_EQ(doc["files"][1]["path"], "b.mp4");
  EXPECT_EQ(doc["files"][2]["path"], "c.mp4");
  const nlohmann::json& f = doc["files"][1];
  EXPECT_EQ(f["stream"], "stream/b.mp4");
  EXPECT_EQ(f["kind"], "video");
  EXPECT_EQ(f["device"], "cuda0");
  EXPECT_EQ(f["rank"], 1);
  EXPECT_EQ(f["pid"], 4242);
  EXPECT_EQ(f["mode"], "histogram");
  EXPECT_EQ(f["first_step"], 100);
  EXPECT_EQ(f["last_step"], 110);
  EXPECT_EQ(f.size(), 10u);

  // A second writer (a restarted supervisor) picks the entries up again.
  IndexWriter again(dir.path());
  ASSERT_TRUE(again.load().is_ok());
  EXPECT_EQ(again.entries(), w.entries());
  ASSERT_EQ(again.entries().size(), 3u);
  EXPECT_EQ(again.entries()[0], entry("a.mp4", 99));
}

TEST(IndexWriterTest, RewriteIsAtomicAndLeavesNoTempFile) {
  TempDir dir;
  IndexWriter w(dir.path());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(w.add(entry("f" + std::to_string(i) + ".mp4")).is_ok());
    // After every rewrite the file on disk is complete, valid JSON.
    const nlohmann::json doc = nlohmann::json::parse(read_text(w.index_path()), nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(doc["files"].size(), static_cast<std::size_t>(i + 1));
  }
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"index.json"});
}

TEST(IndexWriterTest, StaleTempFileIsReplaced) {
  TempDir dir;
  write_text(dir.path() + "/index.json.tmp", "garbage from a crash");
  IndexWriter w(dir.path());
  ASSERT_TRUE(w.add(entry("a.mp4")).is_ok());
  EXPECT_FALSE(exists(dir.path() + "/index.json.tmp"));
  EXPECT_EQ(nlohmann::json::parse(read_text(w.index_path()))["files"].size(), 1u);
}

TEST(IndexWriterTest, WriteWithoutEntriesGivesEmptyList) {
  TempDir dir;
  IndexWriter w(dir.path());
  ASSERT_TRUE(w.write().is_ok());
  const nlohmann::json doc = nlohmann::json::parse(read_text(w.index_path()));
  EXPECT_EQ(doc, nlohmann::json::parse(R"({"files": []})"));
}

TEST(IndexWriterTest, CorruptFileIsMovedAsideAndWeStartEmpty) {
  TempDir dir;
  const std::string index = dir.path() + "/index.json";
  for (const std::string& bad :
       std::vector<std::string>{"{not json", "[1, 2]", R"({"files": 3})", R"({"files": [{"path": "a.mp4"}]})",
                                R"({"files": [{"path": "../../x", "stream": "s", "device": "cpu",
                                   "kind": "video", "mode": "auto", "rank": 0, "frames": 1,
                                   "first_step": 0, "last_step": 0}]})",
                                std::string("\0\0\0", 3)}) {
    write_text(index, bad);
    IndexWriter w(dir.path());
    ASSERT_TRUE(w.load().is_ok()) << bad;
    EXPECT_TRUE(w.entries().empty());
    EXPECT_FALSE(exists(index)) << bad;
    ASSERT_FALSE(w.last_corrupt_path().empty());
    EXPECT_EQ(read_text(w.last_corrupt_path()), bad);
  }
  // Each corrupt file got its own number.
  for (int n = 1; n <= 6; ++n) EXPECT_TRUE(exists(index + ".corrupt-" + std::to_string(n))) << n;

  // And writing afterwards works.
  IndexWriter w(dir.path());
  ASSERT_TRUE(w.load().is_ok());
  ASSERT_TRUE(w.add(entry("a.mp4")).is_ok());
  EXPECT_EQ(nlohmann::json::parse(read_text(index))["files"].size(), 1u);
}

TEST(IndexWriterTest, UnreadableIndexIsAnErrorNotCorruption) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  TempDir dir;
  const std::string index = dir.path() + "/index.json";
  write_text(index, R"({"files": []})");
  ::chmod(index.c_str(), 0);
  IndexWriter w(dir.path());
  const Status s = w.load();
  EXPECT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("Permission denied"));
  EXPECT_TRUE(exists(index));  // not moved aside
}

TEST(IndexWriterTest, WriteFailuresAreReported) {
  IndexWriter missing_dir("/nonexistent/tensorscope/session");
  const Status s = missing_dir.add(entry("a.mp4"));
  EXPECT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("index.json.tmp"));
  EXPECT_EQ(missing_dir.entries().size(), 1u);  // kept for the next write
}

TEST(IndexWriterTest, InvalidEntriesAreRefused) {
  TempDir dir;
  IndexWriter w(dir.path());
  for (const std::string& bad_path : std::vector<std::string>{"", "/etc/passwd", "../x.mp4", "a/../../x", "a//b", "./a",
                                                              std::string("a\0b", 3), "a\\b"}) {
    IndexEntry e = entry("x.mp4");
    e.path = bad_path;
    EXPECT_FALSE(w.add(e).is_ok()) << bad_path;
  }
  IndexEntry negative = entry("x.mp4");
  negative.frames = -1;
  EXPECT_FALSE(w.add(negative).is_ok());
  EXPECT_TRUE(w.entries().empty());
  EXPECT_FALSE(exists(w.index_path()));
  EXPECT_TRUE(w.add(entry("sub/dir/x.mp4")).is_ok());
}

TEST(IndexWriterTest, NonUtf8StreamNamesDoNotBreakTheFile) {
  TempDir dir;
  IndexWriter w(dir.path());
  IndexEntry e = entry("x.mp4");
  e.stream = "bad\xff\xfe";
  ASSERT_TRUE(w.add(e).is_ok());
  const nlohmann::json doc = nlohmann::json::parse(read_text(w.index_path()), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["files"][0]["stream"], "bad\xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD twice
}

TEST(IndexEntryJsonTest, RoundTrip) {
  IndexEntry e = entry("a.mp4");
  e.first_step = std::numeric_limits<int64_t>::min();
  e.last_step = std::numeric_limits<int64_t>::max();
  e.rank = -7;
  StatusOr<IndexEntry> back = index_entry_from_json(to_json(e));
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(*back, e);
  StatusOr<IndexEntry> via_text = index_entry_from_json(nlohmann::json::parse(to_json(e).dump()));
  ASSERT_TRUE(via_text.is_ok()) << via_text.message();
  EXPECT_EQ(*via_text, e);
  // Extra keys from a newer writer are ignored.
  nlohmann::json extra = to_json(e);
  extra["fps"] = 10;
  EXPECT_TRUE(index_entry_from_json(extra).is_ok());
}

TEST(IndexEntryJsonTest, TypesAreValidated) {
  const nlohmann::json good = to_json(entry("a.mp4"));
  auto error_for = [](const nlohmann::json& j) {
    StatusOr<IndexEntry> r = index_entry_from_json(j);
    EXPECT_FALSE(r.is_ok()) << j.dump();
    return r.is_ok() ? std::string() : r.message();
  };
  EXPECT_THAT(error_for(nlohmann::json::array()), HasSubstr("expected an object"));
  EXPECT_THAT(error_for(nlohmann::json("a.mp4")), HasSubstr("expected an object"));
  for (const char* key : {"path", "stream", "device", "kind", "mode", "rank", "frames", "first_step", "last_step"}) {
    nlohmann::json j = good;
    j.erase(key);
    EXPECT_THAT(error_for(j), HasSubstr(std::string(key) + ": missing"));
  }
  {  // "pid" is optional (indexes written before it was recorded) but checked when there
    nlohmann::json old = good;
    old.erase("pid");
    StatusOr<IndexEntry> r = index_entry_from_json(old);
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r.value().pid, 0);
    old["pid"] = -3;
    EXPECT_THAT(error_for(old), HasSubstr("pid: expected an integer >= 0, got -3"));
  }
  nlohmann::json j = good;
  j["stream"] = 5;
  EXPECT_THAT(error_for(j), HasSubstr("stream: expected a string, got 5"));
  j = good;
  j["rank"] = "0";
  EXPECT_THAT(error_for(j), HasSubstr("rank: expected an integer"));
  j = good;
  j["rank"] = 1.5;
  EXPECT_THAT(error_for(j), HasSubstr("rank: expected an integer"));
  j = good;
  j["rank"] = 3000000000LL;
  EXPECT_THAT(error_for(j), HasSubstr("rank: expected an integer between"));
  j = good;
  j["frames"] = -1;
  EXPECT_THAT(error_for(j), HasSubstr("frames: expected an integer >= 0, got -1"));
  j = good;
  j["frames"] = nullptr;
  EXPECT_THAT(error_for(j), HasSubstr("frames: expected an integer >= 0, got null"));
  j = good;
  j["last_step"] = 18446744073709551615ULL;
  EXPECT_THAT(error_for(j), HasSubstr("last_step: expected a 64-bit integer"));
  j = good;
  j["first_step"] = true;
  EXPECT_THAT(error_for(j), HasSubstr("first_step"));
  j = good;
  j["path"] = "../escape.mp4";
  EXPECT_THAT(error_for(j), HasSubstr("path: must stay inside the session dir"));
  j = good;
  j["path"] = "/abs.mp4";
  EXPECT_THAT(error_for(j), HasSubstr("path: must be relative"));
}

}  // namespace
}  // namespace tensorscope::daemon
