#include "splitkv/heuristics/oracle.hpp"

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using testing::shape_with;

TEST(Oracle, FastestWinsWhenNothingIsWithinNoise) {
  // tolerance = max(1%, 2 x 0.5%) = 1%: 9.95 > 9.0 * 1.01, so 4 splits stand alone.
  const OracleChoice c = oracle_choice(shape_with({{1, 10.0}, {2, 9.95}, {4, 9.0}}, 0.005));
  EXPECT_EQ(c.num_splits, 4);
  EXPECT_EQ(c.fastest_splits, 4);
  EXPECT_DOUBLE_EQ(c.fastest_time_us, 9.0);
  EXPECT_EQ(c.tied_counts, 1);
}

TEST(Oracle, TiesWithinOnePercentGoToFewerSplits) {
  // 9.05 <= 9.0 * 1.01 = 9.09: 1 split ties with the fastest (4) and wins; 9.2 does not tie.
  const OracleChoice c = oracle_choice(shape_with({{1, 9.05}, {2, 9.2}, {4, 9.0}}, 0.001));
  EXPECT_EQ(c.num_splits, 1);
  EXPECT_DOUBLE_EQ(c.time_us, 9.05);
  EXPECT_EQ(c.fastest_splits, 4);
  EXPECT_DOUBLE_EQ(c.fastest_time_us, 9.0);
  EXPECT_EQ(c.tied_counts, 2);
}

TEST(Oracle, NoisyMeasurementsWidenTheBand) {
  // cv 3% on the candidate: tolerance = 2 x 3% = 6%, limit 9.54.
  MeasuredShape noisy = shape_with({{1, 9.5}, {4, 9.0}}, 0.001);
  noisy.timings[0].cv = 0.03;
  EXPECT_EQ(oracle_choice(noisy).num_splits, 1);
  noisy.timings[0].time_us = 9.6;  // beyond 9.54
  EXPECT_EQ(oracle_choice(noisy).num_splits, 4);
  // The fastest count's own cv counts too.
  MeasuredShape noisy_fastest = shape_with({{1, 9.5}, {4, 9.0}}, 0.001);
  noisy_fastest.timings[1].cv = 0.03;
  EXPECT_EQ(oracle_choice(noisy_fastest).num_splits, 1);
}

TEST(Oracle, ToleranceRule) {
  EXPECT_DOUBLE_EQ(tie_tolerance(0.0, 0.0), 0.01);
  EXPECT_DOUBLE_EQ(tie_tolerance(0.004, 0.001), 0.01);
  EXPECT_DOUBLE_EQ(tie_tolerance(0.001, 0.02), 0.04);
  EXPECT_DOUBLE_EQ(tie_tolerance(0.03, 0.02), 0.06);
}

TEST(Oracle, EqualMediansPickFewerSplitsAndTheBandIsInclusive) {
  EXPECT_EQ(oracle_choice(shape_with({{2, 5.0}, {8, 5.0}})).num_splits, 2);
  EXPECT_EQ(oracle_choice(shape_with({{2, 5.0}, {8, 5.0}})).fastest_splits, 2);
  // Exactly on the limit counts as tied: 10.1 == 10.0 * 1.01 (in binary, 10.0 * 1.01 rounds to 10.1).
  const OracleChoice c = oracle_choice(shape_with({{1, 10.0 * 1.01}, {2, 10.0}}, 0.0));
  EXPECT_EQ(c.num_splits, 1);
}

TEST(Oracle, OneTimedCount) {
  const OracleChoice c = oracle_choice(shape_with({{16, 3.0}}));
  EXPECT_EQ(c.num_splits, 16);
  EXPECT_EQ(c.fastest_splits, 16);
}

}  // namespace
}  // namespace splitkv::heuristics
