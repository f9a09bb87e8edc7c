#include "tensorscope/shared/wire_format.h"

namespace tensorscope::wire {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kInvalid: break;
  }
  return "invalid";
}

DType dtype_from_name(std::string_view name) {
  for (uint8_t d = 1; d <= kMaxDType; ++d) {
    if (name == dtype_name(static_cast<DType>(d))) return static_cast<DType>(d);
  }
  return DType::kInvalid;
}

const char* tensor_kind_name(TensorKind kind) {
  const auto value = static_cast<uint8_t>(kind);
  return kTensorKindNames[value <= kMaxTensorKind ? value : 0].data();  // literals: NUL-terminated
}

TensorKind tensor_kind_from_name(std::string_view name) {
  for (uint8_t k = 1; k <= kMaxTensorKind; ++k) {
    if (name == kTensorKindNames[k]) return static_cast<TensorKind>(k);
  }
  return TensorKind::kInvalid;
}

}  // namespace tensorscope::wire
