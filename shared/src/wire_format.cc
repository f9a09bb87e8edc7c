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

const char* tensor_kind_name(TensorKind kind) {
  switch (kind) {
    case TensorKind::kTensor: return "tensor";
    case TensorKind::kActivation: return "activation";
    case TensorKind::kGradient: return "gradient";
    case TensorKind::kParameter: return "parameter";
    case TensorKind::kParameterGradient: return "parameter_gradient";
    case TensorKind::kModuleTree: return "module_tree";
    case TensorKind::kSummary: return "summary";
    case TensorKind::kInvalid: break;
  }
  return "invalid";
}

TensorKind tensor_kind_from_name(std::string_view name) {
  for (uint8_t k = 1; k <= static_cast<uint8_t>(TensorKind::kSummary); ++k) {
    if (name == tensor_kind_name(static_cast<TensorKind>(k))) return static_cast<TensorKind>(k);
  }
  return TensorKind::kInvalid;
}

const char* render_hint_name(RenderHint hint) {
  switch (hint) {
    case RenderHint::kAuto: return "auto";
    case RenderHint::kLine: return "line";
    case RenderHint::kHistogram: return "histogram";
    case RenderHint::kHeatmap: return "heatmap";
    case RenderHint::kForce2d: return "force2d";
    case RenderHint::kPca: return "pca";
    case RenderHint::kTsne: return "tsne";
    case RenderHint::kStats: return "stats";
    case RenderHint::kNone: break;
  }
  return "";
}

}  // namespace tensorscope::wire
