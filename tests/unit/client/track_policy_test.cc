// track_policy_test.cc — the bookkeeping both clients' module tracks share, alone: the
// steps a track sends and summarizes, a call's route under each stacking mode, the
// stacked calls' row limit and hold budget, and the words of a refusal.
#include "track_policy.h"

#include <gtest/gtest.h>

#include <string>

namespace tensorscope {
namespace {

TEST(TrackPolicy, StepGatesAreMultiplesOfEveryNAndStatsEvery) {
  EXPECT_TRUE(step_gates(0, 10, 1, false).full);
  EXPECT_FALSE(step_gates(5, 10, 1, false).full);
  EXPECT_TRUE(step_gates(5, 10, 1, true).full) << "a capture after a NaN sends the step whole";
  EXPECT_TRUE(step_gates(5, 10, 1, false).summarize);
  EXPECT_FALSE(step_gates(5, 10, 2, false).summarize);
  EXPECT_TRUE(step_gates(6, 10, 2, false).summarize);
  EXPECT_FALSE(step_gates(0, 1, 0, false).summarize) << "stats_every 0: never";
  EXPECT_TRUE(step_gates(7, 1, 1, false).full);
}

TEST(TrackPolicy, AutoKeepsTheFirstCallsAloneAndStacksTheRest) {
  for (int call = 0; call < kSeparateCalls; ++call) {
    const CallRoute route = route_call(CallStacking::kAuto, call, false);
    EXPECT_TRUE(route.own_stream) << call;
    EXPECT_FALSE(route.stack_row) << call;
  }
  const CallRoute past = route_call(CallStacking::kAuto, kSeparateCalls, false);
  EXPECT_FALSE(past.own_stream);
  EXPECT_TRUE(past.stack_row);
  const CallRoute known = route_call(CallStacking::kAuto, 0, true);
  EXPECT_TRUE(known.own_stream && known.stack_row) << "a module known to stack: its first calls are both";
}

TEST(TrackPolicy, StackedStacksEveryCallAndSeparateRefusesPastTheLimit) {
  EXPECT_FALSE(route_call(CallStacking::kStacked, 0, false).own_stream);
  EXPECT_TRUE(route_call(CallStacking::kStacked, 0, false).stack_row);
  EXPECT_TRUE(route_call(CallStacking::kSeparate, kMaxCallsPerStep - 1, false).own_stream);
  const CallRoute over = route_call(CallStacking::kSeparate, kMaxCallsPerStep, false);
  EXPECT_TRUE(over.refused());
  EXPECT_FALSE(route_call(CallStacking::kAuto, kMaxCallsPerStep + 5, false).refused()) << "stacked: no call limit";
}

TEST(StackLedger, HoldsRowsWithinTheBudgetThenReducesAtOnce) {
  StackLedger ledger(CallStacking::kStacked);
  const size_t half = kStackedHoldBytes / 2;
  EXPECT_EQ(ledger.take("m#calls", 1, 0, half).row, StackLedger::Row::kHold);
  EXPECT_EQ(ledger.take("m#calls", 1, 1, half).row, StackLedger::Row::kHold);
  EXPECT_EQ(ledger.take("n#calls", 1, 0, 1).row, StackLedger::Row::kReduceNow) << "the budget is the track's";
  const auto closed = ledger.take_all();
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[0].name, "m#calls");
  EXPECT_EQ(closed[0].rows, 2u);
  EXPECT_EQ(closed[1].rows, 1u);
  EXPECT_EQ(ledger.take("m#calls", 2, 0, half).row, StackLedger::Row::kHold) << "take_all frees the budget";
}

TEST(StackLedger, AStepChangeClosesTheStackAndFreesItsBytes) {
  StackLedger ledger(CallStacking::kStacked);
  EXPECT_TRUE(ledger.take("m#calls", 1, 0, kStackedHoldBytes).closed.empty());
  const auto next = ledger.take("m#calls", 2, 0, kStackedHoldBytes);
  ASSERT_EQ(next.closed.size(), 1u);
  EXPECT_EQ(next.closed[0].step, 1);
  EXPECT_EQ(next.row, StackLedger::Row::kHold);
}

TEST(StackLedger, CallsPastTheRowLimitAreDroppedAndCounted) {
  StackLedger ledger(CallStacking::kStacked);
  for (size_t i = 0; i < kMaxStackedRows; ++i) ledger.take("m#calls", 0, static_cast<int>(i), 0);
  EXPECT_EQ(ledger.take("m#calls", 0, 1, 0).row, StackLedger::Row::kDrop);
  EXPECT_EQ(ledger.take("m#calls", 0, 2, 0).row, StackLedger::Row::kDrop);
  const auto closed = ledger.take_all();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].rows, kMaxStackedRows);
  EXPECT_EQ(closed[0].dropped, 2u);
}

TEST(StackLedger, AutoRemembersModulesWithManyCalls) {
  StackLedger ledger(CallStacking::kAuto);
  EXPECT_FALSE(ledger.may_take(0));
  EXPECT_FALSE(ledger.wants("m#calls", 0));
  EXPECT_TRUE(ledger.wants("m#calls", kSeparateCalls));
  ledger.take("m#calls", 0, kSeparateCalls, 8);
  EXPECT_TRUE(ledger.may_take(0));
  EXPECT_TRUE(ledger.wants("m#calls", 0)) << "from its next step on, every call";
  EXPECT_FALSE(ledger.wants("n#calls", 0));
  EXPECT_EQ(ledger.seen(), std::vector<std::string>{"m#calls"});
  StackLedger separate(CallStacking::kSeparate);
  EXPECT_FALSE(separate.stacking());
  EXPECT_FALSE(separate.wants("m#calls", 100));
}

TEST(TrackRefusal, WordsFillTheirCounts) {
  EXPECT_EQ(track_refusal(TrackRefusal::kStackDropped, "3", "4096"), "3 calls past the 4096 stacked in one step");
  EXPECT_EQ(track_refusal(TrackRefusal::kOverCalls), "more calls of this module in one step than are tracked");
  for (const auto& refusal : kTrackRefusals) {
    EXPECT_FALSE(refusal.name.empty());
    EXPECT_FALSE(refusal.words.empty());
  }
}

}  // namespace
}  // namespace tensorscope
