#include "compare/pickle_machine.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

namespace tensorscope::compare {
namespace {

// Opcodes (Python's pickletools names).
enum : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinString = 'T',
  kShortBinString = 'U',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kProto = 0x80,
  kNewObj = 0x81,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kEmptySet = 0x8f,
  kAddItems = 0x90,
  kFrozenSet = 0x91,
  kNewObjEx = 0x92,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
  kByteArray8 = 0x96,
};

constexpr size_t kMaxLineBytes = 4096;  // GLOBAL / STACK_GLOBAL module and name

// The kind of a memo slot that was never stored.
constexpr PickleKind kUnsetMemo = static_cast<PickleKind>(0xff);

std::string byte_size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  return std::to_string(bytes) + " bytes";
}

uint64_t le_uint(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

std::string opcode_text(uint8_t op) {
  char text[32];
  if (op >= 0x20 && op < 0x7f) {
    std::snprintf(text, sizeof(text), "0x%02x ('%c')", op, op);
  } else {
    std::snprintf(text, sizeof(text), "0x%02x", op);
  }
  return text;
}

// The sizes pickle_machine.h documents (on 64-bit targets).
static_assert(sizeof(void*) != 8 || sizeof(PickleObject) == 88);
static_assert(sizeof(PickleCall) == 64);

}  // namespace

const char* pickle_type_name(PickleType type) {
  switch (type) {
    case PickleType::kString: return "str";
    case PickleType::kBytes: return "bytes";
    case PickleType::kBigInt: return "int";
    case PickleType::kTuple: return "tuple";
    case PickleType::kList: return "list";
    case PickleType::kSet: return "set";
    case PickleType::kDict: return "dict";
    case PickleType::kGlobal: return "global";
    case PickleType::kObject: return "object";
    case PickleType::kPersistentId: return "persistent id";
  }
  return "?";
}

const PickleObject* PickleMachine::as(PickleValue v, PickleType type) const {
  if (v.kind != PickleKind::kRef || v.ref >= objects_.size()) return nullptr;
  const PickleObject& o = objects_[v.ref];
  return o.type == type ? &o : nullptr;
}

const PickleCall& PickleMachine::call(const PickleObject& o) const {
  static const PickleCall kNoCall;
  return o.call == PickleObject::kNoCall ? kNoCall : calls_[o.call];
}

bool PickleMachine::is_global(PickleValue v, std::string_view module, std::string_view name) const {
  const PickleObject* g = as(v, PickleType::kGlobal);
  return g != nullptr && g->text == module && g->name == name;
}

std::string PickleMachine::global_name(PickleValue v) const {
  const PickleObject* g = as(v, PickleType::kGlobal);
  if (g == nullptr) return std::string();
  std::string out(g->text);
  out += '.';
  out += g->name;
  return out;
}

Status PickleMachine::fail(const std::string& problem) const {
  return Status::error(what_ + ": corrupt or unsupported pickle: " + problem + " (opcode at offset " +
                       std::to_string(op_pos_) + ")");
}

Status PickleMachine::charge(size_t bytes) {
  if (bytes > limits_.max_bytes - charged_) {
    return fail("it needs more than " + byte_size_text(limits_.max_bytes) + " of memory");
  }
  charged_ += bytes;
  return Status::ok();
}

template <typename V>
Status PickleMachine::make_room(V& v, size_t n) {
  if (n <= v.capacity() - v.size()) return Status::ok();
  return grow_to(v, std::max({v.size() + n, 2 * v.capacity(), size_t{4}}));
}

template <typename V>
Status PickleMachine::grow_to(V& v, size_t capacity) {
  constexpr size_t kElem = sizeof(typename V::value_type);
  if (capacity > limits_.max_bytes / kElem) {
    return fail("it needs more than " + byte_size_text(limits_.max_bytes) + " of memory");
  }
  const size_t old_bytes = v.capacity() * kElem;
  Status charged = charge(capacity * kElem);  // the new buffer, before the old one is freed
  if (!charged) return charged;
  v.reserve(capacity);
  charged_ -= old_bytes;
  return Status::ok();
}

StatusOr<uint32_t> PickleMachine::new_object(PickleType type) {
  if (objects_.size() >= limits_.max_objects) {
    return fail("more than " + std::to_string(limits_.max_objects) + " objects");
  }
  if (objects_.full()) {
    Status charged = charge(decltype(objects_)::kChunkBytes);
    if (!charged) return charged;
  }
  objects_.emplace_back().type = type;
  return static_cast<uint32_t>(objects_.size() - 1);
}

StatusOr<PickleCall*> PickleMachine::call_of(uint32_t ref) {
  PickleObject& o = objects_[ref];
  if (o.call == PickleObject::kNoCall) {
    if (calls_.full()) {
      Status charged = charge(decltype(calls_)::kChunkBytes);
      if (!charged) return charged;
    }
    calls_.emplace_back();
    o.call = static_cast<uint32_t>(calls_.size() - 1);
  }
  return &calls_[o.call];
}

Status PickleMachine::push(PickleValue v) {
  if (stack_.size() >= limits_.max_stack) {
    return fail("stack deeper than " + std::to_string(limits_.max_stack) + " values");
  }
  Status room = make_room(stack_, 1);
  if (!room) return room;
  stack_.push_back(v);
  return Status::ok();
}

Status PickleMachine::count_items(size_t n) {
  if (n > limits_.max_items - items_) {
    return fail("more than " + std::to_string(limits_.max_items) + " container items");
  }
  items_ += n;
  return Status::ok();
}

size_t PickleMachine::available() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }

StatusOr<PickleValue> PickleMachine::pop() {
  if (available() == 0) return fail("stack underflow");
  const PickleValue v = stack_.back();
  stack_.pop_back();
  return v;
}

Status PickleMachine::pop_mark(size_t* first) {
  if (marks_.empty()) return fail("no MARK to close");
  *first = marks_.back();
  marks_.pop_back();
  return Status::ok();
}

Status PickleMachine::read_bytes(size_t n, std::string_view* out) {
  if (n > data_.size() - pos_) {
    return fail("truncated: needs " + std::to_string(n) + " more bytes, " + std::to_string(data_.size() - pos_) +
                " left");
  }
  *out = std::string_view(data_).substr(pos_, n);
  pos_ += n;
  return Status::ok();
}

Status PickleMachine::read_line(std::string_view* out) {
  const size_t limit = std::min(data_.size(), pos_ + kMaxLineBytes + 1);
  for (size_t i = pos_; i < limit; ++i) {
    if (data_[i] == '\n') {
      *out = std::string_view(data_).substr(pos_, i - pos_);
      pos_ = i + 1;
      return Status::ok();
    }
  }
  return fail(limit == data_.size() ? "truncated: line without its newline"
                                    : "line longer than " + std::to_string(kMaxLineBytes) + " bytes");
}

Status PickleMachine::push_text(PickleType type, size_t n) {
  std::string_view bytes;
  Status read = read_bytes(n, &bytes);
  if (!read) return read;
  auto ref = new_object(type);
  if (!ref) return ref.status();
  objects_[*ref].text = bytes;
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::make_global(std::string_view module, std::string_view name) {
  auto ref = new_object(PickleType::kGlobal);
  if (!ref) return ref.status();
  objects_[*ref].text = module;
  objects_[*ref].name = name;
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::memo_put(uint64_t index) {
  if (available() == 0) return fail("memo store from an empty stack");
  if (index >= limits_.max_memo) {
    return fail("memo index " + std::to_string(index) + " out of range (more than " + std::to_string(limits_.max_memo) +
                " memo entries)");
  }
  const size_t slot = static_cast<size_t>(index);
  if (slot >= memo_.size()) {
    if (slot >= memo_.capacity()) {
      // Grow at least twice, but never past max_memo slots (slot < max_memo).
      const size_t want = std::min(std::max({slot + 1, 2 * memo_.capacity(), size_t{16}}), limits_.max_memo);
      Status room = grow_to(memo_, want);
      if (!room) return room;
    }
    PickleValue unset;
    unset.kind = kUnsetMemo;
    memo_.resize(slot + 1, unset);
  }
  if (memo_[slot].kind == kUnsetMemo) ++memo_count_;
  memo_[slot] = stack_.back();
  return Status::ok();
}

Status PickleMachine::memo_get(uint64_t index) {
  if (index >= memo_.size() || memo_[static_cast<size_t>(index)].kind == kUnsetMemo) {
    return fail("memo entry " + std::to_string(index) + " was never stored");
  }
  return push(memo_[static_cast<size_t>(index)]);
}

Status PickleMachine::set_items(PickleValue target, size_t first) {
  const size_t n = stack_.size() - first;
  if (n % 2 != 0) return fail("SETITEMS with an odd number of values");
  if (target.kind != PickleKind::kRef) return fail("SETITEM(S) on a non-object");
  PickleObject& o = objects_[target.ref];
  if (o.type != PickleType::kDict && o.type != PickleType::kObject) {
    return fail(std::string("SETITEM(S) on a ") + pickle_type_name(o.type));
  }
  Status st = count_items(n);
  if (!st) return st;
  if (!(st = make_room(o.entries, n / 2))) return st;
  for (size_t i = first; i < stack_.size(); i += 2) o.entries.emplace_back(stack_[i], stack_[i + 1]);
  stack_.resize(first);
  return Status::ok();
}

Status PickleMachine::append_items(PickleValue target, size_t first) {
  if (target.kind != PickleKind::kRef) return fail("APPEND(S) on a non-object");
  PickleObject& o = objects_[target.ref];
  if (o.type != PickleType::kList && o.type != PickleType::kSet && o.type != PickleType::kObject) {
    return fail(std::string("APPEND(S)/ADDITEMS on a ") + pickle_type_name(o.type));
  }
  const size_t n = stack_.size() - first;
  Status st = count_items(n);
  if (!st) return st;
  if (!(st = make_room(o.items, n))) return st;
  o.items.insert(o.items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(first), stack_.end());
  stack_.resize(first);
  return Status::ok();
}

Status PickleMachine::make_container(PickleType type, size_t first) {
  const size_t n = stack_.size() - first;
  Status st = count_items(n);
  if (!st) return st;
  auto ref = new_object(type);
  if (!ref) return ref.status();
  PickleObject& o = objects_[*ref];
  if (!(st = make_room(o.items, n))) return st;
  o.items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(first), stack_.end());
  stack_.resize(first);
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::reduce_to_object(PickleValue callable, PickleValue args, PickleValue kwargs) {
  const PickleObject* arg_tuple = as(args, PickleType::kTuple);
  if (is_global(callable, "collections", "OrderedDict") && arg_tuple != nullptr && arg_tuple->items.empty() &&
      kwargs.kind == PickleKind::kNone) {
    auto ref = new_object(PickleType::kDict);
    if (!ref) return ref.status();
    return push(PickleValue::of_ref(*ref));
  }
  auto ref = new_object(PickleType::kObject);
  if (!ref) return ref.status();
  auto call = call_of(*ref);
  if (!call) return call.status();
  (*call)->callable = callable;
  (*call)->args = args;
  (*call)->kwargs = kwargs;
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::run(std::string data, const std::string& what) {
  try {
    what_ = what;
    data_ = std::move(data);
    pos_ = 0;
    return run_opcodes();
  } catch (const std::bad_alloc&) {
    return Status::error(what_ + ": out of memory while unpickling (opcode at offset " + std::to_string(op_pos_) + ")");
  } catch (const std::exception& e) {
    return Status::error(what_ + ": cannot unpickle: " + e.what() + " (opcode at offset " + std::to_string(op_pos_) +
                         ")");
  }
}

Status PickleMachine::run_opcodes() {
  Status st;
  size_t first = 0;
  // The base of the values above the innermost mark once it is popped.
  auto base = [this]() { return marks_.empty() ? size_t{0} : marks_.back(); };
  while (pos_ < data_.size()) {
    op_pos_ = pos_;
    const uint8_t op = static_cast<uint8_t>(data_[pos_++]);
    std::string_view arg;
    switch (op) {
      case kProto: {
        if (!(st = read_bytes(1, &arg))) return st;
        const uint8_t version = static_cast<uint8_t>(arg[0]);
        if (version > 5) return fail("protocol " + std::to_string(version) + " (at most 5 is known)");
        break;
      }
      case kFrame:
        // The frame length only helps buffering readers; opcodes simply continue.
        if (!(st = read_bytes(8, &arg))) return st;
        break;
      case kStop: {
        if (available() == 0 || !marks_.empty()) {
          return fail(available() == 0 ? "STOP with an empty stack" : "STOP inside an open MARK");
        }
        root_ = stack_.back();
        return Status::ok();
      }
      case kMark:
        if (marks_.size() >= limits_.max_marks) {
          return fail("more than " + std::to_string(limits_.max_marks) + " nested MARKs");
        }
        if (!(st = make_room(marks_, 1))) return st;
        marks_.push_back(stack_.size());
        break;
      case kPop:
        if (!marks_.empty() && stack_.size() == marks_.back()) {
          marks_.pop_back();  // Python pops the mark itself then
        } else if (auto v = pop(); !v) {
          return v.status();
        }
        break;
      case kPopMark:
        if (!(st = pop_mark(&first))) return st;
        stack_.resize(first);
        break;
      case kDup:
        if (available() == 0) return fail("DUP on an empty stack");
        if (!(st = push(stack_.back()))) return st;
        break;
      case kNone:
        if (!(st = push(PickleValue::none()))) return st;
        break;
      case kNewTrue:
      case kNewFalse:
        if (!(st = push(PickleValue::of_bool(op == kNewTrue)))) return st;
        break;
      case kBinInt:
        if (!(st = read_bytes(4, &arg))) return st;
        if (!(st = push(PickleValue::of_int(
                  static_cast<int32_t>(le_uint(reinterpret_cast<const unsigned char*>(arg.data()), 4))))))
          return st;
        break;
      case kBinInt1:
      case kBinInt2: {
        const size_t n = op == kBinInt1 ? 1 : 2;
        if (!(st = read_bytes(n, &arg))) return st;
        if (!(st = push(PickleValue::of_int(
                  static_cast<int64_t>(le_uint(reinterpret_cast<const unsigned char*>(arg.data()), n))))))
          return st;
        break;
      }
      case kLong1:
      case kLong4: {
        const size_t len_bytes = op == kLong1 ? 1 : 4;
        if (!(st = read_bytes(len_bytes, &arg))) return st;
        const uint64_t n = le_uint(reinterpret_cast<const unsigned char*>(arg.data()), len_bytes);
        if (op == kLong4 && (n & 0x80000000u)) return fail("LONG4 with a negative length");
        if (n > 8) {
          if (!(st = push_text(PickleType::kBigInt, static_cast<size_t>(n)))) return st;
          break;
        }
        if (!(st = read_bytes(static_cast<size_t>(n), &arg))) return st;
        uint64_t v = le_uint(reinterpret_cast<const unsigned char*>(arg.data()), arg.size());
        if (n > 0 && n < 8 && (static_cast<uint8_t>(arg[n - 1]) & 0x80)) {
          v |= ~uint64_t{0} << (8 * n);  // sign-extend
        }
        if (!(st = push(PickleValue::of_int(static_cast<int64_t>(v))))) return st;
        break;
      }
      case kBinFloat: {
        if (!(st = read_bytes(8, &arg))) return st;
        uint64_t bits = 0;
        for (size_t i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(arg[i]);
        double d;
        std::memcpy(&d, &bits, sizeof(d));
        if (!(st = push(PickleValue::of_float(d)))) return st;
        break;
      }
      case kBinUnicode:
      case kShortBinUnicode:
      case kBinUnicode8:
      case kBinString:
      case kShortBinString:
      case kBinBytes:
      case kShortBinBytes:
      case kBinBytes8:
      case kByteArray8: {
        const size_t len_bytes = (op == kShortBinUnicode || op == kShortBinString || op == kShortBinBytes) ? 1
            : (op == kBinUnicode8 || op == kBinBytes8 || op == kByteArray8)                                ? 8
                                                                                                           : 4;
        if (!(st = read_bytes(len_bytes, &arg))) return st;
        uint64_t n = le_uint(reinterpret_cast<const unsigned char*>(arg.data()), len_bytes);
        if (op == kBinString && (n & 0x80000000u)) return fail("BINSTRING with a negative length");
        if (n > data_.size() - pos_) {
          return fail("truncated: a string of " + std::to_string(n) + " bytes, " + std::to_string(data_.size() - pos_) +
                      " left");
        }
        const bool text = op == kBinUnicode || op == kShortBinUnicode || op == kBinUnicode8;
        if (!(st = push_text(text ? PickleType::kString : PickleType::kBytes, static_cast<size_t>(n)))) return st;
        break;
      }
      case kGlobal: {
        std::string_view module, name;
        if (!(st = read_line(&module))) return st;
        if (!(st = read_line(&name))) return st;
        if (!(st = make_global(module, name))) return st;
        break;
      }
      case kStackGlobal: {
        auto name = pop();
        if (!name) return name.status();
        auto module = pop();
        if (!module) return module.status();
        const PickleObject* n = as(*name, PickleType::kString);
        const PickleObject* m = as(*module, PickleType::kString);
        if (n == nullptr || m == nullptr) return fail("STACK_GLOBAL without two strings");
        if (n->text.size() > kMaxLineBytes || m->text.size() > kMaxLineBytes) {
          return fail("STACK_GLOBAL module or name longer than " + std::to_string(kMaxLineBytes) + " bytes");
        }
        if (!(st = make_global(m->text, n->text))) return st;
        break;
      }
      case kBinPut:
      case kLongBinPut: {
        const size_t n = op == kBinPut ? 1 : 4;
        if (!(st = read_bytes(n, &arg))) return st;
        if (!(st = memo_put(le_uint(reinterpret_cast<const unsigned char*>(arg.data()), n)))) return st;
        break;
      }
      case kMemoize:
        if (!(st = memo_put(memo_count_))) return st;
        break;
      case kBinGet:
      case kLongBinGet: {
        const size_t n = op == kBinGet ? 1 : 4;
        if (!(st = read_bytes(n, &arg))) return st;
        if (!(st = memo_get(le_uint(reinterpret_cast<const unsigned char*>(arg.data()), n)))) return st;
        break;
      }
      case kEmptyTuple:
        if (!(st = make_container(PickleType::kTuple, stack_.size()))) return st;
        break;
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = static_cast<size_t>(op - kTuple1 + 1);
        if (available() < n) return fail("stack underflow");
        if (!(st = make_container(PickleType::kTuple, stack_.size() - n))) return st;
        break;
      }
      case kTuple:
        if (!(st = pop_mark(&first))) return st;
        if (!(st = make_container(PickleType::kTuple, first))) return st;
        break;
      case kEmptyList:
      case kEmptyDict:
      case kEmptySet: {
        auto ref = new_object(op == kEmptyList       ? PickleType::kList
                                  : op == kEmptyDict ? PickleType::kDict
                                                     : PickleType::kSet);
        if (!ref) return ref.status();
        if (!(st = push(PickleValue::of_ref(*ref)))) return st;
        break;
      }
      case kList:
      case kFrozenSet:
        if (!(st = pop_mark(&first))) return st;
        if (!(st = make_container(op == kList ? PickleType::kList : PickleType::kSet, first))) return st;
        break;
      case kDict: {
        if (!(st = pop_mark(&first))) return st;
        auto ref = new_object(PickleType::kDict);
        if (!ref) return ref.status();
        if (!(st = set_items(PickleValue::of_ref(*ref), first))) return st;
        if (!(st = push(PickleValue::of_ref(*ref)))) return st;
        break;
      }
      case kAppend:
        if (available() == 0) return fail("stack underflow");
        if (available() == 1) return fail("APPEND without a list");
        if (!(st = append_items(stack_[stack_.size() - 2], stack_.size() - 1))) return st;
        break;
      case kAppends:
      case kAddItems:
        if (!(st = pop_mark(&first))) return st;
        if (first == base()) return fail("APPENDS/ADDITEMS without a target");
        if (!(st = append_items(stack_[first - 1], first))) return st;
        break;
      case kSetItem:
        if (available() < 2) return fail("stack underflow");
        if (available() == 2) return fail("SETITEM without a dict");
        if (!(st = set_items(stack_[stack_.size() - 3], stack_.size() - 2))) return st;
        break;
      case kSetItems:
        if (!(st = pop_mark(&first))) return st;
        if (first == base()) return fail("SETITEMS without a dict");
        if (!(st = set_items(stack_[first - 1], first))) return st;
        break;
      case kReduce:
      case kNewObj: {
        auto args = pop();
        if (!args) return args.status();
        auto callable = pop();
        if (!callable) return callable.status();
        if (as(*args, PickleType::kTuple) == nullptr) {
          return fail(std::string(op == kReduce ? "REDUCE" : "NEWOBJ") + " arguments are not a tuple");
        }
        if (!(st = reduce_to_object(*callable, *args, PickleValue::none()))) return st;
        break;
      }
      case kNewObjEx: {
        auto kwargs = pop();
        if (!kwargs) return kwargs.status();
        auto args = pop();
        if (!args) return args.status();
        auto cls = pop();
        if (!cls) return cls.status();
        if (as(*args, PickleType::kTuple) == nullptr || as(*kwargs, PickleType::kDict) == nullptr) {
          return fail("NEWOBJ_EX arguments are not a tuple and a dict");
        }
        if (!(st = reduce_to_object(*cls, *args, *kwargs))) return st;
        break;
      }
      case kBuild: {
        auto state = pop();
        if (!state) return state.status();
        if (available() == 0) return fail("BUILD without an object");
        const PickleValue target = stack_.back();
        if (target.kind != PickleKind::kRef) return fail("BUILD on a non-object");
        auto call = call_of(target.ref);
        if (!call) return call.status();
        (*call)->state = *state;
        objects_[target.ref].has_state = true;
        break;
      }
      case kBinPersId: {
        // The id (the top of the stack) becomes the object's one item.
        if (available() == 0) return fail("stack underflow");
        if (!(st = make_container(PickleType::kPersistentId, stack_.size() - 1))) return st;
        break;
      }
      default: return fail("unsupported opcode " + opcode_text(op));
    }
  }
  op_pos_ = pos_;
  return fail("truncated: no STOP opcode before the end of the data");
}

}  // namespace tensorscope::compare
