// row_labels_format_test.cc — the row labels section: numeric and named labels read back
// as written, text labels numbered in sorted order, and every malformed section refused
// with its reason (wrong magic or version, reserved bits, a count that is not the
// tensor's rows, sizes that do not add up, bad names, values out of range).
#include "tensorscope/shared/row_labels_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace tensorscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string encoded(const RowLabels& labels) {
  auto section = encode_row_labels(labels);
  EXPECT_TRUE(section) << section.message();
  return section ? *section : std::string();
}

TEST(RowLabelsFormat, NumericAndNamedLabelsRoundTrip) {
  const RowLabels numeric{{3, -1, 7, 3}, {}};
  const std::string a = encoded(numeric);
  EXPECT_EQ(a.size(), kRowLabelsHeaderBytes + 4 * 8);
  auto back = parse_row_labels(a, 4);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, numeric);
  EXPECT_EQ(back->class_name(7), "7");

  const RowLabels named{{1, 0, 1}, {"cat", "dog"}};
  const std::string b = encoded(named);
  EXPECT_EQ(b.size(), kRowLabelsHeaderBytes + 3 * 8 + 8);  // "cat\0dog\0"
  back = parse_row_labels(b, 3);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(*back, named);
  EXPECT_EQ(back->class_name(1), "dog");

  back = parse_row_labels(encoded(RowLabels{}), 0);  // no rows, no labels
  ASSERT_TRUE(back) << back.message();
  EXPECT_TRUE(back->values.empty());
}

TEST(RowLabelsFormat, TextLabelsAreNumberedInSortedOrder) {
  auto labels = row_labels_from_text({"dog", "cat", "dog", "bird"});
  ASSERT_TRUE(labels) << labels.message();
  EXPECT_THAT(labels->names, ElementsAre("bird", "cat", "dog"));
  EXPECT_THAT(labels->values, ElementsAre(2, 1, 2, 0));
}

TEST(RowLabelsFormat, WhatCannotBeSentIsSaid) {
  EXPECT_THAT(encode_row_labels(RowLabels{{0, 2}, {"a", "b"}}).message(), HasSubstr("not an index"));
  EXPECT_THAT(encode_row_labels(RowLabels{{0}, {""}}).message(), HasSubstr("empty"));
  EXPECT_THAT(encode_row_labels(RowLabels{{0}, {std::string(80, 'x')}}).message(), HasSubstr("longer than 63"));
  EXPECT_THAT(encode_row_labels(RowLabels{{0}, {"a\nb"}}).message(), HasSubstr("control"));
  RowLabels many;
  many.values.assign(kMaxRowLabels + 1, 0);
  EXPECT_THAT(encode_row_labels(many).message(), HasSubstr("at most"));
}

TEST(RowLabelsFormat, MalformedSectionsAreRefusedWithTheirReason) {
  const std::string good = encoded(RowLabels{{1, 0}, {"a", "b"}});
  ASSERT_TRUE(parse_row_labels(good, 2));
  EXPECT_THAT(parse_row_labels(good, 3).message(), HasSubstr("2 row labels for a tensor of 3 rows"));
  EXPECT_THAT(parse_row_labels(good.substr(0, 10), 2).message(), HasSubstr("shorter than its header"));
  EXPECT_THAT(parse_row_labels(good.substr(0, good.size() - 1), 2).message(), HasSubstr("size does not match"));
  EXPECT_THAT(parse_row_labels(good + "x", 2).message(), HasSubstr("size does not match"));

  std::string bad = good;
  bad[0] ^= 1;
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("wrong magic"));
  bad = good;
  bad[4] = 2;  // version 2
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("version 2"));
  bad = good;
  bad[6] = 1;  // flags
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("reserved"));
  bad = good;
  const int64_t out_of_range = 5;
  std::memcpy(bad.data() + kRowLabelsHeaderBytes, &out_of_range, 8);
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("not an index"));
  bad = good;
  bad[bad.size() - 1] = 'z';  // the last name loses its NUL
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("fewer names"));
  bad = good;
  bad[kRowLabelsHeaderBytes + 16] = '\x01';  // a control character in a name
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("control"));
  bad = good;
  const uint32_t huge = 0xffffffffu;
  std::memcpy(bad.data() + 12, &huge, 4);  // class count
  EXPECT_THAT(parse_row_labels(bad, 2).message(), HasSubstr("over its limits"));
}

}  // namespace
}  // namespace tensorscope
