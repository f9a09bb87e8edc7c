// pickle_machine_test.cc — the safe unpickler on hand-built pickles: scalars, strings,
// containers, the memo, GLOBAL/REDUCE/NEWOBJ/BUILD objects, persistent ids, protocol 4
// framing, and bad input: unsupported opcodes, underflow, unknown memo entries, every
// truncation and every single-byte corruption of valid pickles, the limits (the memory
// charged included, and running out of memory), and deep or cyclic graphs.
#include "compare/pickle_machine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "torch_file_builder.h"

namespace tensorscope::compare {
namespace {

using ::testing::HasSubstr;
using testing::PickleBytes;

std::string run_ok(PickleMachine& m, const std::string& bytes) {
  Status st = m.run(bytes, "test.pkl");
  EXPECT_TRUE(st) << st.message();
  return st.message();
}

std::string run_error(const std::string& bytes, PickleLimits limits = {}) {
  PickleMachine m(limits);
  Status st = m.run(bytes, "test.pkl");
  EXPECT_FALSE(st);
  return st.message();
}

const PickleValue* dict_get(const PickleMachine& m, const PickleObject& dict, const std::string& key) {
  for (const auto& [k, v] : dict.entries) {
    const PickleObject* s = m.as(k, PickleType::kString);
    if (s != nullptr && s->text == key) return &v;
  }
  return nullptr;
}

// A dict of every kind of value torch files use.
std::string kitchen_sink() {
  PickleBytes p;
  p.proto().empty_dict().put(0).mark();
  p.str("small").integer(5);
  p.str("neg").integer(-7);
  p.str("big").op(0x8a).op(2).op(0xd4).op(0xfe);                       // LONG1 -300
  p.str("huge").op(0x8a).op(9).raw(std::string(9, '\x01'));            // LONG1 over 8 bytes
  p.str("u16").op('M').op(0x34).op(0x12);                              // BININT2 0x1234
  p.str("float").op('G').raw(std::string("\x3f\xf8\0\0\0\0\0\0", 8));  // 1.5
  p.str("none").none();
  p.str("yes").boolean(true);
  p.str("bytes").op('C').op(3).raw("abc");
  p.str("short").op(0x8c).op(2).raw("hi");
  p.str("tuple3").integer(1).integer(2).integer(3).op(0x87);
  p.str("list").empty_list().put(1).mark().integer(10).integer(11).appends();
  p.str("self").get(0);
  p.str("list_again").get(1);
  p.setitems().stop();
  return p.bytes();
}

TEST(PickleMachineTest, ScalarsStringsContainersAndMemo) {
  PickleMachine m;
  run_ok(m, kitchen_sink());
  const PickleObject* d = m.as(m.root(), PickleType::kDict);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->entries.size(), 14u);
  EXPECT_EQ(dict_get(m, *d, "small")->integer, 5);
  EXPECT_EQ(dict_get(m, *d, "neg")->integer, -7);
  EXPECT_EQ(dict_get(m, *d, "big")->integer, -300);
  EXPECT_EQ(dict_get(m, *d, "u16")->integer, 0x1234);
  ASSERT_NE(m.as(*dict_get(m, *d, "huge"), PickleType::kBigInt), nullptr);
  EXPECT_EQ(m.as(*dict_get(m, *d, "huge"), PickleType::kBigInt)->text.size(), 9u);
  EXPECT_EQ(dict_get(m, *d, "float")->kind, PickleKind::kFloat);
  EXPECT_DOUBLE_EQ(dict_get(m, *d, "float")->real, 1.5);
  EXPECT_EQ(dict_get(m, *d, "none")->kind, PickleKind::kNone);
  EXPECT_TRUE(dict_get(m, *d, "yes")->boolean);
  EXPECT_EQ(m.as(*dict_get(m, *d, "bytes"), PickleType::kBytes)->text, "abc");
  EXPECT_EQ(m.as(*dict_get(m, *d, "short"), PickleType::kString)->text, "hi");
  const PickleObject* t = m.as(*dict_get(m, *d, "tuple3"), PickleType::kTuple);
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->items.size(), 3u);
  EXPECT_EQ(t->items[2].integer, 3);
  const PickleObject* l = m.as(*dict_get(m, *d, "list"), PickleType::kList);
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->items.size(), 2u);
  EXPECT_EQ(l->items[1].integer, 11);
  // The memo hands out the same objects: the dict itself, the list again.
  EXPECT_EQ(dict_get(m, *d, "self")->ref, m.root().ref);
  EXPECT_EQ(dict_get(m, *d, "list_again")->ref, dict_get(m, *d, "list")->ref);
}

TEST(PickleMachineTest, GlobalsBecomeInertObjects) {
  PickleBytes p;
  p.proto();
  p.global("collections", "OrderedDict").empty_tuple().reduce();  // a plain dict
  p.mark().str("w").global("os", "system").mark().str("rm -rf /").tuple().reduce().setitems();
  p.empty_dict().str("_metadata").none().setitem().build();  // state on the OrderedDict
  p.stop();
  PickleMachine m;
  run_ok(m, p.bytes());
  const PickleObject* d = m.as(m.root(), PickleType::kDict);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->has_state);
  const PickleValue* w = dict_get(m, *d, "w");
  ASSERT_NE(w, nullptr);
  const PickleObject* call = m.as(*w, PickleType::kObject);
  ASSERT_NE(call, nullptr);  // recorded, never called
  EXPECT_TRUE(m.is_global(m.call(*call).callable, "os", "system"));
  EXPECT_EQ(m.global_name(m.call(*call).callable), "os.system");
  const PickleObject* args = m.as(m.call(*call).args, PickleType::kTuple);
  ASSERT_NE(args, nullptr);
  EXPECT_EQ(m.as(args->items[0], PickleType::kString)->text, "rm -rf /");

  // NEWOBJ + BUILD (a TorchScript module as torch::save writes it), BINPERSID.
  PickleBytes q;
  q.proto().global("__torch__", "Module").empty_tuple().newobj();
  q.empty_dict().mark().str("0").mark().str("storage").str("key").tuple().binpersid().setitems();
  q.build().stop();
  PickleMachine n;
  run_ok(n, q.bytes());
  const PickleObject* obj = n.as(n.root(), PickleType::kObject);
  ASSERT_NE(obj, nullptr);
  EXPECT_TRUE(n.is_global(n.call(*obj).callable, "__torch__", "Module"));
  ASSERT_TRUE(obj->has_state);
  const PickleObject* state = n.as(n.call(*obj).state, PickleType::kDict);
  ASSERT_NE(state, nullptr);
  const PickleObject* pid = n.as(*dict_get(n, *state, "0"), PickleType::kPersistentId);
  ASSERT_NE(pid, nullptr);
  ASSERT_EQ(pid->items.size(), 1u);
  EXPECT_NE(n.as(pid->items[0], PickleType::kTuple), nullptr);
}

TEST(PickleMachineTest, Protocol4FramesStackGlobalAndMemoize) {
  PickleBytes p;
  p.proto(4).op(0x95).raw(std::string("\x20\0\0\0\0\0\0\0", 8));   // FRAME of 32 bytes
  p.op(0x8c).op(11).raw("collections").op(0x94);                   // MEMOIZE -> 0
  p.op(0x8c).op(11).raw("OrderedDict").op(0x94);                   // 1
  p.op(0x93).op(0x94);                                             // STACK_GLOBAL, 2
  p.empty_tuple().reduce().op(0x94);                               // a dict, 3
  p.op(0x8d).raw(std::string("\x01\0\0\0\0\0\0\0", 8)).raw("k");   // BINUNICODE8
  p.op(0x8e).raw(std::string("\x02\0\0\0\0\0\0\0", 8)).raw("vv");  // BINBYTES8
  p.setitem();
  p.op(0x8f).mark().integer(1).integer(2).op(0x90);  // EMPTY_SET, ADDITEMS
  p.op('0');                                         // POP the set
  p.op('h').op(1).op('2').op('0').op('0');           // BINGET, DUP, POP, POP
  p.stop();
  PickleMachine m;
  run_ok(m, p.bytes());
  const PickleObject* d = m.as(m.root(), PickleType::kDict);
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->entries.size(), 1u);
  EXPECT_EQ(m.as(d->entries[0].first, PickleType::kString)->text, "k");
  EXPECT_EQ(m.as(d->entries[0].second, PickleType::kBytes)->text, "vv");
}

TEST(PickleMachineTest, BadInputIsAnErrorWithTheOffset) {
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {std::string("\x80\x02I1\n.", 6), "unsupported opcode 0x49 ('I') (opcode at offset 2)"},
      {std::string("\x80\x02\x82\x01.", 5), "unsupported opcode 0x82"},  // EXT1
      {std::string("\x80\x06N.", 4), "protocol 6"},
      {std::string("\x80\x02R.", 4), "stack underflow"},
      {std::string("\x80\x02h\x05.", 5), "memo entry 5 was never stored"},
      {std::string("\x80\x02N", 3), "no STOP opcode"},
      {std::string("\x80\x02.", 3), "STOP with an empty stack"},
      {std::string("\x80\x02(N.", 5), "STOP inside an open MARK"},
      {std::string("\x80\x02]K\x01K\x02s.", 9), "SETITEM(S) on a list"},
      {std::string("\x80\x02}(K\x01u.", 7), "odd number"},
      {std::string("\x80\x02t.", 4), "no MARK to close"},
      {std::string("\x80\x02X\xff\xff\xff\x7f", 7), "truncated: a string of 2147483647 bytes"},
      {std::string("\x80\x02"
                   "cos\nsystem",
                   11),
       "truncated: line without its newline"},
      {std::string("\x80\x02"
                   "c",
                   3) +
           std::string(5000, 'a') + "\n",
       "line longer than"},
      {std::string("\x80\x02NK\x01R.", 7), "REDUCE arguments are not a tuple"},
      {std::string("\x80\x02(N\x8c\x01"
                   "a\x93.",
                   9),
       "STACK_GLOBAL without two strings"},
  };
  for (const Case& c : cases) {
    const std::string message = run_error(c.bytes);
    EXPECT_THAT(message, HasSubstr(c.message)) << c.message;
    EXPECT_THAT(message, HasSubstr("test.pkl: corrupt or unsupported pickle"));
  }
}

// Every strict prefix of a valid pickle is an error, never a crash or a hang.
TEST(PickleMachineTest, EveryTruncationIsAnError) {
  PickleBytes torch_style;
  torch_style.proto().tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1}).stop();
  for (const std::string& full : {kitchen_sink(), torch_style.bytes()}) {
    PickleMachine whole;
    run_ok(whole, full);
    for (size_t len = 0; len < full.size(); ++len) {
      PickleMachine m;
      Status st = m.run(full.substr(0, len), "test.pkl");
      EXPECT_FALSE(st) << "length " << len;
    }
  }
}

// Every single-byte corruption: accepted or refused, never a crash.
TEST(PickleMachineTest, EverySingleByteCorruptionIsHandled) {
  const std::string full = kitchen_sink();
  size_t refused = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (int value : std::vector<int>{0x00, 0xff, '(', 'R', 'h', 'u', 'e', 0x8a, 'X', '.'}) {
      std::string bad = full;
      bad[i] = static_cast<char>(value);
      PickleMachine m;
      if (!m.run(bad, "test.pkl")) ++refused;
    }
  }
  EXPECT_GT(refused, 0u);
}

TEST(PickleMachineTest, LimitsAreEnforced) {
  PickleLimits small;
  small.max_stack = 8;
  std::string many = "\x80\x02";
  for (int i = 0; i < 9; ++i) many += "N";
  EXPECT_THAT(run_error(many + ".", small), HasSubstr("stack deeper than 8"));

  small = {};
  small.max_marks = 4;
  EXPECT_THAT(run_error("\x80\x02(((((N.", small), HasSubstr("more than 4 nested MARKs"));

  small = {};
  small.max_memo = 2;  // indices 0 and 1
  EXPECT_THAT(run_error(std::string("\x80\x02Nq\x01q\x02q\x03.", 10), small),
              HasSubstr("memo index 2 out of range (more than 2 memo entries)"));
  // Storing the same index again is not a new entry.
  PickleMachine reuse(small);
  EXPECT_TRUE(reuse.run(std::string("\x80\x02Nq\x01q\x01q\x01.", 10), "test.pkl"));

  small = {};
  small.max_objects = 3;
  EXPECT_THAT(run_error("\x80\x02]]]].", small), HasSubstr("more than 3 objects"));

  small = {};
  small.max_items = 4;
  EXPECT_THAT(run_error("\x80\x02](NNNNNe.", small), HasSubstr("more than 4 container items"));
}

// Deeply nested and self-referencing graphs are built and destroyed without recursion.
TEST(PickleMachineTest, DeepAndCyclicGraphs) {
  const size_t depth = 200000;
  std::string deep = "\x80\x02";
  deep.append(depth, ']');
  deep.append(depth - 1, 'a');  // each list appended into the one below it
  deep += ".";
  {
    PickleMachine m;
    run_ok(m, deep);
    EXPECT_EQ(m.object_count(), depth);
  }
  PickleMachine cyclic;
  run_ok(cyclic,
         std::string("\x80\x02]q\x00h\x00"
                     "a.",
                     9));  // l = []; l.append(l)
  const PickleObject* l = cyclic.as(cyclic.root(), PickleType::kList);
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->items.size(), 1u);
  EXPECT_EQ(l->items[0].ref, cyclic.root().ref);
}

// Everything the machine allocates is charged against max_bytes; strings are views of
// the input, never copied.
TEST(PickleMachineTest, MemoryIsChargedAndBounded) {
  // 1M empty lists, each popped at once: 2 bytes of input per object.
  std::string lists = "\x80\x02";
  for (int i = 0; i < 1000000; ++i) lists += "]0";
  lists += "N.";
  {
    PickleMachine m;
    run_ok(m, lists);
    EXPECT_GE(m.bytes_charged(), 1000000 * sizeof(PickleObject));
    EXPECT_LE(m.bytes_charged(), 1000000 * sizeof(PickleObject) + (size_t{2} << 20));
  }
  PickleLimits small;
  small.max_bytes = size_t{8} << 20;
  EXPECT_THAT(run_error(lists, small), HasSubstr("it needs more than 8 MiB of memory"));

  // At the default limits the worst input (3M objects from 6 MB) stops at the object
  // cap, well under max_bytes.
  std::string more = "\x80\x02";
  for (int i = 0; i < 3000000; ++i) more += "]0";
  more += "N.";
  PickleMachine capped;
  Status st = capped.run(more, "test.pkl");
  ASSERT_FALSE(st);
  EXPECT_THAT(st.message(), HasSubstr("more than 2097152 objects"));
  EXPECT_LE(capped.bytes_charged(), PickleLimits{}.max_bytes);
  EXPECT_LE(capped.bytes_charged(), size_t{200} << 20);

  // Container items are charged by capacity: 1M Nones appended one at a time.
  std::string appended = "\x80\x02]";
  for (int i = 0; i < 1000000; ++i) appended += "Na";
  appended += ".";
  PickleMachine items;
  run_ok(items, appended);
  EXPECT_GE(items.bytes_charged(), 1000000 * sizeof(PickleValue));
  small = {};
  small.max_bytes = size_t{4} << 20;
  EXPECT_THAT(run_error(appended, small), HasSubstr("it needs more than 4 MiB of memory"));
}

// STACK_GLOBAL of a memoized 4000-byte module and name, 100000 times: each global is
// an object viewing the two strings (copying them took 800 MB).
TEST(PickleMachineTest, GlobalsViewTheirStrings) {
  PickleBytes p;
  p.proto().str(std::string(4000, 'm')).put(0).pop().str(std::string(4000, 'n')).put(1).pop();
  p.empty_list();
  for (int i = 0; i < 100000; ++i) p.get(0).get(1).op(0x93).op('a');
  PickleMachine m;
  run_ok(m, p.stop().bytes());
  EXPECT_LE(m.bytes_charged(), size_t{16} << 20);
  const PickleObject* list = m.as(m.root(), PickleType::kList);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->items.size(), 100000u);
  EXPECT_EQ(m.global_name(list->items[99999]), std::string(4000, 'm') + "." + std::string(4000, 'n'));

  // A module or name over 4096 bytes is refused, as GLOBAL's lines are.
  PickleBytes q;
  q.proto().str(std::string(4097, 'm')).str("name").op(0x93).stop();
  EXPECT_THAT(run_error(q.bytes()), HasSubstr("STACK_GLOBAL module or name longer than 4096 bytes"));
}

// Memo slots are a table up to the highest index stored (charged), indices up to
// max_memo - 1; MEMOIZE numbers from the count of entries stored, as Python does.
TEST(PickleMachineTest, MemoIndicesAreBounded) {
  const uint32_t last = static_cast<uint32_t>(PickleLimits{}.max_memo - 1);
  PickleBytes p;
  p.proto().integer(7).long_put(last).pop().long_get(last).stop();
  PickleMachine m;
  run_ok(m, p.bytes());
  EXPECT_EQ(m.root().integer, 7);
  EXPECT_GE(m.bytes_charged(), PickleLimits{}.max_memo * sizeof(PickleValue));
  EXPECT_LE(m.bytes_charged(), PickleLimits{}.max_bytes);

  PickleBytes beyond;
  beyond.proto().none().long_put(last + 1).stop();
  EXPECT_THAT(run_error(beyond.bytes()), HasSubstr("memo index " + std::to_string(last + 1) + " out of range"));
  PickleLimits small;
  small.max_bytes = size_t{16} << 20;
  EXPECT_THAT(run_error(p.bytes(), small), HasSubstr("it needs more than 16 MiB of memory"));

  // MEMOIZE after BINPUT 5: entry 1 (one entry stored so far).
  PickleMachine memoize;
  run_ok(memoize, std::string("\x80\x04K\x07q\x05\x30K\x08\x94\x30h\x01.", 14));
  EXPECT_EQ(memoize.root().integer, 8);
}

// An allocation failing (here under a limit on the address space, with max_bytes out
// of the way) is an error, never an exception.
TEST(PickleMachineTest, RunningOutOfMemoryIsAnError) {
  if (testing::kSanitizedBuild) GTEST_SKIP() << "no address-space limit under a sanitizer";
  std::string lists = "\x80\x02";
  for (int i = 0; i < 4000000; ++i) lists += "]0";
  lists += "N.";
  EXPECT_EXIT(
      {
        if (!testing::limit_address_space(64)) std::_Exit(3);
        PickleLimits unlimited;
        unlimited.max_objects = size_t{1} << 30;
        unlimited.max_bytes = size_t{1} << 40;
        PickleMachine m(unlimited);
        Status st = m.run(lists, "test.pkl");
        std::fprintf(stderr, "%s\n", st ? "ran" : st.message().c_str());
        std::_Exit(!st && st.message().find("test.pkl: out of memory while unpickling") == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tensorscope::compare
