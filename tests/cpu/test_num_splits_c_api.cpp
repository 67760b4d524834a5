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

// The auto table of a 32/8-head, d128 contiguous model, as the C++ policy fills it.
std::vector<unsigned char> policy_table(const NumSplitsPolicy& policy) {
  AutoSplitsTable filled;
  NumSplitsShape shape;
  shape.num_heads = 32;
  shape.num_kv_heads = 8;
  shape.head_dim = 128;
  policy.fill_auto_splits(shape, filled);
  const unsigned char* first = &filled.splits[0][0];
  return std::vector<unsigned char>(first, first + sizeof(filled.splits));
}

TEST(NumSplitsCApi, AutoTableIsThePolicysTable) {
  const std::vector<unsigned char> expected = policy_table(NumSplitsPolicy::for_device(kGpu, kSms));
  std::vector<unsigned char> table(expected.size(), 0);
  ASSERT_EQ(0, splitkv_auto_splits_table(kGpu, kSms, 32, 8, 128, 0, table.data(), static_cast<int>(table.size())));
  EXPECT_EQ(table, expected);
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

// kv_dtype is the kernels' C enum (splitkv/c_api.h): 0 the 16-bit cache's table, 1 the fp8 one's.
TEST(NumSplitsCApi, KvDtypePicksTheTableOfThatCache) {
  const NumSplitsPolicy sixteen = NumSplitsPolicy::for_device(kGpu, kSms);
  const NumSplitsPolicy fp8 = NumSplitsPolicy::for_device(kGpu, kSms, NumSplitsKvDtype::fp8_e4m3);
  int differs = 0;
  for (int batch : {1, 4, 16, 64}) {
    for (int max_seqlen : {0, 2048, 16384}) {
      const NumSplitsShape shape{batch, 32, 8, 128, max_seqlen, 131072, 16};
      EXPECT_EQ(sixteen(shape), splitkv_num_splits_kv_dtype(kGpu, kSms, 0, batch, 32, 8, 128, max_seqlen, 131072, 16));
      EXPECT_EQ(splitkv_num_splits(kGpu, kSms, batch, 32, 8, 128, max_seqlen, 131072, 16),
                splitkv_num_splits_kv_dtype(kGpu, kSms, 0, batch, 32, 8, 128, max_seqlen, 131072, 16));
      const int answer = splitkv_num_splits_kv_dtype(kGpu, kSms, 1, batch, 32, 8, 128, max_seqlen, 131072, 16);
      EXPECT_EQ(fp8(shape), answer) << batch << " at " << max_seqlen;
#if defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200)
      EXPECT_EQ(answer, max_seqlen > 0 ? generated::fp8_h200::determine_num_splits_real_length(batch, 8, 128,
                                                                                             max_seqlen, 16)
                                       : generated::fp8_h200::determine_num_splits_capacity_only(batch, 8, 128,
                                                                                                 131072, 16));
#endif
      differs += answer != sixteen(shape) ? 1 : 0;
    }
  }
#if defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200) && defined(SPLITKV_HAS_GENERATED_TABLE_H200)
  EXPECT_GT(differs, 0);  // else the shapes above could not tell the tables apart
#endif

  const std::vector<unsigned char> expected = policy_table(fp8);
  std::vector<unsigned char> table(expected.size(), 0);
  ASSERT_EQ(0, splitkv_auto_splits_table_kv_dtype(kGpu, kSms, 1, 32, 8, 128, 0, table.data(),
                                                  static_cast<int>(table.size())));
  EXPECT_EQ(table, expected);
  std::vector<unsigned char> sixteen_table(table.size(), 0);
  ASSERT_EQ(0, splitkv_auto_splits_table_kv_dtype(kGpu, kSms, 0, 32, 8, 128, 0, sixteen_table.data(),
                                                  static_cast<int>(sixteen_table.size())));
  std::vector<unsigned char> plain(table.size(), 0);
  ASSERT_EQ(0, splitkv_auto_splits_table(kGpu, kSms, 32, 8, 128, 0, plain.data(), static_cast<int>(plain.size())));
  EXPECT_EQ(sixteen_table, plain);
#if defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200) && defined(SPLITKV_HAS_GENERATED_TABLE_H200)
  EXPECT_NE(table, sixteen_table);
#endif
}

TEST(NumSplitsCApi, UnknownKvDtypeIsRefused) {
  for (int kv_dtype : {-1, 2, 7}) {
    EXPECT_EQ(-1, splitkv_num_splits_kv_dtype(kGpu, kSms, kv_dtype, 4, 32, 8, 128, 8192, 8192, 0)) << kv_dtype;
    std::vector<unsigned char> table(sizeof(AutoSplitsTable{}.splits), 0xAB);
    EXPECT_EQ(-1, splitkv_auto_splits_table_kv_dtype(kGpu, kSms, kv_dtype, 32, 8, 128, 0, table.data(),
                                                     static_cast<int>(table.size())))
        << kv_dtype;
    for (unsigned char entry : table) EXPECT_EQ(entry, 0xAB);  // nothing written
  }
  // The buffer checks hold for every cache.
  std::vector<unsigned char> table(sizeof(AutoSplitsTable{}.splits) + 8, 0xAB);
  EXPECT_EQ(-1, splitkv_auto_splits_table_kv_dtype(kGpu, kSms, 1, 32, 8, 128, 0, nullptr, 960));
  EXPECT_EQ(-1, splitkv_auto_splits_table_kv_dtype(kGpu, kSms, 1, 32, 8, 128, 0, table.data(),
                                                   static_cast<int>(table.size())));
  for (unsigned char entry : table) EXPECT_EQ(entry, 0xAB);
}

}  // namespace
}  // namespace splitkv
