// TensorRef (client core) and its DLPack translation (python/native/dlpack_ref): sizes,
// layouts, refusals, and copy_strided against element-by-element indexing for every
// element size, negative strides, broadcast (stride 0) and size-1 dimensions.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "dlpack_ref.h"
#include "tensor_ref.h"
#include "tensor_refs.h"

namespace tensorscope {
namespace {

using testing::make_ref;

// The C-order copy of `ref` by plain index arithmetic: the reference for copy_strided.
std::vector<unsigned char> gather_by_index(const TensorRef& ref) {
  const size_t size = wire::dtype_size(ref.dtype);
  std::vector<unsigned char> out(element_count(ref) * size);
  std::vector<int64_t> index(ref.ndim, 0);
  for (uint64_t i = 0; i < element_count(ref); ++i) {
    int64_t offset = 0;
    for (int d = 0; d < ref.ndim; ++d) offset += index[d] * ref.strides[d];
    std::memcpy(out.data() + i * size,
                static_cast<const unsigned char*>(ref.data) + offset * static_cast<int64_t>(size), size);
    for (int d = ref.ndim - 1; d >= 0; --d) {
      if (++index[d] < ref.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

TEST(TensorRef, SizesAndContiguity) {
  const float data[24] = {};
  EXPECT_EQ(element_count(make_ref(data, wire::DType::kFloat32, {}, {})), 1u);  // 0-d
  EXPECT_EQ(element_count(make_ref(data, wire::DType::kFloat32, {2, 3, 4}, {12, 4, 1})), 24u);
  EXPECT_EQ(element_count(make_ref(data, wire::DType::kFloat32, {2, 0}, {1, 1})), 0u);
  EXPECT_TRUE(is_c_contiguous(make_ref(data, wire::DType::kFloat32, {2, 3, 4}, {12, 4, 1})));
  EXPECT_TRUE(is_c_contiguous(make_ref(data, wire::DType::kFloat32, {2, 1, 4}, {4, 99, 1})));  // size-1: any stride
  EXPECT_FALSE(is_c_contiguous(make_ref(data, wire::DType::kFloat32, {3, 2}, {1, 3})));
  EXPECT_FALSE(is_c_contiguous(make_ref(data, wire::DType::kFloat32, {3, 2}, {-2, 1})));
}

TEST(TensorRef, RefusalsSayWhy) {
  const float data[4] = {};
  EXPECT_EQ(tensor_ref_refusal(make_ref(data, wire::DType::kFloat32, {4}, {1})), "");
  EXPECT_NE(tensor_ref_refusal(make_ref(data, wire::DType::kInvalid, {4}, {1})).find("dtype"), std::string::npos);
  EXPECT_NE(tensor_ref_refusal(make_ref(data, wire::DType::kFloat32, {-1}, {1})).find("negative"), std::string::npos);
  EXPECT_NE(tensor_ref_refusal(make_ref(nullptr, wire::DType::kFloat32, {4}, {1})).find("no data"), std::string::npos);
  EXPECT_EQ(tensor_ref_refusal(make_ref(nullptr, wire::DType::kFloat32, {0}, {1})), "");  // empty: no data needed
  EXPECT_NE(tensor_ref_refusal(make_ref(data, wire::DType::kFloat32, {1 << 30, 1 << 30, 1 << 30}, {1, 1, 1}))
                .find("too large"),
            std::string::npos);
  TensorRef nine = make_ref(data, wire::DType::kFloat32, {1}, {1});
  nine.ndim = 9;
  EXPECT_NE(tensor_ref_refusal(nine).find("at most 8"), std::string::npos);
  TensorRef strided_cuda = make_ref(data, wire::DType::kFloat32, {2, 2}, {1, 2});
  strided_cuda.device = DeviceType::kCuda;
  EXPECT_NE(tensor_ref_refusal(strided_cuda).find("contiguous"), std::string::npos);
  EXPECT_EQ(device_name(strided_cuda), "cuda0");
}

TEST(TensorRef, CopyStridedMatchesIndexingForEveryLayout) {
  std::mt19937 rng(5);
  std::vector<unsigned char> storage(1 << 22);
  for (auto& b : storage) b = static_cast<unsigned char>(rng());
  const wire::DType dtypes[] = {wire::DType::kUInt8, wire::DType::kFloat16, wire::DType::kFloat32, wire::DType::kInt64};
  for (int trial = 0; trial < 400; ++trial) {
    const wire::DType dtype = dtypes[trial % 4];
    const int ndim = 1 + static_cast<int>(rng() % 5);
    std::vector<int64_t> shape(ndim), strides(ndim);
    for (int d = 0; d < ndim; ++d) shape[d] = 1 + static_cast<int64_t>(rng() % 5);
    // Permuted contiguous strides, then some negated, zeroed (broadcast) or spread out.
    int64_t running = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      strides[d] = running * (1 + static_cast<int64_t>(rng() % 2));
      running *= shape[d] * 2;
    }
    std::shuffle(strides.begin(), strides.end(), rng);
    int64_t base = 0;
    for (int d = 0; d < ndim; ++d) {
      if (rng() % 5 == 0) strides[d] = 0;
      if (rng() % 4 == 0) {
        strides[d] = -strides[d];
        base += -strides[d] * (shape[d] - 1);
      }
    }
    if (trial % 7 == 0) {  // plainly contiguous now and then
      int64_t s = 1;
      for (int d = ndim - 1; d >= 0; --d) {
        strides[d] = s;
        s *= shape[d];
      }
      base = 0;
    }
    const size_t size = wire::dtype_size(dtype);
    ASSERT_LT((base + running) * static_cast<int64_t>(size), static_cast<int64_t>(storage.size()));
    const TensorRef ref = make_ref(storage.data() + base * size, dtype, shape, strides);
    const std::vector<unsigned char> expected = gather_by_index(ref);
    std::vector<unsigned char> got(expected.size() + 8, 0xEE);
    copy_strided(ref, got.data(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), expected.size()), 0) << "trial " << trial;
    EXPECT_EQ(got[expected.size()], 0xEE) << "wrote past the end, trial " << trial;
  }
}

TEST(DlpackRef, DtypesMapLikeTheWire) {
  using dlpack::DLDataType;
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLFloat, 32, 1}, false), wire::DType::kFloat32);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLFloat, 16, 1}, false), wire::DType::kFloat16);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLBfloat, 16, 1}, false), wire::DType::kBFloat16);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLInt, 64, 1}, false), wire::DType::kInt64);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLUInt, 8, 1}, false), wire::DType::kUInt8);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLUInt, 8, 1}, true), wire::DType::kBool);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLBool, 8, 1}, false), wire::DType::kBool);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLUInt, 16, 1}, false), wire::DType::kInvalid);
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLFloat, 32, 4}, false), wire::DType::kInvalid);  // vector lanes
  EXPECT_EQ(dlpack::wire_dtype(DLDataType{dlpack::kDLInt, 32, 1}, true), wire::DType::kInvalid);
}

TEST(DlpackRef, StridesOffsetsDevicesAndRefusals) {
  float data[12] = {};
  int64_t shape[2] = {3, 4};
  dlpack::DLTensor t{data, {dlpack::kDLCPU, 0}, 2, {dlpack::kDLFloat, 32, 1}, shape, nullptr, 8};
  TensorRef ref;
  ASSERT_EQ(dlpack::to_tensor_ref(t, false, 0, &ref), "");
  EXPECT_EQ(ref.strides[0], 4);  // null strides: C-contiguous
  EXPECT_EQ(ref.strides[1], 1);
  EXPECT_EQ(ref.data, reinterpret_cast<const char*>(data) + 8);  // byte_offset applied
  EXPECT_EQ(ref.device, DeviceType::kCpu);

  int64_t strides[2] = {1, 3};
  t.strides = strides;
  t.byte_offset = 0;
  t.device = {dlpack::kDLCUDA, 1};
  EXPECT_NE(dlpack::to_tensor_ref(t, false, 77, &ref).find("contiguous"), std::string::npos);
  t.strides = nullptr;
  ASSERT_EQ(dlpack::to_tensor_ref(t, false, 77, &ref), "");
  EXPECT_EQ(ref.device, DeviceType::kCuda);
  EXPECT_EQ(ref.device_index, 1);
  EXPECT_EQ(ref.cuda_stream, 77u);

  t.device = {dlpack::kDLCPU, 0};
  t.dtype = {dlpack::kDLComplex, 64, 1};
  EXPECT_NE(dlpack::to_tensor_ref(t, false, 0, &ref).find("view_as_real"), std::string::npos);
  t.dtype = {dlpack::kDLFloat, 32, 1};
  t.device = {14 /* kDLOneAPI */, 0};
  EXPECT_NE(dlpack::to_tensor_ref(t, false, 0, &ref).find("device type 14"), std::string::npos);
  t.device = {dlpack::kDLCPU, 0};
  t.ndim = 9;
  EXPECT_NE(dlpack::to_tensor_ref(t, false, 0, &ref).find("at most 8"), std::string::npos);
}

}  // namespace
}  // namespace tensorscope
