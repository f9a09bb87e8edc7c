// cuda_probe: on a machine without an NVIDIA device node the probe says CUDA is not
// usable and why (never crashes); with one, it finds at least one device.
#include <gtest/gtest.h>

#include <unistd.h>

#include "tensorscope/shared/cuda_probe.h"

namespace tensorscope {
namespace {

TEST(CudaProbe, AgreesWithTheMachine) {
  const CudaProbe& p = cuda_probe();
  EXPECT_GT(p.runtime_version, 0);
  const bool device_node = ::access("/dev/nvidia0", F_OK) == 0;
  if (!device_node) {
    EXPECT_FALSE(p.usable);
    EXPECT_EQ(p.devices, 0);
    EXPECT_NE(p.reason.find("CUDA runtime:"), std::string::npos) << p.reason;
  } else {
    EXPECT_TRUE(p.usable) << p.reason;
    EXPECT_GE(p.devices, 1);
    EXPECT_TRUE(p.reason.empty());
  }
  EXPECT_EQ(&cuda_probe(), &p) << "computed once";
}

}  // namespace
}  // namespace tensorscope
