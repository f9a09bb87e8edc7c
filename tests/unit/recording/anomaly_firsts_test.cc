// The first report of each anomaly type: the earliest step, then forward order, then the
// lowest rank; what is not a report is ignored.
#include "tensorscope/recording/anomaly_firsts.h"

#include <gtest/gtest.h>

namespace tensorscope::recording {
namespace {

nlohmann::json report(const char* type, int64_t step, int rank, const char* stream) {
  return {{"type", type}, {"step", step}, {"rank", rank}, {"stream", stream}, {"message", "m"}};
}

TEST(AnomalyFirsts, TheEarliestOfEachTypeLowestRankFirst) {
  AnomalyFirsts firsts;
  EXPECT_TRUE(firsts.of("non_finite").is_null());
  firsts.note(report("explosion", 60, 1, "net.2"));
  firsts.note(report("non_finite", 40, 3, "net.4"));
  firsts.note(report("non_finite", 40, 1, "net.1"));
  firsts.note(report("non_finite", 41, 0, "net.0"));
  firsts.note(report("explosion", 59, 2, "net.3"));
  firsts.note(report("explosion", 59, 2, "net.9"));  // not earlier: the first one stays
  EXPECT_EQ(firsts.of("non_finite")["stream"], "net.1");
  EXPECT_EQ(firsts.of("explosion")["stream"], "net.3");
  EXPECT_TRUE(firsts.of("dead_units").is_null());
  EXPECT_EQ(firsts.all().size(), 2u);
}

TEST(AnomalyFirsts, InAStepForwardOrderComesBeforeTheRank) {
  // Rank 3's output went NaN (order 0); the other ranks saw it in their gradients later
  // that step (orders 12, 13): rank 3's is the first, whatever the rank numbers.
  AnomalyFirsts firsts;
  auto with_order = [](int64_t step, int rank, const char* stream, int order) {
    nlohmann::json r = report("non_finite", step, rank, stream);
    r["details"] = {{"order", order}};
    return r;
  };
  firsts.note(with_order(2, 0, "net.2.grad", 12));
  firsts.note(with_order(2, 3, "net.0", 0));
  firsts.note(with_order(2, 1, "net.2.grad", 13));
  firsts.note(report("non_finite", 2, 0, "net.1"));  // no order (an older daemon's): after the placed ones
  EXPECT_EQ(firsts.of("non_finite")["rank"], 3);
  EXPECT_TRUE(earlier_anomaly(with_order(1, 9, "x", 50), with_order(2, 0, "y", 0))) << "the step first";
  EXPECT_FALSE(earlier_anomaly(report("explosion", 2, 0, "x"), with_order(2, 5, "y", 3)));
}

TEST(AnomalyFirsts, WhatIsNoReportIsIgnored) {
  AnomalyFirsts firsts;
  firsts.note(nlohmann::json::parse(R"({"tensorscope":"anomalies","version":1})"));
  firsts.note({{"type", "explosion"}, {"step", "7"}, {"rank", 0}});
  firsts.note({{"type", 3}, {"step", 7}, {"rank", 0}});
  firsts.note(nlohmann::json::array());
  EXPECT_TRUE(firsts.all().empty());
  EXPECT_TRUE(is_anomaly_report(report("dead_units", 0, 0, "x")));
}

}  // namespace
}  // namespace tensorscope::recording
