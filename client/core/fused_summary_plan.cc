// fused_summary_plan.cc — see fused_summary_plan.h.
#include "fused_summary_plan.h"

namespace tensorscope::fused {
namespace {

// element_at() reads the dtypes by their wire values.
static_assert(static_cast<uint8_t>(wire::DType::kFloat32) == 1 && static_cast<uint8_t>(wire::DType::kFloat64) == 2 &&
                  static_cast<uint8_t>(wire::DType::kFloat16) == 3 &&
                  static_cast<uint8_t>(wire::DType::kBFloat16) == 4 && static_cast<uint8_t>(wire::DType::kInt8) == 5 &&
                  static_cast<uint8_t>(wire::DType::kInt16) == 6 && static_cast<uint8_t>(wire::DType::kInt32) == 7 &&
                  static_cast<uint8_t>(wire::DType::kInt64) == 8 && static_cast<uint8_t>(wire::DType::kUInt8) == 9 &&
                  static_cast<uint8_t>(wire::DType::kBool) == 10,
              "element_at() reads the wire dtypes by value");

bool readable(wire::DType dtype) {
  const auto v = static_cast<uint8_t>(dtype);
  return v >= 1 && v <= 10;
}

}  // namespace

bool plan_pass(const std::vector<Input>& inputs, Plan* plan, std::string* why) {
  *plan = Plan{};
  plan->tensors.reserve(inputs.size());
  plan->first_chunk.reserve(inputs.size() + 1);
  uint64_t values = 0;
  for (const Input& in : inputs) {
    if (!readable(in.dtype)) {
      *why = "the fused summary pass does not read dtype " + std::to_string(static_cast<int>(in.dtype));
      return false;
    }
    if (in.ask.ratio && in.before == nullptr) {
      *why = "an update ratio without the previous value";
      return false;
    }
    KernelTensor t;
    t.data = in.data;
    t.before = in.ask.ratio ? in.before : nullptr;
    t.numel = in.numel;
    t.first_chunk = plan->chunks;
    t.value_offset = static_cast<uint32_t>(values);
    t.dtype = static_cast<uint8_t>(in.dtype);
    t.ask = in.ask;
    t.ask.keep = in.ask.ratio && in.ask.keep;
    t.ask.scaled = in.dtype == wire::DType::kFloat64;  // the device layout's rule
    plan->first_chunk.push_back(plan->chunks);
    plan->chunks += (in.numel + kChunkElements - 1) / kChunkElements;
    values += static_cast<uint64_t>(value_count(t.ask));
    plan->tensors.push_back(t);
  }
  plan->first_chunk.push_back(plan->chunks);
  if (plan->chunks > 0x7fffffffu || values > 0xffffffffu) {
    *why = "a fused summary pass too large for one launch";
    return false;
  }
  plan->values = static_cast<uint32_t>(values);
  return true;
}

void write_empty_values(const Plan& plan, double* values) {
  for (const KernelTensor& t : plan.tensors) {
    if (t.numel == 0) finish(SummaryPartial{}, t.ask, values + t.value_offset);
  }
}

}  // namespace tensorscope::fused
