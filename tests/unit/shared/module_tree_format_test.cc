// The module tree payload: what format_module_tree writes, parse_module_tree reads back
// exactly; malformed payloads (they come from another process) are errors naming the
// line, never a crash.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tensorscope/shared/module_tree_format.h"
#include "tensorscope/shared/ring_reader.h"
#include "tensorscope/shared/wire_format.h"

namespace tensorscope {
namespace {

ModuleTree sample() {
  ModuleTree t;
  ModuleTreeCall a;
  a.path = "";
  a.type = "Net";
  a.inputs = {"float32[8,1,28,28]@cpu"};
  a.output = "float32[8,10]@cpu";
  ModuleTreeCall b;
  b.thread = 1;
  b.call = 2;
  b.path = "features.0";
  b.type = "Conv2d";
  b.inputs = {"bfloat16[]@cuda:0", "int64[3]@cuda:0"};
  b.output = "";
  ModuleTreeCall c;
  c.path = "head";
  t.calls = {a, b, c};
  t.omitted = 7;
  return t;
}

TEST(ModuleTreeFormat, RoundTripsExactly) {
  const ModuleTree t = sample();
  const std::string payload = format_module_tree(t);
  EXPECT_EQ(payload.rfind("tensorscope-module-tree 1 omitted=7\n", 0), 0u) << payload;
  auto back = parse_module_tree(payload);
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(*back, t);
}

TEST(ModuleTreeFormat, DescribesTensorsAndCleansFields) {
  const int64_t sizes[] = {3, 0, 5};
  EXPECT_EQ(describe_tensor("float16", sizes, 3, "cuda:1"), "float16[3,0,5]@cuda:1");
  EXPECT_EQ(describe_tensor("bool", nullptr, 0, "cpu"), "bool[]@cpu");
  ModuleTree t;
  ModuleTreeCall c;
  c.path = "a\tb\nc";
  c.type = std::string(2000, 'x');
  t.calls = {c};
  auto back = parse_module_tree(format_module_tree(t));
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(back->calls[0].path, "a b c");
  EXPECT_EQ(back->calls[0].type.size(), ModuleTree::kMaxFieldBytes);
}

TEST(ModuleTreeFormat, CallsOverTheLimitAreCountedNotListed) {
  ModuleTree t;
  t.calls.resize(ModuleTree::kMaxCalls + 5);
  for (size_t i = 0; i < t.calls.size(); ++i) t.calls[i].path = "m" + std::to_string(i);
  const std::string payload = format_module_tree(t);
  EXPECT_LE(payload.size(), wire::kMaxModuleTreeBytes);
  auto back = parse_module_tree(payload);
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(back->calls.size(), ModuleTree::kMaxCalls);
  EXPECT_EQ(back->omitted, 5u);
  EXPECT_EQ(back->calls.back().path, "m" + std::to_string(ModuleTree::kMaxCalls - 1));
}

TEST(ModuleTreeFormat, MalformedPayloadsAreErrorsNamingTheLine) {
  const std::string header = "tensorscope-module-tree 1 omitted=0\n";
  struct Case {
    std::string payload;
    std::string expect;
  };
  const Case cases[] = {
      {"", "newline"},
      {"hello\n", "unknown header"},
      {"tensorscope-module-tree 3 omitted=0\n", "unknown header"},
      {"tensorscope-module-tree 1 omitted=x\n", "line 1"},
      {header + "0\t0\tfc\tLinear\t-\n", "line 2: expected 6"},
      {header + "0\t0\tfc\tLinear\t-\t-\t-\n", "line 2: expected 6"},
      {header + "x\t0\tfc\tLinear\t-\t-\n", "thread"},
      {header + "0\t99999999999\tfc\tLinear\t-\t-\n", "call"},
      {header + "0\t0\tfc\tLinear\tfloat32[2,3]\t-\n", "input"},
      {header + "0\t0\tfc\tLinear\tfloat32(2)@cpu\t-\n", "input"},
      {header + "0\t0\tfc\tLinear\t-\tfloat32[2,-3]@cpu\n", "output"},
      {header +
           "0\t0\tfc\tLin\x01"
           "ear\t-\t-\n",
       "control"},
      {header + "0\t0\tfc\tLinear\t-\t-", "newline"},
  };
  for (const Case& c : cases) {
    auto parsed = parse_module_tree(c.payload);
    ASSERT_FALSE(parsed.is_ok()) << c.payload;
    EXPECT_NE(parsed.message().find(c.expect), std::string::npos) << c.payload << " -> " << parsed.message();
  }
}

// Version 2: a seventh field per line says whether the call's values changed; written
// only when some call has a value, so clients that do not fingerprint still write version 1.
TEST(ModuleTreeFormat, ValuesGoInVersion2AndRoundTrip) {
  ModuleTree t = sample();
  t.calls[0].value = "=";
  t.calls[1].value = "~";
  // calls[2] has no output and no value
  const std::string payload = format_module_tree(t);
  EXPECT_EQ(payload,
            "tensorscope-module-tree 2 omitted=7\n"
            "0\t0\t\tNet\tfloat32[8,1,28,28]@cpu\tfloat32[8,10]@cpu\t=\n"
            "1\t2\tfeatures.0\tConv2d\tbfloat16[]@cuda:0 int64[3]@cuda:0\t-\t~\n"
            "0\t0\thead\t\t-\t-\t-\n");
  auto back = parse_module_tree(payload);
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(*back, t);
  t.calls[2].value = "?";
  back = parse_module_tree(format_module_tree(t));
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(back->calls[2].value, "?");
  t.calls[2].value = "changed";  // not a value: written as not compared
  back = parse_module_tree(format_module_tree(t));
  ASSERT_TRUE(back.is_ok()) << back.message();
  EXPECT_EQ(back->calls[2].value, "?");
  // Without values: version 1, byte for byte as before.
  EXPECT_EQ(format_module_tree(sample()).rfind("tensorscope-module-tree 1 omitted=7\n", 0), 0u);

  const std::string v2 = "tensorscope-module-tree 2 omitted=0\n";
  const std::pair<std::string, std::string> bad[] = {
      {v2 + "0\t0\tfc\tLinear\t-\t-\n", "line 2: expected 7"},
      {v2 + "0\t0\tfc\tLinear\t-\t-\t\n", "value"},
      {v2 + "0\t0\tfc\tLinear\t-\t-\t==\n", "value"},
      {"tensorscope-module-tree 1 omitted=0\n0\t0\tfc\tLinear\t-\t-\t=\n", "line 2: expected 6"},
  };
  for (const auto& [payload, expect] : bad) {
    auto parsed = parse_module_tree(payload);
    ASSERT_FALSE(parsed.is_ok()) << payload;
    EXPECT_NE(parsed.message().find(expect), std::string::npos) << payload << " -> " << parsed.message();
  }
}

TEST(ModuleTreeFormat, RandomBytesNeverCrashTheParser) {
  const std::string good = format_module_tree(sample());
  std::mt19937 rng(5);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string p = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) p[rng() % p.size()] = static_cast<char>(rng() % 256);
    if (rng() % 4 == 0) p.resize(rng() % p.size());
    auto parsed = parse_module_tree(p);
    if (parsed.is_ok()) {
      ++accepted;
      // Whatever is accepted formats back to a payload that parses the same.
      auto again = parse_module_tree(format_module_tree(*parsed));
      ASSERT_TRUE(again.is_ok()) << again.message();
      EXPECT_EQ(*again, *parsed);
    }
  }
  EXPECT_GT(accepted, 0);
}

// The consumer takes a module tree record only as at most 1 MiB of uint8 text in the ring.
TEST(ModuleTreeFormat, RecordHeadersOfModuleTreesAreValidated) {
  // RecordHeader is not copyable (its sequence is atomic): each case fills a fresh one.
  auto check = [](uint64_t bytes, void (*change)(wire::RecordHeader&)) {
    wire::RecordHeader h{};
    h.kind = static_cast<uint8_t>(wire::TensorKind::kModuleTree);
    h.dtype = static_cast<uint8_t>(wire::DType::kUInt8);
    h.ndim = 1;
    h.shape[0] = static_cast<int64_t>(bytes);
    h.payload_bytes = bytes;
    h.name[0] = 'n';
    h.device[0] = 'c';
    if (change != nullptr) change(h);
    const uint64_t capacity = uint64_t{4} << 20;
    return validate_record_header(h, capacity, 0, capacity, capacity);
  };
  EXPECT_EQ(check(100, nullptr), "");
  EXPECT_EQ(check(wire::kMaxModuleTreeBytes, nullptr), "");
  EXPECT_NE(check(wire::kMaxModuleTreeBytes + 1, nullptr), "");
  EXPECT_NE(check(100, [](wire::RecordHeader& h) { h.dtype = static_cast<uint8_t>(wire::DType::kInt8); }), "");
  EXPECT_NE(check(100,
                  [](wire::RecordHeader& h) {
                    h.ndim = 2;
                    h.shape[1] = 1;
                  }),
            "");
  EXPECT_NE(check(100, [](wire::RecordHeader& h) { h.flags = wire::kRecordDevicePayload; }), "");
}

}  // namespace
}  // namespace tensorscope
