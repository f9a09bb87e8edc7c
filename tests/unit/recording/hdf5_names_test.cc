// hdf5_names_test.cc — the names of the HDF5 sink: stream names escaped into group
// names (every byte HDF5 or the layout suffix would misread, nothing else; distinct
// names stay distinct) and the stems of partial file names.
#include "hdf5/names.h"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>

namespace tensorscope::recording::hdf5 {
namespace {

TEST(Hdf5Names, GroupNamesEscapeWhatHdf5AndTheLayoutSuffixWouldMisread) {
  EXPECT_EQ(group_base_name("model/fc1.out"), "model%2Ffc1.out");
  EXPECT_EQ(group_base_name("50%@2"), "50%25%402");
  EXPECT_EQ(group_base_name(std::string("a\nb\x7f", 4) + '\0'), "a%0Ab%7F%00");
  EXPECT_EQ(group_base_name("\x1f"), "%1F");
}

TEST(Hdf5Names, GroupNamesKeepEverythingElse) {
  EXPECT_EQ(group_base_name("layer.0 grad-[x]_~"), "layer.0 grad-[x]_~");
  EXPECT_EQ(group_base_name("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // UTF-8
  EXPECT_EQ(group_base_name(""), "");
}

TEST(Hdf5Names, DotsAreEscapedOnlyInANameOfDots) {
  EXPECT_EQ(group_base_name("."), "%2E");
  EXPECT_EQ(group_base_name(".."), "%2E%2E");
  EXPECT_EQ(group_base_name("..."), "%2E%2E%2E");
  EXPECT_EQ(group_base_name(".a."), ".a.");
}

TEST(Hdf5Names, DistinctStreamsGetDistinctGroups) {
  const std::string names[] = {"a/b", "a%2Fb", "a%b", "a%25b", "a@1", "a%401", ".", "%2E", "a"};
  std::set<std::string> groups;
  for (const std::string& n : names) groups.insert(group_base_name(n));
  EXPECT_EQ(groups.size(), std::size(names));
}

TEST(Hdf5Names, PartialStem) {
  EXPECT_EQ(partial_stem(".run.0.h5.partial"), "run.0");
  EXPECT_EQ(partial_stem(".x.h5.partial"), "x");
  EXPECT_EQ(partial_stem("..h5.partial"), "");  // empty stem
  EXPECT_EQ(partial_stem(".h5.partial"), "");
  EXPECT_EQ(partial_stem("run.0.h5.partial"), "");  // no leading dot
  EXPECT_EQ(partial_stem(".run.0.h5"), "");
  EXPECT_EQ(partial_stem(".run.0.h5.partial.tmp"), "");
}

}  // namespace
}  // namespace tensorscope::recording::hdf5
