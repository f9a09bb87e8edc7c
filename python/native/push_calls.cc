// push_calls.cc — see push_calls.h.
#include "push_calls.h"

#include "dlpack_ref.h"
#include "py_args.h"

namespace tensorscope::python {

long admission_code(ClientCore* core, const StreamGate::Admission& admission) {
  if (!admission.admitted) return -1;
  const PushResult ready = core->ready();
  return ready == PushResult::kPushed ? admission.render_hint : -2 - static_cast<long>(ready);
}

PushResult send_capsule(ClientCore* core, const std::string& name, PyObject* capsule, wire::TensorKind kind,
                        uint8_t hint, std::optional<int64_t> step, bool as_bool, uintptr_t cuda_stream,
                        const RowLabels* labels) {
  std::string error;
  const dlpack::DLTensor* tensor = capsule_tensor(capsule, &error);
  if (tensor == nullptr) {
    PyErr_Clear();
    return core->refuse(name, error.empty() ? "bad DLPack capsule" : error);
  }
  TensorRef ref;
  error = dlpack::to_tensor_ref(*tensor, as_bool, cuda_stream, &ref);
  if (!error.empty()) return core->refuse(name, error);
  return send_ref(core, name, ref, kind, hint, step, labels);
}

PushResult send_ref(ClientCore* core, const std::string& name, const TensorRef& ref, wire::TensorKind kind,
                    uint8_t hint, std::optional<int64_t> step, const RowLabels* labels) {
  const uint64_t bytes = element_count(ref) * wire::dtype_size(ref.dtype);
  if (bytes < kReleaseGilBytes || ref.device != DeviceType::kCpu)
    return core->send(name, ref, kind, hint, step, labels);
  PushResult result;
  Py_BEGIN_ALLOW_THREADS result = core->send(name, ref, kind, hint, step, labels);
  Py_END_ALLOW_THREADS return result;
}

}  // namespace tensorscope::python
