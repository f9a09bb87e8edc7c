// pickle_machine.h — a minimal, safe unpickler: turns a Python pickle (the data.pkl of a
// PyTorch archive) into an inert object graph. Nothing is ever imported, called or
// executed.
//
// Used by the `tensorscope compare` command-line tool (compare/torch_file_source.cc);
// no daemon process uses it.
// Opcodes: the binary ones of protocols 2 to 5 (what torch.save, torch::save and
// torch::pickle_save write: PROTO, FRAME, GLOBAL, STACK_GLOBAL, BINPUT, LONG_BINPUT,
// MEMOIZE, BINGET, LONG_BINGET, MARK, POP, POP_MARK, DUP, EMPTY_DICT/LIST/TUPLE/SET,
// DICT, LIST, TUPLE, TUPLE1-3, FROZENSET, BININT, BININT1, BININT2, LONG1, LONG4,
// BINFLOAT, BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING,
// BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8, NONE, NEWTRUE, NEWFALSE, REDUCE,
// BUILD, NEWOBJ, NEWOBJ_EX, SETITEM, SETITEMS, APPEND, APPENDS, ADDITEMS, BINPERSID,
// STOP). The text opcodes of protocol 0/1 (INT, STRING, GET, PUT, INST, ...), the
// extension registry (EXT1/2/4) and out-of-band buffers are refused ("unsupported
// opcode").
// Semantics: GLOBAL gives an opaque kGlobal (module, name); REDUCE, NEWOBJ and
// NEWOBJ_EX give a kObject recording the callable and its arguments (its PickleCall) —
// except `collections.OrderedDict()` (no arguments), which gives an ordinary kDict.
// BUILD stores its state in the object's PickleCall; SETITEM(S) and APPEND(S) on a
// kObject record the items on it (a dict or list subclass). BINPERSID gives a
// kPersistentId holding the id. Interpreting objects (torch tensors) is left to the
// caller.
// Bounds: the stack, the memo, the mark depth, the number of objects and the total
// number of container items are capped (PickleLimits); so are the memo indices (below
// max_memo: Python and libtorch number memo entries 0, 1, 2, ...) and the module and
// name of a GLOBAL or STACK_GLOBAL (4096 bytes each). Every read is checked against the
// input's end. Errors name `what` (e.g. "x.pt: archive/data.pkl"), the problem and the
// byte offset.
// Memory: the machine keeps one copy of the input (strings are views into it, never
// copied) and charges everything else it allocates against PickleLimits::max_bytes
// (default 256 MiB) before allocating it: objects (88 bytes each) and call records (64)
// by chunks of 1024, container items by capacity (16 bytes each, 32 per dict entry),
// memo slots up to the highest index stored, stack and mark slots by capacity; growing
// a buffer charges the new one before the old one is freed. So a run holds at most the
// input plus max_bytes plus the allocator's overhead (about 10% for the smallest
// containers), whatever the input: with torch_file_source's 32 MiB cap on data.pkl,
// under 320 MiB. For instance 4 MB of "]0" makes the most objects, 2^21 (176 MiB);
// inputs richer in calls, items or memo slots stop at max_bytes. A state_dict costs
// about 1.5 KB per tensor (about 10 objects, 15 items, 8 memo entries: torch.save of
// 100000 tensors charges 152 MB), so the defaults fit some 170000 tensors. An
// allocation failure (e.g. under a tight ulimit) is an error too, never an exception.
// Objects live in chunked arenas (never moved, never copied when growing) and refer to
// each other by index, so cyclic or deeply nested graphs are destroyed without
// recursion.
// Thread safety: a PickleMachine is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorscope/base/status.h"

namespace tensorscope::compare {

enum class PickleKind : uint8_t { kNone, kBool, kInt, kFloat, kRef };

// A value on the stack or in a container: an immediate scalar, or a reference to an
// object of the machine's arena.
struct PickleValue {
  PickleKind kind = PickleKind::kNone;
  union {
    bool boolean;
    int64_t integer;
    double real;
    uint32_t ref;
  };
  PickleValue() : integer(0) {}
  static PickleValue none() { return PickleValue(); }
  static PickleValue of_bool(bool b) {
    PickleValue v;
    v.kind = PickleKind::kBool;
    v.boolean = b;
    return v;
  }
  static PickleValue of_int(int64_t i) {
    PickleValue v;
    v.kind = PickleKind::kInt;
    v.integer = i;
    return v;
  }
  static PickleValue of_float(double f) {
    PickleValue v;
    v.kind = PickleKind::kFloat;
    v.real = f;
    return v;
  }
  static PickleValue of_ref(uint32_t r) {
    PickleValue v;
    v.kind = PickleKind::kRef;
    v.ref = r;
    return v;
  }
};

enum class PickleType : uint8_t {
  kString,        // text: the UTF-8 bytes (not validated)
  kBytes,         // text: the bytes (BINSTRING, BINBYTES, BYTEARRAY8, ...)
  kBigInt,        // text: little-endian two's complement bytes (LONG1/LONG4 over 8 bytes)
  kTuple,         // items
  kList,          // items
  kSet,           // items (set and frozenset)
  kDict,          // entries, in insertion order
  kGlobal,        // text: module, name: qualified name
  kObject,        // callable(args) / cls.__new__(cls, *args) (see PickleCall); items, entries
  kPersistentId,  // items[0]: the persistent id
};

const char* pickle_type_name(PickleType type);

// What REDUCE / NEWOBJ / NEWOBJ_EX / BUILD recorded about an object.
struct PickleCall {
  PickleValue callable;  // kObject
  PickleValue args;      // kObject: a kTuple (kNone for NEWOBJ_EX's kwargs-only calls)
  PickleValue kwargs;    // kObject from NEWOBJ_EX: a kDict, else kNone
  PickleValue state;     // the BUILD argument (PickleObject::has_state)
};

struct PickleObject {
  static constexpr uint32_t kNoCall = UINT32_MAX;
  PickleType type = PickleType::kTuple;
  bool has_state = false;   // BUILD was applied (the state: PickleMachine::call(o).state)
  uint32_t call = kNoCall;  // the machine's record of it (kObject, or BUILD applied)
  std::string_view text;    // into the machine's copy of the input
  std::string_view name;
  std::vector<PickleValue> items;
  std::vector<std::pair<PickleValue, PickleValue>> entries;
};

struct PickleLimits {
  size_t max_stack = size_t{1} << 22;    // values on the stack
  size_t max_marks = size_t{1} << 16;    // open MARKs
  size_t max_memo = size_t{1} << 21;     // memo indices 0 .. max_memo - 1
  size_t max_objects = size_t{1} << 21;  // arena objects
  size_t max_items = size_t{1} << 23;    // container items in all (a dict entry counts 2)
  size_t max_bytes = size_t{256} << 20;  // all of the machine's memory but the input's copy
};

namespace pickle_detail {

// A growable array in fixed chunks: elements never move, growing never copies.
template <typename T>
class ChunkedArray {
 public:
  static constexpr size_t kChunk = 1024;
  static constexpr size_t kChunkBytes = kChunk * sizeof(T);
  size_t size() const { return size_; }
  // True when the next emplace_back() allocates a chunk (of kChunkBytes).
  bool full() const { return size_ == chunks_.size() * kChunk; }
  T& emplace_back() {
    if (full()) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }
  T& operator[](size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  const T& operator[](size_t i) const { return chunks_[i / kChunk][i % kChunk]; }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace pickle_detail

class PickleMachine {
 public:
  explicit PickleMachine(PickleLimits limits = {}) : limits_(limits) {}

  // Runs the pickle in `data` up to its STOP opcode (bytes after it are ignored); the
  // machine keeps `data` (move it in to avoid a copy). `what` names the input in error
  // messages. May be called once per machine.
  Status run(std::string data, const std::string& what);

  // The value STOP returned.
  PickleValue root() const { return root_; }
  size_t object_count() const { return objects_.size(); }
  // Bytes charged against PickleLimits::max_bytes so far.
  size_t bytes_charged() const { return charged_; }
  // ref must come from a value of this machine (kRef).
  const PickleObject& object(uint32_t ref) const { return objects_[ref]; }
  // The call record of an object (all kNone when it has none).
  const PickleCall& call(const PickleObject& o) const;
  // The object behind `v` when it is a reference to an object of `type`, else nullptr.
  const PickleObject* as(PickleValue v, PickleType type) const;
  // True when `v` is a kGlobal of exactly this module and name.
  bool is_global(PickleValue v, std::string_view module, std::string_view name) const;
  // "module.name" for a kGlobal, "" otherwise.
  std::string global_name(PickleValue v) const;

 private:
  Status run_opcodes();
  Status fail(const std::string& problem) const;
  Status charge(size_t bytes);
  // Makes room for `n` more elements in `v` (growing it at least twice), charged.
  template <typename V>
  Status make_room(V& v, size_t n);
  // Reserves `capacity` elements in `v`, charged (the old buffer's charge returned).
  template <typename V>
  Status grow_to(V& v, size_t capacity);
  StatusOr<uint32_t> new_object(PickleType type);
  StatusOr<PickleCall*> call_of(uint32_t ref);
  Status push(PickleValue v);
  Status count_items(size_t n);
  size_t available() const;  // values above the innermost mark
  StatusOr<PickleValue> pop();
  // Pops the innermost mark; the values above it are stack_[*first, end) (the caller
  // truncates the stack to *first).
  Status pop_mark(size_t* first);
  Status read_bytes(size_t n, std::string_view* out);
  Status read_line(std::string_view* out);
  Status push_text(PickleType type, size_t n);
  Status make_global(std::string_view module, std::string_view name);
  Status memo_put(uint64_t index);
  Status memo_get(uint64_t index);
  // Adds stack_[first, end) as items / entries of `target`, then truncates the stack.
  Status set_items(PickleValue target, size_t first);
  Status append_items(PickleValue target, size_t first);
  Status make_container(PickleType type, size_t first);
  Status reduce_to_object(PickleValue callable, PickleValue args, PickleValue kwargs);

  PickleLimits limits_;
  std::string what_;
  std::string data_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  size_t items_ = 0;
  size_t charged_ = 0;
  pickle_detail::ChunkedArray<PickleObject> objects_;
  pickle_detail::ChunkedArray<PickleCall> calls_;
  std::vector<PickleValue> stack_;
  std::vector<size_t> marks_;
  std::vector<PickleValue> memo_;  // by index; unset slots have kUnsetMemo as kind
  size_t memo_count_ = 0;          // set slots
  PickleValue root_;
};

}  // namespace tensorscope::compare
