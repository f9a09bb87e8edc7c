// logging_test.cc — every log line is one line: control characters escaped, long lines
// cut, whatever the message carries.
#include "tensorscope/base/logging.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "captured_stderr.h"

namespace tensorscope {
namespace {

TEST(LogLines, TheLoggerWritesEveryMessageAsOneEscapedLine) {
  const std::string hostile = "name\n[2026-01-01] [tensorscope] [info] forged\x1b[2J\x07" + std::string(10000, 'z');
  const std::string err = testing::captured_stderr([&] { TS_LOG_WARN("raw {}", hostile); });
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.find('\x1b'), std::string::npos);
  EXPECT_EQ(err.find('\x07'), std::string::npos);
  EXPECT_NE(err.find("raw name\\x0a[2026-01-01]"), std::string::npos) << err.substr(0, 200);
  EXPECT_LT(err.size(), kMaxLogLineBytes + 100) << "the line is cut";
}

TEST(LogLines, ControlCharactersAreEscapedAndLongLinesCut) {
  EXPECT_EQ(escape_log_line("plain text"), "plain text");
  EXPECT_EQ(escape_log_line("a\nb\r\x1b[31mc\x7f"), "a\\x0ab\\x0d\\x1b[31mc\\x7f");
  EXPECT_EQ(escape_log_line("caf\xc3\xa9"), "caf\xc3\xa9") << "UTF-8 stays readable";
  const std::string long_line(100000, 'x');
  const std::string cut = escape_log_line(long_line, 100);
  EXPECT_EQ(cut, std::string(100, 'x') + "... (100000 bytes)");
}

}  // namespace
}  // namespace tensorscope
