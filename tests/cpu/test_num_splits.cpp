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

int fake_fp8_real(int batch, int, int, int tokens, int) { return 3000 + batch + tokens; }
int fake_fp8_capacity(int batch, int, int, int tokens, int) { return 4000 + batch + tokens; }

TEST(NumSplitsPolicy, AnFp8CacheGetsItsOwnTableElseItsGpus16BitTable) {
  // The fp8 table first, so that a 16-bit request finding it is no accident of order.
  const GeneratedTable tables[] = {{"fp8_fake", "NVIDIA Fake", 100, &fake_fp8_real, &fake_fp8_capacity, "fp8_e4m3"},
                                   {"fake", "NVIDIA Fake", 100, &fake_real, &fake_capacity},
                                   {"other", "NVIDIA Other", 100, &fake_real, &fake_capacity}};
  const GeneratedTableList list{tables, 3};
  const NumSplitsShape shape{2, 32, 8, 128, 50, 4096, 0};

  const auto fp8 = NumSplitsPolicy::for_device("NVIDIA Fake", 100, NumSplitsKvDtype::fp8_e4m3, list);
  ASSERT_NE(fp8.table(), nullptr);
  EXPECT_STREQ(fp8.table()->name, "fp8_fake");
  EXPECT_STREQ(fp8.table()->kv_dtype, "fp8_e4m3");
  EXPECT_EQ(fp8(shape), 3000 + 2 + 50);
  NumSplitsShape capacity_only = shape;
  capacity_only.max_seqlen = 0;
  EXPECT_EQ(fp8.choose(capacity_only).num_splits, 4000 + 2 + 4096);
  EXPECT_EQ(fp8.choose(capacity_only).source, NumSplitsSource::capacity_table);

  // A 16-bit request, named or by default, never gets the fp8 table.
  for (const NumSplitsPolicy& sixteen : {NumSplitsPolicy::for_device("NVIDIA Fake", 100, list),
                                         NumSplitsPolicy::for_device("NVIDIA Fake", 100,
                                                                     NumSplitsKvDtype::sixteen_bit, list)}) {
    ASSERT_NE(sixteen.table(), nullptr);
    EXPECT_STREQ(sixteen.table()->name, "fake");
    EXPECT_EQ(sixteen(shape), 1000 + 2 + 50);
  }
  const GeneratedTableList fp8_only{tables, 1};
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA Fake", 100, fp8_only).table(), nullptr);
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA Fake", 100, fp8_only)(shape), one_wave_num_splits(2, 8, 50, 100));

  // No fp8 table for this GPU: its 16-bit one, never another GPU's or another SM count's.
  const auto reused = NumSplitsPolicy::for_device("NVIDIA Other", 100, NumSplitsKvDtype::fp8_e4m3, list);
  ASSERT_NE(reused.table(), nullptr);
  EXPECT_STREQ(reused.table()->name, "other");
  EXPECT_STREQ(reused.table()->kv_dtype, "");
  EXPECT_EQ(reused(shape), 1000 + 2 + 50);
  const GeneratedTableList sixteen_only{tables + 1, 1};
  const auto reused_here = NumSplitsPolicy::for_device("NVIDIA Fake", 100, NumSplitsKvDtype::fp8_e4m3, sixteen_only);
  ASSERT_NE(reused_here.table(), nullptr);
  EXPECT_STREQ(reused_here.table()->name, "fake");
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA Fake", 42, NumSplitsKvDtype::fp8_e4m3, list).table(), nullptr);
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA Third", 100, NumSplitsKvDtype::fp8_e4m3, list).table(), nullptr);
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA Fake", 42, NumSplitsKvDtype::fp8_e4m3, list)(shape),
            one_wave_num_splits(2, 8, 50, 42));
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
  const GeneratedTable* sixteen = NumSplitsPolicy::for_device("NVIDIA H200", 132).table();
  ASSERT_NE(sixteen, nullptr);
  EXPECT_STREQ(sixteen->name, "h200");
  EXPECT_STREQ(sixteen->kv_dtype, "");
#else
  EXPECT_EQ(NumSplitsPolicy::for_device("NVIDIA H200", 132).table(), nullptr);
#endif
#if !defined(SPLITKV_HAS_GENERATED_TABLE_H200) && !defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200)
  EXPECT_EQ(tables.size, 0u);  // no heuristics/generated/num_splits_*h200.hpp in this tree yet
#endif
}

#if defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200)
TEST(NumSplitsPolicy, CompiledInFp8TableAnswersAsItsHeader) {
  const auto policy = NumSplitsPolicy::for_device("NVIDIA H200", 132, NumSplitsKvDtype::fp8_e4m3);
  ASSERT_NE(policy.table(), nullptr);
  EXPECT_STREQ(policy.table()->name, "fp8_h200");
  EXPECT_STREQ(policy.table()->kv_dtype, generated::fp8_h200::kKvDtype);
  EXPECT_EQ(policy.table()->sm_count, generated::fp8_h200::kSmCount);
  namespace fp8 = generated::fp8_h200;
  struct Case {
    int batch, num_kv_heads, head_dim, max_seqlen, capacity, page_size;
  };
  int differs_from_16bit = 0;
  for (const Case& c : {Case{1, 8, 128, 8192, 8192, 0}, Case{4, 8, 128, 2048, 131072, 16},
                        Case{16, 4, 128, 32768, 32768, 0}, Case{2, 32, 64, 4096, 4096, 16},
                        Case{64, 8, 256, 1024, 65536, 0}}) {
    const NumSplitsShape real{c.batch, 4 * c.num_kv_heads, c.num_kv_heads, c.head_dim, c.max_seqlen, c.capacity,
                              c.page_size};
    NumSplitsShape capacity_only = real;
    capacity_only.max_seqlen = 0;
    EXPECT_EQ(policy(real), fp8::determine_num_splits_real_length(c.batch, c.num_kv_heads, c.head_dim, c.max_seqlen,
                                                                   c.page_size))
        << c.batch << " x " << c.num_kv_heads << " at " << c.max_seqlen;
    EXPECT_EQ(policy(capacity_only), fp8::determine_num_splits_capacity_only(c.batch, c.num_kv_heads, c.head_dim,
                                                                             c.capacity, c.page_size))
        << c.batch << " x " << c.num_kv_heads << " in " << c.capacity;
#if defined(SPLITKV_HAS_GENERATED_TABLE_H200)
    differs_from_16bit += policy(real) != NumSplitsPolicy::for_device("NVIDIA H200", 132)(real) ? 1 : 0;
#endif
  }
#if defined(SPLITKV_HAS_GENERATED_TABLE_H200)
  // Else the shapes above could not tell which table answered.
  EXPECT_GT(differs_from_16bit, 0);
#endif
  // The auto table is the fp8 table's too.
  AutoSplitsTable table;
  policy.fill_auto_splits({1, 32, 8, 128, 0, 0, 16}, table);
  unsigned char row[kAutoLengthBuckets];
  fp8::fill_splits_by_length(auto_batch_class_batch(3), 8, 128, 16, row, kAutoLengthBuckets);
  for (int i = 0; i < kAutoLengthBuckets; ++i) {
    EXPECT_EQ(table.splits[3][i], std::max<unsigned char>(row[i], 1)) << "bucket " << i;
  }
}
#endif

}  // namespace
}  // namespace splitkv
