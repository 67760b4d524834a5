#include "splitkv/heuristics/measured_time.hpp"

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using testing::decode_point;
using testing::shape_with;

// 1024 tokens = 16 tiles, timed at 1, 2, 4, 8, 16 splits.
MeasuredShape short_shape() {
  return shape_with({{1, 40.0}, {2, 30.0}, {4, 20.0}, {8, 15.0}, {16, 14.0}}, 0.002, decode_point(1, 1024));
}

TEST(MeasuredTime, ExactCount) {
  const MeasuredTime t = time_at_splits(short_shape(), 8);
  EXPECT_EQ(t.timed, 8);
  EXPECT_EQ(t.match, SplitMatch::exact);
  EXPECT_DOUBLE_EQ(t.time_us, 15.0);
}

TEST(MeasuredTime, SamePartition) {
  // 5 splits of 16 tiles: ceil(16/5) = 4 tiles each, so 4 splits hold work; 4 was timed.
  EXPECT_EQ(splits_with_work(1024, 5), 4);
  const MeasuredTime t = time_at_splits(short_shape(), 5);
  EXPECT_EQ(t.requested, 5);
  EXPECT_EQ(t.timed, 4);
  EXPECT_EQ(t.match, SplitMatch::same_partition);
  EXPECT_DOUBLE_EQ(t.time_us, 20.0);
}

TEST(MeasuredTime, NearestInLog2) {
  // 6 splits of 16 tiles: 3 tiles each, 6 hold work; untimed. 8/6 = 1.33 < 6/4 = 1.5: 8.
  const MeasuredTime six = time_at_splits(short_shape(), 6);
  EXPECT_EQ(six.timed, 8);
  EXPECT_EQ(six.match, SplitMatch::nearest);
  // 3 splits: 6 tiles each, 3 hold work; 4/3 = 1.33 < 3/2 = 1.5: 4.
  EXPECT_EQ(time_at_splits(short_shape(), 3).timed, 4);
}

TEST(MeasuredTime, LogTiesGoToFewerSplits) {
  // 4 is exactly between 2 and 8 in log2: the fewer wins.
  const MeasuredShape shape = shape_with({{2, 10.0}, {8, 9.0}}, 0.002, decode_point(1, 65536));
  EXPECT_EQ(time_at_splits(shape, 4).timed, 2);
}

TEST(MeasuredTime, ClampsToTheTimedRange) {
  // 256 splits of 16 tiles: 16 hold work (one tile each), the largest timed count.
  const MeasuredTime many = time_at_splits(short_shape(), 256);
  EXPECT_EQ(many.timed, 16);
  EXPECT_EQ(many.match, SplitMatch::same_partition);
  // Beyond the timed range without an equivalent partition: the edge.
  const MeasuredShape long_shape = shape_with({{1, 50.0}, {2, 30.0}, {4, 20.0}}, 0.002, decode_point(1, 65536));
  const MeasuredTime beyond = time_at_splits(long_shape, 128);
  EXPECT_EQ(beyond.timed, 4);
  EXPECT_EQ(beyond.match, SplitMatch::nearest);
  // Nonsense requests count as 1 split.
  EXPECT_EQ(time_at_splits(short_shape(), 0).timed, 1);
  EXPECT_EQ(time_at_splits(short_shape(), -3).requested, 1);
}

TEST(MeasuredTime, Names) {
  EXPECT_EQ(to_string(SplitMatch::exact), "exact");
  EXPECT_EQ(to_string(SplitMatch::same_partition), "same_partition");
  EXPECT_EQ(to_string(SplitMatch::nearest), "nearest");
}

}  // namespace
}  // namespace splitkv::heuristics
