// Per-sequence split selection ("num_splits = auto"): the length buckets and the clamping that
// the device lookup and the host table filler share.
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
  EXPECT_EQ(SplitsByLength::kBuckets - 1, length_bucket(1 << 30));
  for (int length = 1; length < 200000; length += 37) {
    const int expected = std::min(SplitsByLength::kBuckets - 1,
                                  static_cast<int>(std::floor(std::log2(static_cast<double>(length)) + 0.5)));
    // The float formula can land on the other side of a boundary only at exact midpoints,
    // which are irrational: integers never sit on them.
    ASSERT_EQ(expected, length_bucket(length)) << length;
  }
}

TEST(SequenceSplits, FixedCountIgnoresTheTable) {
  SplitsByLength table;
  for (auto& s : table.splits) s = 7;
  EXPECT_EQ(16, sequence_splits(1000, 16, false, table.splits));
}

TEST(SequenceSplits, AutoTakesTheBucketAndClampsToTheGrid) {
  SplitsByLength table;
  for (int i = 0; i < SplitsByLength::kBuckets; ++i) table.splits[i] = static_cast<unsigned char>(i + 1);
  EXPECT_EQ(11, sequence_splits(1024, 64, true, table.splits));  // bucket 10
  EXPECT_EQ(8, sequence_splits(1 << 20, 8, true, table.splits));  // bucket 20 -> 21, capped at the grid's 8
  table.splits[3] = 0;
  EXPECT_EQ(1, sequence_splits(8, 64, true, table.splits));  // never below one split
}

TEST(PerSequenceGridBound, LargestEntryOfTheBucketsUpToTheCapacity) {
  SplitsByLength table;
  for (auto& s : table.splits) s = 2;
  table.splits[10] = 9;   // lengths near 1024
  table.splits[20] = 64;  // lengths near 2^20: beyond a 131072-token cache
  EXPECT_EQ(9, per_sequence_grid_bound(table, 131072));
  EXPECT_EQ(2, per_sequence_grid_bound(table, 512));
  EXPECT_EQ(9, per_sequence_grid_bound(table, 1024));
  EXPECT_EQ(64, per_sequence_grid_bound(table, 1 << 21));
  EXPECT_EQ(2, per_sequence_grid_bound(table, 0));
}

}  // namespace
}  // namespace splitkv
