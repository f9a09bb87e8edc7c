// The summary record's payload: what the client encodes reads back exactly, and what a
// daemon must not trust (wrong magic or version, sizes, counts, norms, names, kinds) is
// refused with a reason, never read past its end.
#include "tensorscope/shared/summary_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tensorscope {
namespace {

TensorSummary sample(const std::string& name, wire::TensorKind kind) {
  TensorSummary s;
  s.name = name;
  s.kind = kind;
  s.numel = 100;
  s.nan_count = 2;
  s.inf_count = 1;
  s.zero_count = 30;
  s.l2 = 12.5;
  s.max_abs = 3.25;
  s.mean = -0.5;
  s.std = 1.75;
  return s;
}

std::string refusal(const std::string& payload) {
  auto parsed = parse_summaries(payload);
  return parsed ? std::string() : parsed.message();
}

TEST(SummaryFormat, RoundTripsEveryField) {
  std::vector<TensorSummary> in = {sample("net.0", wire::TensorKind::kActivation),
                                   sample("net.0.grad", wire::TensorKind::kGradient),
                                   sample("net.0.weight", wire::TensorKind::kParameter)};
  in[2].has_update_ratio = true;
  in[2].update_ratio = 1e-3;
  in[1].l2 = std::numeric_limits<double>::infinity();  // an overflowing norm is kept
  in[0].cast_format = CastFormat::kFp8E4m3;
  in[0].underflow_count = 7;
  in[0].overflow_count = 3;
  in[0].min_abs_nonzero = 0x1p-20;
  in[0].dtype = wire::DType::kBFloat16;
  in[2].dtype = wire::DType::kFloat32;  // (in[1]'s: not known)
  const std::string payload = encode_summaries(in);
  EXPECT_EQ(payload.size(), kSummaryHeaderBytes + 3 * kSummaryEntryBytes);
  auto out = parse_summaries(payload);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(*out, in);
}

TEST(SummaryFormat, LongNamesAreCutAndTheCountIsBounded) {
  const std::string payload = encode_summaries({sample(std::string(300, 'a'), wire::TensorKind::kActivation)});
  auto out = parse_summaries(payload);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].name, std::string(wire::kNameBytes - 1, 'a'));
  std::vector<TensorSummary> many(kMaxSummaryEntries + 5, sample("x", wire::TensorKind::kActivation));
  EXPECT_EQ(parse_summaries(encode_summaries(many))->size(), kMaxSummaryEntries);
}

TEST(SummaryFormat, RefusesWhatItCannotTrust) {
  const std::string good = encode_summaries({sample("net.0", wire::TensorKind::kActivation)});
  EXPECT_EQ(refusal(good), "");
  EXPECT_NE(refusal(good.substr(0, 10)), "");
  std::string bad = good;
  bad[0] ^= 1;
  EXPECT_NE(refusal(bad).find("magic"), std::string::npos);
  bad = good;
  bad[4] = 2;  // version 2
  EXPECT_NE(refusal(bad).find("version 2"), std::string::npos) << refusal(bad);
  EXPECT_NE(refusal(good + "x").find("size"), std::string::npos);
  bad = good;
  bad[8] = 2;  // says 2 entries
  EXPECT_NE(refusal(bad).find("size"), std::string::npos);
  bad = good;
  std::memset(bad.data() + kSummaryHeaderBytes, 'a', wire::kNameBytes);  // no NUL
  EXPECT_NE(refusal(bad).find("terminated"), std::string::npos);

  auto with = [](auto change) {
    TensorSummary s = sample("net.0", wire::TensorKind::kActivation);
    change(s);
    return refusal(encode_summaries({s}));
  };
  EXPECT_NE(with([](TensorSummary& s) { s.nan_count = 101; }), "");
  EXPECT_NE(with([](TensorSummary& s) { s.inf_count = 99; }), "") << "NaN + Inf > numel";
  EXPECT_NE(with([](TensorSummary& s) { s.zero_count = 101; }), "");
  EXPECT_NE(with([](TensorSummary& s) { s.l2 = -1; }), "");
  EXPECT_NE(with([](TensorSummary& s) { s.name = ""; }), "");
  EXPECT_NE(with([](TensorSummary& s) { s.name = "a\nb"; }), "");
  EXPECT_NE(with([](TensorSummary& s) { s.kind = wire::TensorKind::kModuleTree; }), "");
  EXPECT_EQ(with([](TensorSummary& s) { s.mean = std::nan(""); }), "") << "NaN statistics are data";
  auto numerics = [](TensorSummary& s) {
    s.cast_format = CastFormat::kBf16;
    s.underflow_count = 10;
    s.overflow_count = 5;
    s.min_abs_nonzero = 0.5;
  };
  EXPECT_EQ(with(numerics), "");
  EXPECT_NE(with([&](TensorSummary& s) { numerics(s), s.underflow_count = 101; }), "");
  EXPECT_NE(with([&](TensorSummary& s) { numerics(s), s.overflow_count = 91; }), "") << "underflow + overflow > numel";
  EXPECT_NE(with([&](TensorSummary& s) { numerics(s), s.min_abs_nonzero = -1; }), "");
  EXPECT_NE(with([&](TensorSummary& s) {
              numerics(s), s.cast_format = static_cast<CastFormat>(kMaxCastFormat + 1);
            }).find("cast format"),
            std::string::npos);
  EXPECT_EQ(with([](TensorSummary& s) { s.dtype = wire::DType::kBool; }), "");
  EXPECT_NE(with([](TensorSummary& s) { s.dtype = static_cast<wire::DType>(wire::kMaxDType + 1); }).find("dtype"),
            std::string::npos);
}

// The dtype sits in what was padding: a client before it wrote 0 there (not known).
TEST(SummaryFormat, TheDtypeIsInTheEntrysFourthByteAndZeroMeansNotKnown) {
  TensorSummary s = sample("net.0", wire::TensorKind::kActivation);
  s.dtype = wire::DType::kFloat16;
  std::string payload = encode_summaries({s});
  EXPECT_EQ(static_cast<uint8_t>(payload[kSummaryHeaderBytes + wire::kNameBytes + 3]),
            static_cast<uint8_t>(wire::DType::kFloat16));
  payload[kSummaryHeaderBytes + wire::kNameBytes + 3] = 0;
  auto out = parse_summaries(payload);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ((*out)[0].dtype, wire::DType::kInvalid);
}

// Entries written before the cast formats (208 bytes): read, without numerics.
TEST(SummaryFormat, EntriesWithoutTheNumericsFieldsAreRead) {
  TensorSummary s = sample("net.0", wire::TensorKind::kActivation);
  const std::string payload = encode_summaries({s});
  std::string old = payload.substr(0, kSummaryHeaderBytes + kSummaryEntryBytesV1);
  const uint16_t v1 = kSummaryEntryBytesV1;
  std::memcpy(old.data() + 6, &v1, 2);
  auto out = parse_summaries(old);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ((*out)[0], s);
  EXPECT_FALSE((*out)[0].has_numerics());
  EXPECT_TRUE(std::isnan((*out)[0].dynamic_range()));
}

TEST(SummaryFormat, DynamicRangeIsTheBinadesBetweenTheSmallestAndLargestMagnitude) {
  TensorSummary s = sample("net.0", wire::TensorKind::kActivation);
  s.cast_format = CastFormat::kFp16;
  s.max_abs = 8;
  s.min_abs_nonzero = 0x1p-10;
  EXPECT_EQ(s.dynamic_range(), 13.0);
  s.max_abs = std::numeric_limits<double>::max();
  s.min_abs_nonzero = std::numeric_limits<double>::denorm_min();
  EXPECT_NEAR(s.dynamic_range(), 1024 + 1074, 1e-9) << "no overflow of the quotient";
  s.min_abs_nonzero = 0;  // no non-zero value
  EXPECT_TRUE(std::isnan(s.dynamic_range()));
}

TEST(SummaryFormat, ALaterVersionsLongerEntriesAreReadForTheFieldsKnown) {
  const TensorSummary s = sample("net.0", wire::TensorKind::kActivation);
  std::string payload = encode_summaries({s});
  const uint16_t longer = kSummaryEntryBytes + 16;
  std::memcpy(payload.data() + 6, &longer, 2);
  payload.append(16, '\x7f');
  auto out = parse_summaries(payload);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ((*out)[0], s);
}

}  // namespace
}  // namespace tensorscope

namespace tensorscope {
namespace {

TEST(SummaryFormat, AShardsPlacementRoundTripsAndOlderEntriesHaveNone) {
  TensorSummary s = sample("net.0.weight", wire::TensorKind::kParameter);
  s.shard.whole_numel = s.numel * 8;
  s.shard.dims = {{MeshPlacement::kReplicate, 0, 1, 2}, {MeshPlacement::kShard, 1, 3, 4}};
  const std::string payload = encode_summaries({s});
  auto out = parse_summaries(payload);
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ((*out)[0], s);
  // A client before sharded tensors wrote 232-byte entries: read, not sharded.
  std::string older(payload.substr(0, kSummaryHeaderBytes + kSummaryEntryBytesV2));
  const uint16_t v2 = kSummaryEntryBytesV2;
  std::memcpy(older.data() + 6, &v2, 2);
  out = parse_summaries(older);
  ASSERT_TRUE(out) << out.message();
  EXPECT_FALSE((*out)[0].shard.sharded());
  EXPECT_EQ((*out)[0].l2, s.l2);
}

TEST(SummaryFormat, APlacementThatCannotBeIsRefused) {
  TensorSummary s = sample("net.0.weight", wire::TensorKind::kParameter);
  s.shard.whole_numel = s.numel - 1;  // smaller than the part
  s.shard.dims = {{MeshPlacement::kShard, 0, 0, 2}};
  EXPECT_NE(refusal(encode_summaries({s})).find("smaller"), std::string::npos);
  s.shard.whole_numel = s.numel * 2;
  s.shard.dims[0].coordinate = 2;  // not below its size
  EXPECT_NE(refusal(encode_summaries({s})), "");
  s.shard.dims[0].coordinate = 1;
  EXPECT_EQ(refusal(encode_summaries({s})), "");
  std::string payload = encode_summaries({s});
  payload[kSummaryHeaderBytes + kSummaryEntryBytesV2 + 8] = 5;  // 5 mesh dimensions
  EXPECT_NE(refusal(payload), "");
}

}  // namespace
}  // namespace tensorscope
