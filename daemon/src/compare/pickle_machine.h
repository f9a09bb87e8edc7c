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
// NEWOBJ_EX give a kObject recording the callable and its arguments — except
// `collections.OrderedDict()` (no arguments), which gives an ordinary kDict. BUILD
// stores its state on the object; SETITEM(S) and APPEND(S) on a kObject record the
// items on it (a dict or list subclass). BINPERSID gives a kPersistentId holding the
// id. Interpreting objects (torch tensors) is left to the caller.
// Bounds: the stack, the memo, the mark depth, the number of objects and the total
// number of container items are capped (PickleLimits); memo indices are looked up, not
// used to size anything. Every read is checked against the input's end. Errors name
// `what` (e.g. "x.pt: archive/data.pkl"), the problem and the byte offset.
// Objects live in one arena and refer to each other by index, so cyclic or deeply
// nested graphs are destroyed without recursion.
// Thread safety: a PickleMachine is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorscope/shared/status.h"

namespace tensorscope::daemon {

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
  kObject,        // callable(args) / cls.__new__(cls, *args); items, entries, state
  kPersistentId,  // items[0]: the persistent id
};

const char* pickle_type_name(PickleType type);

struct PickleObject {
  PickleType type = PickleType::kTuple;
  bool has_state = false;  // BUILD was applied
  std::string text;
  std::string name;
  std::vector<PickleValue> items;
  std::vector<std::pair<PickleValue, PickleValue>> entries;
  PickleValue callable;  // kObject
  PickleValue args;      // kObject: a kTuple (kNone for NEWOBJ_EX's kwargs-only calls)
  PickleValue kwargs;    // kObject from NEWOBJ_EX: a kDict, else kNone
  PickleValue state;     // the BUILD argument
};

struct PickleLimits {
  size_t max_stack = size_t{1} << 22;    // values on the stack
  size_t max_marks = size_t{1} << 16;    // open MARKs
  size_t max_memo = size_t{1} << 22;     // memo entries
  size_t max_objects = size_t{1} << 21;  // arena objects
  size_t max_items = size_t{1} << 23;    // container items in all (a dict entry counts 2)
};

class PickleMachine {
 public:
  explicit PickleMachine(PickleLimits limits = {}) : limits_(limits) {}

  // Runs the pickle in `data` up to its STOP opcode (bytes after it are ignored).
  // `what` names the input in error messages. May be called once per machine.
  Status run(std::string_view data, const std::string& what);

  // The value STOP returned.
  PickleValue root() const { return root_; }
  size_t object_count() const { return objects_.size(); }
  // ref must come from a value of this machine (kRef).
  const PickleObject& object(uint32_t ref) const { return objects_[ref]; }
  // The object behind `v` when it is a reference to an object of `type`, else nullptr.
  const PickleObject* as(PickleValue v, PickleType type) const;
  // True when `v` is a kGlobal of exactly this module and name.
  bool is_global(PickleValue v, std::string_view module, std::string_view name) const;
  // "module.name" for a kGlobal, "" otherwise.
  std::string global_name(PickleValue v) const;

 private:
  Status fail(const std::string& problem) const;
  StatusOr<uint32_t> new_object(PickleType type);
  Status push(PickleValue v);
  Status count_items(size_t n);
  size_t available() const;  // values above the innermost mark
  StatusOr<PickleValue> pop();
  // Moves the values above the innermost mark into `out` and pops the mark.
  Status pop_mark(std::vector<PickleValue>* out);
  Status read_bytes(size_t n, std::string_view* out);
  Status read_line(std::string_view* out);
  Status push_text(PickleType type, size_t n);
  Status make_global(std::string module, std::string name);
  Status memo_put(uint64_t index);
  Status memo_get(uint64_t index);
  Status set_items(PickleValue target, std::vector<PickleValue>&& kv);
  Status append_items(PickleValue target, std::vector<PickleValue>&& values);
  Status make_tuple(std::vector<PickleValue>&& values);
  Status reduce_to_object(PickleValue callable, PickleValue args, PickleValue kwargs);

  PickleLimits limits_;
  std::string what_;
  std::string_view data_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  size_t items_ = 0;
  std::vector<PickleObject> objects_;
  std::vector<PickleValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleValue> memo_;
  PickleValue root_;
};

}  // namespace tensorscope::daemon
