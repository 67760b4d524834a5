// The runtime dispatch header (splitkv/num_splits.hpp): table matching and the fallback rule.
#include "splitkv/num_splits.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace splitkv {
namespace {

TEST(OneWaveFallback, HandComputed) {
  // Every one of 132 SMs gets a CTA: 8 CTAs -> ceil(132/8) = 17 splits (8192 tokens = 128
  // tiles allow it).
  EXPECT_EQ(one_wave_num_splits(1, 8, 8192, 132), 17);
  // 32 CTAs -> ceil(132/32) = ceil(4.125) = 5.
  EXPECT_EQ(one_wave_num_splits(4, 8, 8192, 132), 5);
  // Capped by tiles: 100 tokens = 2 tiles.
  EXPECT_EQ(one_wave_num_splits(1, 8, 100, 132), 2);
  // Capped at 128 splits: 1 CTA would want 132.
  EXPECT_EQ(one_wave_num_splits(1, 1, 1 << 20, 132), kFallbackMaxSplits);
  // Every SM busy already: 1.
  EXPECT_EQ(one_wave_num_splits(32, 8, 8192, 132), 1);
  EXPECT_EQ(one_wave_num_splits(16, 8, 8192, 132), 2);  // 128 CTAs < 132
  // Degenerate inputs still give a split.
  EXPECT_EQ(one_wave_num_splits(0, 0, 0, 0), 1);
  static_assert(one_wave_num_splits(1, 8, 8192, 132) == 17, "usable at compile time");
}

int fake_real(int batch, int, int, int tokens, int) { return 1000 + batch + tokens; }
int fake_capacity(int batch, int, int, int tokens, int) { return 2000 + batch + tokens; }

TEST(NumSplitsPolicy, MatchesNameAndSmCount) {
  const GeneratedTable tables[] = {{"fake", "NVIDIA Fake", 100, &fake_real, &fake_capacity}};
  const GeneratedTableList list{tables, 1};
  const auto policy = NumSplitsPolicy::for_device("NVIDIA Fake", 100, list);
  ASSERT_NE(policy.table(), nullptr);
  EXPECT_STREQ(policy.table()->name, "fake");
  NumSplitsShape shape{2, 32, 8, 128, 50, 4096, 0};
  EXPECT_EQ(policy.choose(shape).num_splits, 1052);
  EXPECT_EQ(policy.choose(shape).source, NumSplitsSource::real_length_table);
  shape.max_seqlen = 0;  // unknown: the capacity table
  EXPECT_EQ(policy(shape), 2000 + 2 + 4096);
  EXPECT_EQ(policy.choose(shape).source, NumSplitsSource::capacity_table);

  // Another SM count (a MIG slice) or name: the fallback on the real length, else capacity.
  const auto mig = NumSplitsPolicy::for_device("NVIDIA Fake", 42, list);
  EXPECT_EQ(mig.table(), nullptr);
  const NumSplitsChoice fallback = mig.choose({1, 32, 8, 128, 8192, 131072, 16});
  EXPECT_EQ(fallback.source, NumSplitsSource::one_wave_fallback);
  EXPECT_EQ(fallback.num_splits, one_wave_num_splits(1, 8, 8192, 42));
  EXPECT_EQ(mig.choose({1, 32, 8, 128, 0, 100, 16}).num_splits, 2);  // capacity 100 = 2 tiles
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA Fake2", 100, list).table(), nullptr);
  EXPECT_STREQ(to_string(NumSplitsSource::one_wave_fallback), "one_wave_fallback");
}

TEST(NumSplitsPolicy, RaggedBatchesAskAboutTheirEffectiveBatch) {
  // total / max rounded to nearest, within [1, batch]; unknown total or max: the batch itself.
  NumSplitsShape s{16, 32, 8, 128, 8192, 8192, 0};
  EXPECT_EQ(effective_batch(s), 16);
  s.total_seqlen = 8192 + 15 * 100;  // one long sequence, fifteen short: 1.18 long ones of work
  EXPECT_EQ(effective_batch(s), 1);
  s.total_seqlen = 8192 * 5 + 4096;  // 5.5: halves round up
  EXPECT_EQ(effective_batch(s), 6);
  s.total_seqlen = 8192LL * 40;      // more than the batch (inconsistent input): the batch
  EXPECT_EQ(effective_batch(s), 16);
  s.total_seqlen = 1;
  EXPECT_EQ(effective_batch(s), 1);
  s.max_seqlen = 0;                  // no max length: nothing to compare the total with
  EXPECT_EQ(effective_batch(s), 16);

  // The policy passes the effective batch to the real-length table (fake: 1000 + batch + ...).
  const GeneratedTable tables[] = {{"fake", "NVIDIA Fake", 100, &fake_real, &fake_capacity}};
  const auto policy = NumSplitsPolicy::for_device("NVIDIA Fake", 100, GeneratedTableList{tables, 1});
  NumSplitsShape ragged{16, 32, 8, 128, 8192, 8192, 0};
  const int whole = policy(ragged);
  ragged.total_seqlen = 8192 + 15 * 100;
  EXPECT_EQ(policy(ragged), whole - 15);
}

TEST(NumSplitsPolicy, AutoTableRowsAreTheBatchClassesAndColumnsTheLengthBuckets) {
  int (*small_real)(int, int, int, int, int) = [](int batch, int, int, int tokens, int) {
    return batch * 7 + tokens % 97;  // fits in a byte for the classes and buckets below
  };
  const GeneratedTable tables[] = {{"fake", "NVIDIA Fake", 100, small_real, &fake_capacity}};
  const auto policy = NumSplitsPolicy::for_device("NVIDIA Fake", 100, GeneratedTableList{tables, 1});
  AutoSplitsTable table;
  policy.fill_auto_splits({999, 32, 8, 128, 777, 777, 0, 5}, table);  // batch and lengths are not used
  for (int r : {0, 7, 8, 20})
    for (int i : {0, 9, 13}) {
      const int expected = std::min(255, auto_batch_class_batch(r) * 7 + (1 << i) % 97);
      EXPECT_EQ(table.splits[r][i], expected) << "class " << r << " bucket " << i;
    }
  // What the device then answers for a ragged batch is the host's answer for its effective batch.
  NumSplitsShape ragged{16, 32, 8, 128, 4096, 4096, 0};
  ragged.total_seqlen = 4096 * 3 + 13 * 50;  // effective batch 3
  EXPECT_EQ(auto_split_count(table, ragged.total_seqlen, ragged.max_seqlen, ragged.batch, 255), policy(ragged));
}

TEST(NumSplitsPolicy, CompiledInTables) {
  const GeneratedTableList tables = compiled_in_tables();
#if defined(SPLITKV_HAS_GENERATED_TABLE_H200)
  ASSERT_GE(tables.size, 1u);
  EXPECT_NE(NumSplitsPolicy::for_device("NVIDIA H200", 132).table(), nullptr);
#else
  EXPECT_EQ(tables.size, 0u);  // no heuristics/generated/num_splits_h200.hpp in this tree yet
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA H200", 132).table(), nullptr);
#endif
}

}  // namespace
}  // namespace splitkv
