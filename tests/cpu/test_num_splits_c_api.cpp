// The heuristics' C ABI (libsplitkv_heuristics_c, what scripts/bench_peers.py loads): its answers
// are the C++ policy's, and bad buffers are refused instead of written past.
#include "splitkv/num_splits_c_api.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "splitkv/num_splits.hpp"

namespace splitkv {
namespace {

constexpr const char* kGpu = "NVIDIA H200";
constexpr int kSms = 132;

TEST(NumSplitsCApi, AutoTableIsThePolicysTable) {
  AutoSplitsTable expected;
  const NumSplitsPolicy policy = NumSplitsPolicy::for_device(kGpu, kSms);
  NumSplitsShape shape;
  shape.num_heads = 32;
  shape.num_kv_heads = 8;
  shape.head_dim = 128;
  policy.fill_auto_splits(shape, expected);
  std::vector<unsigned char> table(sizeof(expected.splits), 0);
  ASSERT_EQ(0, splitkv_auto_splits_table(kGpu, kSms, 32, 8, 128, 0, table.data(), static_cast<int>(table.size())));
  EXPECT_EQ(0, std::memcmp(table.data(), expected.splits, table.size()));
  for (unsigned char entry : table) EXPECT_GE(entry, 1);
}

TEST(NumSplitsCApi, AutoTableRefusesBadBuffers) {
  std::vector<unsigned char> table(sizeof(AutoSplitsTable{}.splits) + 8, 0xAB);
  EXPECT_EQ(-1, splitkv_auto_splits_table(kGpu, kSms, 32, 8, 128, 0, nullptr, 960));
  EXPECT_EQ(-1, splitkv_auto_splits_table(kGpu, kSms, 32, 8, 128, 0, table.data(), 24));  // the old row size
  EXPECT_EQ(-1, splitkv_auto_splits_table(kGpu, kSms, 32, 8, 128, 0, table.data(), static_cast<int>(table.size())));
  for (unsigned char entry : table) EXPECT_EQ(entry, 0xAB);  // nothing written
}

TEST(NumSplitsCApi, RaggedLookupAsksAboutTheEffectiveBatch) {
  const NumSplitsPolicy policy = NumSplitsPolicy::for_device(kGpu, kSms);
  NumSplitsShape ragged{16, 32, 8, 128, 8192, 131072, 0};
  ragged.total_seqlen = 8192 + 15 * 500;
  EXPECT_EQ(policy(ragged), splitkv_num_splits_ragged(kGpu, kSms, 16, 32, 8, 128, 8192, ragged.total_seqlen, 131072, 0));
  EXPECT_EQ(policy({16, 32, 8, 128, 8192, 131072, 0}), splitkv_num_splits(kGpu, kSms, 16, 32, 8, 128, 8192, 131072, 0));
}

}  // namespace
}  // namespace splitkv
