// text_input_test.cc — small untrusted text files read with a size cap and clear
// errors, and untrusted text quoted for messages.
#include "tensorscope/base/text_input.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_dir.h"

namespace tensorscope {
namespace {

using ::testing::HasSubstr;

TEST(TextInput, ReadsASmallFileAndRefusesABigOne) {
  testing::TempDir dir("text");
  const std::string path = dir.path() + "/config.yaml";
  std::ofstream(path) << "workers: 2\n";
  auto text = read_text_file(path, 100, "config file");
  ASSERT_TRUE(text) << text.message();
  EXPECT_EQ(*text, "workers: 2\n");
  auto big = read_text_file(path, 4, "config file");
  ASSERT_FALSE(big);
  EXPECT_THAT(big.message(), HasSubstr(path + ": config file is larger than 4 bytes"));
}

TEST(TextInput, MissingFilesAndDirectories) {
  testing::TempDir dir("text");
  auto missing = read_text_file(dir.path() + "/none", 100, "config file");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.message(), HasSubstr(dir.path() + "/none: cannot open config file"));
  bool was_missing = false;
  auto allowed = read_text_file(dir.path() + "/none", 100, "index", &was_missing);
  ASSERT_TRUE(allowed) << allowed.message();
  EXPECT_TRUE(was_missing);
  EXPECT_EQ(*allowed, "");
  auto directory = read_text_file(dir.path(), 100, "config file");
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.message(), HasSubstr("is a directory, not a config file"));
}

TEST(TextInput, TheTailOfALongFileFromItsFirstWholeLine) {
  testing::TempDir dir("text");
  const std::string path = dir.path() + "/log";
  std::ofstream(path) << "first line\nsecond\nthird\n";
  EXPECT_EQ(*read_text_tail(path, 100, "log"), "first line\nsecond\nthird\n") << "short: whole";
  EXPECT_EQ(*read_text_tail(path, 10, "log"), "third\n") << "the last 10 bytes, from the line that begins in them";
  EXPECT_EQ(*read_text_tail(path, 3, "log"), "") << "no line begins in the last 3 bytes";
  bool missing = false;
  EXPECT_EQ(*read_text_tail(dir.path() + "/none", 10, "log", &missing), "");
  EXPECT_TRUE(missing);
  EXPECT_FALSE(read_text_tail(dir.path() + "/none", 10, "log").is_ok());
  EXPECT_FALSE(read_text_tail(dir.path(), 10, "log").is_ok()) << "a directory";
}

TEST(TextInput, QuotesUntrustedTextForMessages) {
  EXPECT_EQ(quote_for_message("model.fc1"), "\"model.fc1\"");
  EXPECT_EQ(quote_for_message("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_for_message("\x1b[2J\n"), "\"\\x1b[2J\\x0a\"");
  EXPECT_EQ(quote_for_message(std::string(100, 'x'), 10), "\"" + std::string(10, 'x') + "...\"");
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

TEST(EscapeForMessage, KeepsPrintableEscapesTheRestAndCuts) {
  EXPECT_EQ(escape_for_message("plain text"), "plain text");
  EXPECT_EQ(escape_for_message(std::string("a\\b\nc\x01\xff", 7)), "a\\\\b\\x0ac\\x01\\xff");
  EXPECT_EQ(escape_for_message("say \"hi\""), "say \"hi\"");  // no quote given
  EXPECT_EQ(escape_for_message("say \"hi\"", 80, '"'), "say \\\"hi\\\"");
  EXPECT_EQ(escape_for_message("abcdef", 3), "abc...");
  EXPECT_EQ(quote_for_message("say \"hi\"", 5), "\"say \\\"...\"");
}

}  // namespace
}  // namespace tensorscope
