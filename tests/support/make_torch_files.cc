// make_torch_files.cc — writes PyTorch files with libtorch's own writers, for the
// round-trip tests of `tensorscope compare` (tests/unit/daemon/torch_compare_test.cc).
//
// Test-only program (linked with libtorch; the tested reader is not). Usage:
//   make_torch_files OUT_DIR
// Writes, with the values of tests/support/torch_test_values.h (base = the [3, 5]
// tensor of a dtype):
//   save_<dtype>.pt      torch::save(base)                      for every dtype
//   save_t_<dtype>.pt    torch::save(base.t())  (a transposed, non-contiguous view)
//   pickle_<dtype>.pt    torch::pickle_save(base)
//   views.pt             torch::save(std::vector{base.t(), base[:, ::2], base[1],
//                        base[0].expand(4, 5), base[2][3] (0-d)}) of float32
//   scalar.pt            torch::save(0-d float64 tensor holding value 7 of float64)
//   pickle_dict.pt       torch::pickle_save(Dict<str, Tensor>{"w": base float32,
//                        "b": base[1] int64})
//   pickle_list.pt       torch::pickle_save(List<Tensor>{base float64, base.t() int32})
// Exit 0 on success, 1 with a message on stderr otherwise. Single-threaded.
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "torch_test_values.h"

namespace {

using tensorscope::testing::kTorchTestCols;
using tensorscope::testing::kTorchTestRows;
using tensorscope::testing::torch_test_base;
using tensorscope::testing::torch_test_dtypes;
using tensorscope::testing::torch_test_value;

torch::ScalarType scalar_type(const std::string& name) {
  if (name == "float32") return torch::kFloat32;
  if (name == "float64") return torch::kFloat64;
  if (name == "float16") return torch::kFloat16;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "int8") return torch::kInt8;
  if (name == "int16") return torch::kInt16;
  if (name == "int32") return torch::kInt32;
  if (name == "int64") return torch::kInt64;
  if (name == "uint8") return torch::kUInt8;
  return torch::kBool;
}

// The [3, 5] base tensor of `dtype`: built in float64 (every value is exact), then cast.
torch::Tensor base(const std::string& dtype) {
  const std::vector<double> values = torch_test_base(dtype);
  return torch::tensor(values, torch::kFloat64).reshape({kTorchTestRows, kTorchTestCols}).to(scalar_type(dtype));
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_torch_files OUT_DIR\n");
    return 1;
  }
  const std::string dir = argv[1];
  try {
    for (const std::string& dtype : torch_test_dtypes()) {
      const torch::Tensor b = base(dtype);
      torch::save(b, dir + "/save_" + dtype + ".pt");
      torch::save(b.t(), dir + "/save_t_" + dtype + ".pt");
      write_bytes(dir + "/pickle_" + dtype + ".pt", torch::pickle_save(b));
    }
    const torch::Tensor f = base("float32");
    std::vector<torch::Tensor> views = {f.t(), f.slice(1, 0, kTorchTestCols, 2), f[1],
                                        f[0].unsqueeze(0).expand({4, kTorchTestCols}), f[2][3]};
    torch::save(views, dir + "/views.pt");
    torch::save(torch::tensor(torch_test_value("float64", 7), torch::kFloat64), dir + "/scalar.pt");
    c10::Dict<std::string, torch::Tensor> dict;
    dict.insert("w", f);
    dict.insert("b", base("int64")[1]);
    write_bytes(dir + "/pickle_dict.pt", torch::pickle_save(c10::IValue(dict)));
    c10::List<torch::Tensor> list;
    list.push_back(base("float64"));
    list.push_back(base("int32").t());
    write_bytes(dir + "/pickle_list.pt", torch::pickle_save(c10::IValue(list)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_torch_files: %s\n", e.what());
    return 1;
  }
  return 0;
}
