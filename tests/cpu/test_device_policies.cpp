// The host halves of the device-side policies (device_policy_kernels.cpp), which run without a GPU.
#include "splitkv/heuristics/device_policy_kernels.hpp"

#include <cstring>
#include <utility>

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "splitkv/heuristics/ragged_report.hpp"
#include "splitkv/num_splits.hpp"

namespace splitkv::heuristics {
namespace {

// splitkv_auto on an fp8 point runs the fp8 kernel, so its table is the one for that cache.
TEST(DevicePolicies, AutoTableIsThePolicysForThePointsCache) {
  const tuner::DevicePolicies policies = device_policies();
  ASSERT_TRUE(policies.auto_splits);
  tuner::SweepPoint sixteen = testing::decode_point(4, 8192, 131072, 8, 128, 16);
  tuner::SweepPoint fp8 = sixteen;
  fp8.kv_dtype = KvDtype::fp8_e4m3;
  for (const auto& [point, kv_dtype] : {std::pair{sixteen, NumSplitsKvDtype::sixteen_bit},
                                        std::pair{fp8, NumSplitsKvDtype::fp8_e4m3}}) {
    AutoSplitsTable expected;
    const auto policy = NumSplitsPolicy::for_device("NVIDIA H200", 132, kv_dtype);
    policy.fill_auto_splits(num_splits_shape(point, false), expected);
    const AutoSplitsTable got = policies.auto_splits(point, "NVIDIA H200", 132);
    EXPECT_EQ(0, std::memcmp(got.splits, expected.splits, sizeof(expected.splits))) << int(kv_dtype);
  }
#if defined(SPLITKV_HAS_GENERATED_TABLE_H200) && defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200)
  // Else the comparison above could not tell the tables apart.
  const AutoSplitsTable a = policies.auto_splits(sixteen, "NVIDIA H200", 132);
  const AutoSplitsTable b = policies.auto_splits(fp8, "NVIDIA H200", 132);
  EXPECT_NE(0, std::memcmp(a.splits, b.splits, sizeof(a.splits)));
#endif
}

}  // namespace
}  // namespace splitkv::heuristics
