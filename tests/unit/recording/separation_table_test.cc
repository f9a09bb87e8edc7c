// separation_table_test.cc — the separation table: the header on a new file, a line per
// frame with quoted names and an empty cell for an undefined silhouette, appends to an
// existing table, another file refused; and its path, named like the stream's videos.
#include "tensorscope/recording/separation_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "tensorscope/recording/file_naming.h"
#include "temp_dir.h"

namespace tensorscope::recording {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SeparationTableTest, LinesAppendUnderTheHeader) {
  testing::TempDir dir("sep");
  const std::string path = dir.path() + "/separation/t.csv";
  {
    auto writer = SeparationTableWriter::open(path);
    ASSERT_TRUE(writer) << writer.message();
    ASSERT_TRUE(writer->append({10, "probe.fc1", "cpu", 0, 4242, "tsne", 10, 500, 0.34}));
    ASSERT_TRUE(writer->append({20, "a,\"b\"", "cuda0", 3, 7, "pca", 1, 64, std::numeric_limits<double>::quiet_NaN()}));
  }
  auto again = SeparationTableWriter::open(path);  // a restarted worker appends
  ASSERT_TRUE(again) << again.message();
  ASSERT_TRUE(again->append({30, "probe.fc1", "cpu", 0, 4242, "tsne", 10, 500, -0.125}));
  EXPECT_EQ(read_file(path),
            std::string(kSeparationTableHeader) +
                "\n"
                "10,probe.fc1,cpu,0,4242,tsne,10,500,0.34\n"
                "20,\"a,\"\"b\"\"\",cuda0,3,7,pca,1,64,\n"
                "30,probe.fc1,cpu,0,4242,tsne,10,500,-0.125\n");

  const std::string other = dir.path() + "/other.csv";
  std::ofstream(other) << "step,stream,kind\n1,x,y\n";
  auto refused = SeparationTableWriter::open(other);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("other.csv"), std::string::npos) << refused.message();
}

TEST(SeparationTableTest, PathIsTheStreamsVideoNameAsCsv) {
  EXPECT_EQ(separation_table_path("probe.fc1", "cpu", 2, 4242, "tsne"),
            "separation/probe.fc1__cpu__rank2__pid4242__tsne.csv");
  EXPECT_EQ(video_file_name("probe.fc1", "cpu", 2, 4242, "tsne", 0), "probe.fc1__cpu__rank2__pid4242__tsne__0000.mp4");
}

}  // namespace
}  // namespace tensorscope::recording
