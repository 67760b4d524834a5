// Split selection on the device ("num_splits = auto"): the length buckets, batch classes,
// effective batch and clamping that the device lookup and the host table filler share, and the
// persistent kernel's work-item count.
#include <gtest/gtest.h>

#include <cmath>

#include "splitkv/split_partition.hpp"

namespace splitkv {
namespace {

TEST(LengthBucket, NearestPowerOfTwoOnALogScale) {
  EXPECT_EQ(0, length_bucket(0));
  EXPECT_EQ(0, length_bucket(1));
  EXPECT_EQ(1, length_bucket(2));
  EXPECT_EQ(2, length_bucket(3));   // 3 >= 2^1.5 = 2.83
  EXPECT_EQ(12, length_bucket(4096));
  EXPECT_EQ(12, length_bucket(5792));  // 2^12.5 = 5792.6
  EXPECT_EQ(13, length_bucket(5793));
  EXPECT_EQ(AutoSplitsTable::kLengthBuckets - 1, length_bucket(1 << 30));
  for (int length = 1; length < 200000; length += 37) {
    const int expected = std::min(AutoSplitsTable::kLengthBuckets - 1,
                                  static_cast<int>(std::floor(std::log2(static_cast<double>(length)) + 0.5)));
    // The float formula can land on the other side of a boundary only at exact midpoints,
    // which are irrational: integers never sit on them.
    ASSERT_EQ(expected, length_bucket(length)) << length;
  }
}

TEST(AutoBatchClass, RepresentativesAreExactThenQuarterOctaves) {
  const int expected[AutoSplitsTable::kBatchClasses] = {1,   2,   3,   4,   5,   6,   7,    8,    10,   11,
                                                        13,  16,  19,  23,  27,  32,  38,   45,   54,   64,
                                                        76,  91,  108, 128, 152, 181, 215,  256,  304,  362,
                                                        431, 512, 609, 724, 861, 1024, 1218, 1448, 1722, 2048};
  for (int r = 0; r < AutoSplitsTable::kBatchClasses; ++r) {
    EXPECT_EQ(expected[r], auto_batch_class_batch(r)) << r;
    EXPECT_EQ(r, auto_batch_class(expected[r])) << "a representative falls in its own class";
  }
}

TEST(AutoBatchClass, NearestRepresentativeOnALogScale) {
  EXPECT_EQ(0, auto_batch_class(0));
  EXPECT_EQ(0, auto_batch_class(1));
  EXPECT_EQ(7, auto_batch_class(8));
  EXPECT_EQ(8, auto_batch_class(9));   // the 8..10 boundary is sqrt(80) = 8.94: 9 is nearer 10
  EXPECT_EQ(8, auto_batch_class(10));
  EXPECT_EQ(39, auto_batch_class(1 << 20));  // clamped to the last class
  for (int batch = 1; batch < 3000; ++batch) {
    const int c = auto_batch_class(batch);
    const double distance = std::abs(std::log(batch / static_cast<double>(auto_batch_class_batch(c))));
    if (c > 0) ASSERT_LE(distance, std::abs(std::log(batch / static_cast<double>(auto_batch_class_batch(c - 1))))) << batch;
    if (c + 1 < AutoSplitsTable::kBatchClasses)
      ASSERT_LE(distance, std::abs(std::log(batch / static_cast<double>(auto_batch_class_batch(c + 1))))) << batch;
  }
}

TEST(RoundedEffectiveBatch, TotalOverMaxRoundedToNearestWithinOneAndTheBatch) {
  EXPECT_EQ(16, rounded_effective_batch(16LL * 4096, 4096, 16));     // uniform lengths: the batch
  EXPECT_EQ(1, rounded_effective_batch(8192 + 15 * 100, 8192, 16));  // one long sequence, the rest short
  EXPECT_EQ(2, rounded_effective_batch(8192 + 15 * 300, 8192, 16));  // 1.55 -> 2
  EXPECT_EQ(1, rounded_effective_batch(8192 + 15 * 200, 8192, 16));  // 1.37 -> 1
  EXPECT_EQ(7, rounded_effective_batch(0, 0, 7));                    // all empty: the batch
}

AutoSplitsTable numbered_table() {
  AutoSplitsTable table;
  for (int r = 0; r < AutoSplitsTable::kBatchClasses; ++r)
    for (int i = 0; i < AutoSplitsTable::kLengthBuckets; ++i)
      table.splits[r][i] = static_cast<unsigned char>(1 + (r * 3 + i) % 200);
  return table;
}

TEST(AutoSplitCount, LooksUpEffectiveBatchAndMaxLengthAndClampsToTheGrid) {
  const AutoSplitsTable table = numbered_table();
  // 16 sequences of 4096 tokens: class of 16 (11), bucket 12.
  EXPECT_EQ(1 + (11 * 3 + 12), auto_split_count(table, 16LL * 4096, 4096, 16, 128));
  // One sequence of 4096 and 15 of 64: effective batch 1 (class 0), bucket 12.
  EXPECT_EQ(1 + 12, auto_split_count(table, 4096 + 15 * 64, 4096, 16, 128));
  EXPECT_EQ(8, auto_split_count(table, 16LL * 4096, 4096, 16, 8));  // capped at the grid's bound
  AutoSplitsTable zeros;
  EXPECT_EQ(1, auto_split_count(zeros, 4096, 4096, 1, 128));  // never below one split
}

TEST(AutoGridBound, LargestEntryOverReachableClassesAndBuckets) {
  AutoSplitsTable table;
  for (auto& row : table.splits)
    for (auto& s : row) s = 2;
  table.splits[0][10] = 9;    // effective batch 1, lengths near 1024
  table.splits[0][20] = 64;   // lengths near 2^20: beyond a 131072-token cache
  table.splits[11][5] = 40;   // effective batch 16: only reachable with batch >= 15
  EXPECT_EQ(9, auto_grid_bound(table, 4, 131072));
  EXPECT_EQ(2, auto_grid_bound(table, 4, 512));
  EXPECT_EQ(40, auto_grid_bound(table, 16, 512));
  EXPECT_EQ(64, auto_grid_bound(table, 4, 1 << 21));
  EXPECT_EQ(2, auto_grid_bound(table, 0, 0));
}

TEST(WorkItems, LiveSplitsTimesKvHeadsAndOneSplitForAnEmptySequence) {
  EXPECT_EQ(8 * 4, work_items_of_sequence(4096, 4, 8));
  EXPECT_EQ(8 * 2, work_items_of_sequence(100, 4, 8));  // 2 tiles: only 2 of 4 splits hold work
  EXPECT_EQ(8, work_items_of_sequence(0, 4, 8));        // split 0 writes zeros and LSE = -inf
}

}  // namespace
}  // namespace splitkv
