#include "compare/pickle_machine.h"

#include <cstdio>
#include <cstring>

namespace tensorscope::daemon {
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

constexpr size_t kMaxLineBytes = 4096;  // GLOBAL module and name lines

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

bool PickleMachine::is_global(PickleValue v, std::string_view module, std::string_view name) const {
  const PickleObject* g = as(v, PickleType::kGlobal);
  return g != nullptr && g->text == module && g->name == name;
}

std::string PickleMachine::global_name(PickleValue v) const {
  const PickleObject* g = as(v, PickleType::kGlobal);
  return g == nullptr ? std::string() : g->text + "." + g->name;
}

Status PickleMachine::fail(const std::string& problem) const {
  return Status::error(what_ + ": corrupt or unsupported pickle: " + problem + " (opcode at offset " +
                       std::to_string(op_pos_) + ")");
}

StatusOr<uint32_t> PickleMachine::new_object(PickleType type) {
  if (objects_.size() >= limits_.max_objects) {
    return fail("more than " + std::to_string(limits_.max_objects) + " objects");
  }
  objects_.emplace_back();
  objects_.back().type = type;
  return static_cast<uint32_t>(objects_.size() - 1);
}

Status PickleMachine::push(PickleValue v) {
  if (stack_.size() >= limits_.max_stack) {
    return fail("stack deeper than " + std::to_string(limits_.max_stack) + " values");
  }
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

size_t PickleMachine::available() const {
  return stack_.size() - (marks_.empty() ? 0 : marks_.back());
}

StatusOr<PickleValue> PickleMachine::pop() {
  if (available() == 0) return fail("stack underflow");
  const PickleValue v = stack_.back();
  stack_.pop_back();
  return v;
}

Status PickleMachine::pop_mark(std::vector<PickleValue>* out) {
  if (marks_.empty()) return fail("no MARK to close");
  const size_t mark = marks_.back();
  marks_.pop_back();
  out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
  stack_.resize(mark);
  return Status::ok();
}

Status PickleMachine::read_bytes(size_t n, std::string_view* out) {
  if (n > data_.size() - pos_) {
    return fail("truncated: needs " + std::to_string(n) + " more bytes, " +
                std::to_string(data_.size() - pos_) + " left");
  }
  *out = data_.substr(pos_, n);
  pos_ += n;
  return Status::ok();
}

Status PickleMachine::read_line(std::string_view* out) {
  const size_t limit = std::min(data_.size(), pos_ + kMaxLineBytes + 1);
  for (size_t i = pos_; i < limit; ++i) {
    if (data_[i] == '\n') {
      *out = data_.substr(pos_, i - pos_);
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
  objects_[*ref].text.assign(bytes.data(), bytes.size());
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::make_global(std::string module, std::string name) {
  auto ref = new_object(PickleType::kGlobal);
  if (!ref) return ref.status();
  objects_[*ref].text = std::move(module);
  objects_[*ref].name = std::move(name);
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::memo_put(uint64_t index) {
  if (available() == 0) return fail("memo store from an empty stack");
  auto found = memo_.find(index);
  if (found == memo_.end() && memo_.size() >= limits_.max_memo) {
    return fail("more than " + std::to_string(limits_.max_memo) + " memo entries");
  }
  memo_[index] = stack_.back();
  return Status::ok();
}

Status PickleMachine::memo_get(uint64_t index) {
  auto found = memo_.find(index);
  if (found == memo_.end()) return fail("memo entry " + std::to_string(index) + " was never stored");
  return push(found->second);
}

Status PickleMachine::set_items(PickleValue target, std::vector<PickleValue>&& kv) {
  if (kv.size() % 2 != 0) return fail("SETITEMS with an odd number of values");
  if (target.kind != PickleKind::kRef) return fail("SETITEM(S) on a non-object");
  PickleObject& o = objects_[target.ref];
  if (o.type != PickleType::kDict && o.type != PickleType::kObject) {
    return fail(std::string("SETITEM(S) on a ") + pickle_type_name(o.type));
  }
  Status counted = count_items(kv.size());
  if (!counted) return counted;
  for (size_t i = 0; i < kv.size(); i += 2) o.entries.emplace_back(kv[i], kv[i + 1]);
  return Status::ok();
}

Status PickleMachine::append_items(PickleValue target, std::vector<PickleValue>&& values) {
  if (target.kind != PickleKind::kRef) return fail("APPEND(S) on a non-object");
  PickleObject& o = objects_[target.ref];
  if (o.type != PickleType::kList && o.type != PickleType::kSet && o.type != PickleType::kObject) {
    return fail(std::string("APPEND(S)/ADDITEMS on a ") + pickle_type_name(o.type));
  }
  Status counted = count_items(values.size());
  if (!counted) return counted;
  o.items.insert(o.items.end(), values.begin(), values.end());
  return Status::ok();
}

Status PickleMachine::make_tuple(std::vector<PickleValue>&& values) {
  Status counted = count_items(values.size());
  if (!counted) return counted;
  auto ref = new_object(PickleType::kTuple);
  if (!ref) return ref.status();
  objects_[*ref].items = std::move(values);
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::reduce_to_object(PickleValue callable, PickleValue args, PickleValue kwargs) {
  const PickleObject* arg_tuple = as(args, PickleType::kTuple);
  if (is_global(callable, "collections", "OrderedDict") && arg_tuple != nullptr &&
      arg_tuple->items.empty() && kwargs.kind == PickleKind::kNone) {
    auto ref = new_object(PickleType::kDict);
    if (!ref) return ref.status();
    return push(PickleValue::of_ref(*ref));
  }
  auto ref = new_object(PickleType::kObject);
  if (!ref) return ref.status();
  PickleObject& o = objects_[*ref];
  o.callable = callable;
  o.args = args;
  o.kwargs = kwargs;
  return push(PickleValue::of_ref(*ref));
}

Status PickleMachine::run(std::string_view data, const std::string& what) {
  what_ = what;
  data_ = data;
  pos_ = 0;
  std::vector<PickleValue> values;
  Status st;
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
        if (!(st = pop_mark(&values))) return st;
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
        if (!(st = push(PickleValue::of_int(static_cast<int32_t>(
                  le_uint(reinterpret_cast<const unsigned char*>(arg.data()), 4))))))
          return st;
        break;
      case kBinInt1:
      case kBinInt2: {
        const size_t n = op == kBinInt1 ? 1 : 2;
        if (!(st = read_bytes(n, &arg))) return st;
        if (!(st = push(PickleValue::of_int(static_cast<int64_t>(
                  le_uint(reinterpret_cast<const unsigned char*>(arg.data()), n))))))
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
        const size_t len_bytes = (op == kShortBinUnicode || op == kShortBinString ||
                                  op == kShortBinBytes)
                                     ? 1
                                 : (op == kBinUnicode8 || op == kBinBytes8 || op == kByteArray8)
                                     ? 8
                                     : 4;
        if (!(st = read_bytes(len_bytes, &arg))) return st;
        uint64_t n = le_uint(reinterpret_cast<const unsigned char*>(arg.data()), len_bytes);
        if (op == kBinString && (n & 0x80000000u)) return fail("BINSTRING with a negative length");
        if (n > data_.size() - pos_) {
          return fail("truncated: a string of " + std::to_string(n) + " bytes, " +
                      std::to_string(data_.size() - pos_) + " left");
        }
        const bool text = op == kBinUnicode || op == kShortBinUnicode || op == kBinUnicode8;
        if (!(st = push_text(text ? PickleType::kString : PickleType::kBytes, static_cast<size_t>(n))))
          return st;
        break;
      }
      case kGlobal: {
        std::string_view module, name;
        if (!(st = read_line(&module))) return st;
        if (!(st = read_line(&name))) return st;
        if (!(st = make_global(std::string(module), std::string(name)))) return st;
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
        std::string module_text = m->text, name_text = n->text;
        if (!(st = make_global(std::move(module_text), std::move(name_text)))) return st;
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
        if (!(st = memo_put(memo_.size()))) return st;
        break;
      case kBinGet:
      case kLongBinGet: {
        const size_t n = op == kBinGet ? 1 : 4;
        if (!(st = read_bytes(n, &arg))) return st;
        if (!(st = memo_get(le_uint(reinterpret_cast<const unsigned char*>(arg.data()), n)))) return st;
        break;
      }
      case kEmptyTuple:
        if (!(st = make_tuple({}))) return st;
        break;
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = static_cast<size_t>(op - kTuple1 + 1);
        if (available() < n) return fail("stack underflow");
        values.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        if (!(st = make_tuple(std::move(values)))) return st;
        break;
      }
      case kTuple:
        if (!(st = pop_mark(&values))) return st;
        if (!(st = make_tuple(std::move(values)))) return st;
        break;
      case kEmptyList:
      case kEmptyDict:
      case kEmptySet: {
        auto ref = new_object(op == kEmptyList ? PickleType::kList
                              : op == kEmptyDict ? PickleType::kDict
                                                 : PickleType::kSet);
        if (!ref) return ref.status();
        if (!(st = push(PickleValue::of_ref(*ref)))) return st;
        break;
      }
      case kList:
      case kFrozenSet: {
        if (!(st = pop_mark(&values))) return st;
        auto ref = new_object(op == kList ? PickleType::kList : PickleType::kSet);
        if (!ref) return ref.status();
        if (!(st = count_items(values.size()))) return st;
        objects_[*ref].items = std::move(values);
        if (!(st = push(PickleValue::of_ref(*ref)))) return st;
        break;
      }
      case kDict: {
        if (!(st = pop_mark(&values))) return st;
        auto ref = new_object(PickleType::kDict);
        if (!ref) return ref.status();
        if (!(st = set_items(PickleValue::of_ref(*ref), std::move(values)))) return st;
        if (!(st = push(PickleValue::of_ref(*ref)))) return st;
        break;
      }
      case kAppend: {
        auto v = pop();
        if (!v) return v.status();
        if (available() == 0) return fail("APPEND without a list");
        if (!(st = append_items(stack_.back(), {*v}))) return st;
        break;
      }
      case kAppends:
      case kAddItems:
        if (!(st = pop_mark(&values))) return st;
        if (available() == 0) return fail("APPENDS/ADDITEMS without a target");
        if (!(st = append_items(stack_.back(), std::move(values)))) return st;
        break;
      case kSetItem: {
        auto value = pop();
        if (!value) return value.status();
        auto key = pop();
        if (!key) return key.status();
        if (available() == 0) return fail("SETITEM without a dict");
        if (!(st = set_items(stack_.back(), {*key, *value}))) return st;
        break;
      }
      case kSetItems:
        if (!(st = pop_mark(&values))) return st;
        if (available() == 0) return fail("SETITEMS without a dict");
        if (!(st = set_items(stack_.back(), std::move(values)))) return st;
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
        PickleObject& o = objects_[target.ref];
        o.state = *state;
        o.has_state = true;
        break;
      }
      case kBinPersId: {
        auto pid = pop();
        if (!pid) return pid.status();
        auto ref = new_object(PickleType::kPersistentId);
        if (!ref) return ref.status();
        objects_[*ref].items.push_back(*pid);
        if (!(st = push(PickleValue::of_ref(*ref)))) return st;
        break;
      }
      default:
        return fail("unsupported opcode " + opcode_text(op));
    }
  }
  op_pos_ = pos_;
  return fail("truncated: no STOP opcode before the end of the data");
}

}  // namespace tensorscope::daemon
