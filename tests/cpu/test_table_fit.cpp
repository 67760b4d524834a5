#include "splitkv/heuristics/table_fit.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using testing::decode_point;
using testing::shape_with;

std::vector<OracleChoice> oracles_of(const std::vector<MeasuredShape>& shapes) {
  std::vector<OracleChoice> out;
  for (const auto& s : shapes) out.push_back(oracle_choice(s));
  return out;
}

// One kv head, so CTAs = batch.
MeasuredShape at(int batch, int length, const std::vector<std::pair<int, double>>& timings, int head_dim = 128,
                 int page_size = 0, int capacity = 0) {
  return shape_with(timings, 0.002, decode_point(batch, length, capacity, 1, head_dim, page_size));
}

// Fastest at `best` splits among 1, 2, 4, 8, 16 (the others 10-50% slower).
MeasuredShape best_at(int batch, int length, int best, int head_dim = 128, int page_size = 0, int capacity = 0) {
  std::vector<std::pair<int, double>> timings;
  for (int s : {1, 2, 4, 8, 16}) timings.emplace_back(s, s == best ? 10.0 : 11.0 + 0.1 * s);
  return at(batch, length, timings, head_dim, page_size, capacity);
}

TEST(Log2Bucket, GeometricMidpoints) {
  EXPECT_EQ(log2_bucket(-5), 0);
  EXPECT_EQ(log2_bucket(0), 0);
  EXPECT_EQ(log2_bucket(1), 0);
  EXPECT_EQ(log2_bucket(2), 1);
  EXPECT_EQ(log2_bucket(3), 2);     // 3 >= 2 x sqrt(2) = 2.83
  EXPECT_EQ(log2_bucket(5), 2);     // 5 < 4 x sqrt(2) = 5.66
  EXPECT_EQ(log2_bucket(6), 3);
  EXPECT_EQ(log2_bucket(181), 7);   // 128 x sqrt(2) = 181.02
  EXPECT_EQ(log2_bucket(182), 8);
  EXPECT_EQ(log2_bucket(6000), 13);   // 4096 x sqrt(2) = 5793 <= 6000
  EXPECT_EQ(log2_bucket(20000), 14);  // < 16384 x sqrt(2) = 23170
  EXPECT_EQ(log2_bucket(std::int64_t(1) << 40), 30);
  EXPECT_EQ(geometric_midpoint(64, 128), 91);
  EXPECT_EQ(geometric_midpoint(128, 256), 182);
  EXPECT_EQ(geometric_midpoint(16, 64), 32);
}

FitOptions power_of_two_ctas() {
  FitOptions o;
  o.cta_buckets_per_octave = 1;
  return o;
}

TEST(TableFit, CellTakesTheLowestGeomeanRatio) {
  // Batches 4 and 5 share the 4-CTA power-of-two bucket. 2 splits: ratios 6/5 and 5/5, geomean
  // 1.095; 4 splits: 5/5 and 5.5/5, geomean 1.049. 4 wins although neither shape's oracle is 4 for both.
  const std::vector<MeasuredShape> shapes = {at(4, 8192, {{1, 10}, {2, 6}, {4, 5}}),
                                             at(5, 8192, {{1, 10}, {2, 5}, {4, 5.5}})};
  const SplitTable t = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}, power_of_two_ctas());
  EXPECT_EQ(t.lookup(4, 1, 128, 8192, 0), 4);
  EXPECT_EQ(t.shapes_in_cell[t.index(0, 0, 0, 0)], 2);
  EXPECT_NEAR(table_geomean_regret(t, shapes, oracles_of(shapes)), std::sqrt(1.1), 1e-12);
}

TEST(TableFit, NearTiesInACellGoToFewerSplits) {
  // 4 splits is 0.1% better than 2: inside the 0.2% cell tolerance, so 2.
  const std::vector<MeasuredShape> shapes = {at(4, 8192, {{1, 20}, {2, 10.01}, {4, 10.0}})};
  EXPECT_EQ(fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}).lookup(4, 1, 128, 8192, 0), 2);
  FitOptions strict;
  strict.cell_tie_tolerance = 0;
  EXPECT_EQ(fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}, strict).lookup(4, 1, 128, 8192, 0),
            4);
}

TEST(TableFit, BetweenAndBeyondGridPoints) {
  // Grid: 4 and 64 CTAs, lengths 1024 and 16384; power-of-two CTA buckets (R = 1).
  const std::vector<MeasuredShape> shapes = {best_at(4, 1024, 8), best_at(64, 1024, 1), best_at(4, 16384, 16),
                                             best_at(64, 16384, 2)};
  const SplitTable t = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}, power_of_two_ctas());
  EXPECT_EQ(t.grid.cta_bucket_min, 2);
  EXPECT_EQ(t.grid.cta_buckets, 5);        // 4 .. 64
  EXPECT_EQ(t.grid.length_log2_min, 10);
  EXPECT_EQ(t.grid.length_buckets, 5);     // 1024 .. 16384
  // On the grid points.
  EXPECT_EQ(t.lookup(4, 1, 128, 1024, 0), 8);
  EXPECT_EQ(t.lookup(64, 1, 128, 16384, 0), 2);
  // Beyond the edges: clamp to the edge bucket (10^6 CTAs behave like 64; 100 tokens like
  // 1024, but capped at its 2 tiles; 10^6 tokens like 16384). Below the fewest CTAs the
  // answer doubles per bucket (2 CTAs: 8 x 2 = 16), never above the most splits timed (16).
  EXPECT_EQ(t.lookup(2, 1, 128, 1024, 0), 16);
  EXPECT_EQ(t.lookup(1, 1, 128, 1024, 0), 16);
  EXPECT_EQ(t.lookup(1000000, 1, 128, 1024, 0), 1);
  EXPECT_EQ(t.lookup(1, 1, 128, 100, 0), 2);
  EXPECT_EQ(t.lookup(4, 1, 128, 1000000, 0), 16);
  EXPECT_EQ(t.lookup(4, 1, 128, 0, 0), 1);
  // Between: batch x kv_heads decides, not the raw batch (2 batches x 2 heads = 4 CTAs).
  EXPECT_EQ(t.lookup(2, 2, 128, 1024, 0), 8);
  // 5 CTAs < 4 x sqrt(2) stays with 4 CTAs; 6 moves to the (filled) 8-CTA bucket.
  EXPECT_EQ(t.lookup(5, 1, 128, 1024, 0), 8);
  // 1448 tokens < 1024 x sqrt(2) = 1448.2 stays in the 1024 bucket; 1449 moves up.
  EXPECT_EQ(t.grid.length_index(1448), 0);
  EXPECT_EQ(t.grid.length_index(1449), 1);
}

TEST(TableFit, BelowTheFewestCtasTheFillingCtasStay) {
  // 8 CTAs want 4 splits (32 CTAs after splitting); timed up to 64 splits.
  std::vector<std::pair<int, double>> timings;
  for (int s : {1, 2, 4, 8, 16, 32, 64}) timings.emplace_back(s, s == 4 ? 10.0 : 12.0);
  const std::vector<MeasuredShape> shapes = {at(8, 65536, timings), best_at(64, 65536, 1)};
  const SplitTable t = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}, power_of_two_ctas());
  EXPECT_EQ(t.max_splits, 64);
  EXPECT_EQ(t.lookup(8, 1, 128, 65536, 0), 4);
  EXPECT_EQ(t.lookup(4, 1, 128, 65536, 0), 8);
  EXPECT_EQ(t.lookup(2, 1, 128, 65536, 0), 16);
  EXPECT_EQ(t.lookup(1, 1, 128, 65536, 0), 32);   // 8 CTAs = bucket 3, 1 CTA = bucket 0: 4 << 3
  EXPECT_EQ(t.lookup(1, 1, 128, 1000, 0), 16);    // ...capped at the 16 tiles of 1000 tokens
  EXPECT_EQ(t.grid.octaves_below(1), 3);
  EXPECT_EQ(t.grid.octaves_below(8), 0);
  EXPECT_EQ(t.grid.octaves_below(1000), 0);
  // Quarter-octave buckets count the same octaves, rounded up (7 CTAs: half an octave short).
  const SplitTable q = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {});
  EXPECT_EQ(q.grid.cta_buckets_per_octave, 4);
  EXPECT_EQ(q.grid.octaves_below(1), 3);
  EXPECT_EQ(q.grid.octaves_below(7), 1);
  EXPECT_EQ(q.lookup(7, 1, 128, 65536, 0), 8);
  EXPECT_EQ(q.lookup(1, 1, 128, 65536, 0), 32);
}

TEST(TableFit, CtaBucketsOfAQuarterOctave) {
  // R = 1 is the power-of-two bucket, halves up at 2^i * sqrt(2).
  for (std::int64_t v : std::vector<std::int64_t>{1, 2, 3, 5, 6, 11, 12, 181, 182, 1000000, std::int64_t(1) << 40})
    EXPECT_EQ(cta_bucket(v, 1), log2_bucket(v)) << v;
  // R = 4: bucket k is centred on 2^(k/4); boundaries at 2^((k +- 1/2) / 4).
  EXPECT_EQ(cta_bucket(1, 4), 0);
  EXPECT_EQ(cta_bucket(128, 4), 28);
  EXPECT_EQ(cta_bucket(139, 4), 28);   // 2^(28.5/4) = 139.6
  EXPECT_EQ(cta_bucket(140, 4), 29);
  EXPECT_EQ(cta_bucket(144, 4), 29);   // 144 CTAs sit with 152, not with 128
  EXPECT_EQ(cta_bucket(166, 4), 30);   // 2^(29.5/4) = 166.0: halves up
  EXPECT_EQ(cta_bucket(192, 4), 30);
  EXPECT_EQ(cta_bucket(256, 4), 32);
  EXPECT_EQ(cta_bucket_center(29, 4), 152);
  // Thresholds are the exact ceilings: 2^30 * 2^(1/8) = 1170923761.958...
  EXPECT_EQ(cta_bucket_thresholds(4).front(), 1170923762u);
  EXPECT_EQ(cta_bucket_thresholds(1).front(), 1518500250u);  // 2^30 * sqrt(2) = 1518500249.98
}

TEST(TableFit, QuarterOctaveCtasKeepWavesApart) {
  // 128 CTAs want 2 splits (256 CTAs: one wave of 2 x 132 slots), 144 CTAs want 3 (2 splits
  // would spill a second wave). Power-of-two buckets merge them; quarter octaves do not.
  const std::vector<MeasuredShape> shapes = {at(128, 16384, {{1, 20}, {2, 10}, {3, 13}}),
                                             at(144, 16384, {{1, 20}, {2, 16}, {3, 12}})};
  const SplitTable quarter = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {});
  EXPECT_EQ(quarter.lookup(128, 1, 128, 16384, 0), 2);
  EXPECT_EQ(quarter.lookup(144, 1, 128, 16384, 0), 3);
  const SplitTable coarse = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}, power_of_two_ctas());
  EXPECT_EQ(coarse.lookup(144, 1, 128, 16384, 0), coarse.lookup(128, 1, 128, 16384, 0));
}

TEST(TableFit, WaveAwareCellsAvoidTheCliffNextToTheMeasuredCount) {
  // 132 SMs x 2 CTAs = 264 slots. 88 CTAs x 3 splits fill one wave exactly and are fastest
  // there; 104 CTAs x 3 = 312 spill a second wave (1.3x), where 8 splits are fine. 88 and 96
  // share a quarter-octave bucket, so a cell decided on 88 alone gives 96 CTAs 3 splits (288,
  // the cliff). With waves counted, the range above 88 is scored by 104, the nearest count
  // with the same waves at 3 splits, and 8 splits win the cell.
  const auto ladder = [](int ctas, double at3, double at8) {
    return at(ctas, 8192, {{1, 30}, {2, 20}, {3, at3}, {8, at8}});
  };
  const std::vector<MeasuredShape> shapes = {ladder(88, 10.0, 10.8), ladder(104, 13.0, 10.0)};
  const std::vector<OracleChoice> oracles = oracles_of(shapes);
  FitOptions own_cell;  // sm_count 0: every cell on its own shapes
  const SplitTable plain = fit_split_table(shapes, oracles, LengthAxis::real_length, {}, own_cell);
  EXPECT_EQ(cta_bucket(88, 4), cta_bucket(96, 4));
  EXPECT_EQ(plain.lookup(96, 1, 128, 8192, 0), 3);
  FitOptions waves;
  waves.sm_count = 132;
  waves.wave_mix = 1.0;
  const SplitTable aware = fit_split_table(shapes, oracles, LengthAxis::real_length, {}, waves);
  EXPECT_EQ(aware.lookup(96, 1, 128, 8192, 0), 8);
  EXPECT_EQ(aware.lookup(104, 1, 128, 8192, 0), 8);
  // At 1 CTA per SM (head_dim 256: 132 slots) 3 splits spill already at 45 CTAs, so both
  // measured counts sit in the same regime and the rule has nothing to correct.
  EXPECT_EQ(resident_ctas_per_sm(256), 1);
  EXPECT_EQ(resident_ctas_per_sm(128), 2);
}

TEST(TableFit, WaveAwareCellsWithoutOwnShapesAreDecidedFromMeasuredCountsInReach) {
  // 8 and 16 CTAs measured, 12 not: its cell is decided by the measured counts with the same
  // waves (both one wave at 16 splits), not copied from the nearest cell (ties to the larger,
  // 8 CTAs' 32 splits, which would put 384 CTAs in two waves).
  const std::vector<MeasuredShape> shapes = {at(8, 32768, {{8, 14}, {16, 11}, {32, 10}}),
                                             at(16, 32768, {{8, 13}, {16, 10}, {32, 12}})};
  FitOptions waves;
  waves.sm_count = 132;
  const SplitTable aware = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {}, waves);
  EXPECT_EQ(aware.shapes_in_cell[aware.index(0, 0, 0, aware.grid.cta_index(12))], 0);
  EXPECT_EQ(aware.lookup(12, 1, 128, 32768, 0), 16);
  const SplitTable plain = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {});
  EXPECT_EQ(plain.lookup(12, 1, 128, 32768, 0), 32);
}

TEST(TableFit, EmptyCellsCopyTheNearestDecidedCell) {
  // Decided: 4 CTAs -> 8 splits, 64 CTAs -> 1 split (one length). 8 CTAs is nearest to 4
  // (8), 32 to 64 (1), and 16 is equally far from both: the larger count wins.
  const std::vector<MeasuredShape> shapes = {best_at(4, 8192, 8), best_at(64, 8192, 1)};
  const SplitTable t = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {});
  // Quarter-octave neighbours in between follow the same rule (5 CTAs: 4; 45: 64).
  EXPECT_EQ(t.lookup(5, 1, 128, 8192, 0), 8);
  EXPECT_EQ(t.lookup(45, 1, 128, 8192, 0), 1);
  EXPECT_EQ(t.lookup(8, 1, 128, 8192, 0), 8);
  EXPECT_EQ(t.lookup(32, 1, 128, 8192, 0), 1);
  EXPECT_EQ(t.lookup(16, 1, 128, 8192, 0), 8);
  EXPECT_EQ(t.shapes_in_cell[t.index(0, 0, 0, 2)], 0);  // marked as filled
}

TEST(TableFit, EmptyPlanesCopyTheSameHeadDimsNearestLayout) {
  // head_dim 64 only measured paged, head_dim 128 only contiguous.
  const std::vector<MeasuredShape> shapes = {best_at(4, 8192, 16, 64, 16), best_at(4, 8192, 2, 128, 0)};
  const SplitTable t = fit_split_table(shapes, oracles_of(shapes), LengthAxis::real_length, {{16}});
  EXPECT_EQ(t.grid.layout_classes(), 2);
  EXPECT_EQ(t.lookup(4, 1, 64, 8192, 16), 16);
  EXPECT_EQ(t.lookup(4, 1, 64, 8192, 0), 16);    // contiguous plane copied from paged
  EXPECT_EQ(t.lookup(4, 1, 128, 8192, 64), 2);   // paged plane copied from contiguous
  // head_dim classes split at geometric midpoints: 90 -> 64, 91 -> 128; 512 -> 128 (edge).
  EXPECT_EQ(t.lookup(4, 1, 90, 8192, 16), 16);
  EXPECT_EQ(t.lookup(4, 1, 91, 8192, 16), 2);
  EXPECT_EQ(t.lookup(4, 1, 512, 8192, 16), 2);
}

TEST(TableFit, CapacityTableKeysOnCapacity) {
  // 2048 real tokens in a 131072-token cache want 4 splits; 131072 real tokens want 16.
  const std::vector<MeasuredShape> shapes = {best_at(4, 2048, 4, 128, 0, 131072), best_at(4, 131072, 16)};
  const std::vector<OracleChoice> oracles = oracles_of(shapes);
  const SplitTable real = fit_split_table(shapes, oracles, LengthAxis::real_length, {});
  const SplitTable cap = fit_split_table(shapes, oracles, LengthAxis::capacity, {});
  EXPECT_EQ(real.lookup(shapes[0]), 4);
  EXPECT_EQ(real.lookup(shapes[1]), 16);
  // Both shapes share the capacity cell, so one count serves both: 4 -> sqrt(1 x 11.4/10) =
  // 1.068 beats 16 -> sqrt(12.6/10 x 1) = 1.122.
  EXPECT_EQ(cap.grid.length_buckets, 1);
  EXPECT_EQ(cap.lookup(shapes[0]), cap.lookup(shapes[1]));
  EXPECT_EQ(cap.lookup(shapes[1]), 4);
}

TEST(FitHeuristic, PageSizesGetTablesOnlyWhenItPays) {
  std::vector<MeasuredShape> same, different;
  for (int batch : {4, 16}) {
    same.push_back(best_at(batch, 8192, 8, 128, 16));
    same.push_back(best_at(batch, 8192, 8, 128, 64));
    different.push_back(best_at(batch, 8192, 2, 128, 16));
    different.push_back(best_at(batch, 8192, 16, 128, 64));
  }
  const FittedHeuristic pooled = fit_heuristic(same);
  EXPECT_FALSE(pooled.notes.page_sizes_separate);
  EXPECT_EQ(pooled.real_length.grid.layout_classes(), 2);
  const FittedHeuristic separate = fit_heuristic(different);
  EXPECT_TRUE(separate.notes.page_sizes_separate);
  ASSERT_EQ(separate.real_length.grid.layout_classes(), 3);
  EXPECT_EQ(separate.real_length.lookup(4, 1, 128, 8192, 16), 2);
  EXPECT_EQ(separate.real_length.lookup(4, 1, 128, 8192, 64), 16);
  // Page sizes between classes split at the geometric midpoint 32.
  EXPECT_EQ(separate.real_length.lookup(4, 1, 128, 8192, 31), 2);
  EXPECT_EQ(separate.real_length.lookup(4, 1, 128, 8192, 32), 16);
  EXPECT_EQ(separate.real_length.lookup(4, 1, 128, 8192, 256), 16);
  EXPECT_GT(separate.notes.paged_geomean_pooled, separate.notes.paged_geomean_separate);
}

TEST(FitHeuristic, ReportsWhatAPerDtypeTableWouldGain) {
  std::vector<MeasuredShape> shapes = {best_at(4, 8192, 8), best_at(16, 8192, 2)};
  MeasuredShape fp16 = best_at(4, 8192, 8);
  fp16.point.dtype = DType::fp16;
  shapes.push_back(fp16);
  const FittedHeuristic fit = fit_heuristic(shapes);
  ASSERT_EQ(fit.notes.dtype_checks.size(), 2u);
  EXPECT_EQ(fit.notes.dtype_checks[0].dtype, "bf16");
  EXPECT_EQ(fit.notes.dtype_checks[1].shapes, 1);
  EXPECT_DOUBLE_EQ(fit.notes.dtype_checks[1].geomean_own_table, 1.0);
}

// The wave guard by hand (heuristics/FIT.md, "Wave guard"): cost = waves of 264 slots (132 SMs x 2)
// x (64-token tiles per split + kWaveGuardWaveOverheadTiles), for the splits that hold work.
TEST(WaveGuard, FewerSplitsWhenTheLastWaveIsNearlyEmpty) {
  static_assert(kWaveGuardWaveOverheadTiles == 4, "the cases below count 4 tiles per wave");
  // Cost = waves x (tiles per split + 4). 96 CTAs x 3 splits of 128 tiles: 43 tiles each, 288
  // CTAs, 2 waves: 2 x 47 = 94. The most splits with one wave: 264 / 96 = 2 (on the ladder): 64
  // tiles, 192 CTAs, 1 wave: 68, and 68 x 1.1 < 94.
  EXPECT_EQ(wave_guard(3, 96, 8192, 264, 10, 128), 2);
  // At 30% still (68 x 1.3 = 88.4 < 94); at 40% no longer (95.2), and the search upward finds 8
  // splits (16 tiles, 768 CTAs, 3 waves: 60, and 60 x 1.4 < 94); at 80% nothing is cheaper enough.
  EXPECT_EQ(wave_guard(3, 96, 8192, 264, 30, 128), 2);
  EXPECT_EQ(wave_guard(3, 96, 8192, 264, 40, 128), 8);
  EXPECT_EQ(wave_guard(3, 96, 8192, 264, 80, 128), 3);
  // The overhead decides at 35%: 68 x 1.35 = 91.8 < 94, so 2. Counting tiles alone (86 against
  // 64 x 1.35 = 86.4) would have gone on to 8 splits of 16 tiles and three waves.
  EXPECT_EQ(wave_guard(3, 96, 8192, 264, 35, 128), 2);
}

TEST(WaveGuard, MoreSplitsWhenTheLastWaveIsPoorlyFilled) {
  // 96 CTAs x 2 splits of 313 tiles: 157 tiles, 192 CTAs, 1 wave: 161. Candidates 3 (105 tiles,
  // 2 waves: 218), 4 (79, 2: 166), 6 (53, 3: 171), 8 (40 tiles, 768 CTAs, 3 waves: 132): 8.
  EXPECT_EQ(wave_guard(2, 96, 20000, 264, 10, 128), 8);
  // At 25% the three waves' overhead keeps 2 (132 x 1.25 = 165 > 161; tiles alone, 120 x 1.25 =
  // 150 < 157, would have taken 8).
  EXPECT_EQ(wave_guard(2, 96, 20000, 264, 25, 128), 2);
  // 94 tiles: 8 splits would leave 12 tiles each (< 16) and are not asked; 4 (24 tiles, 2 waves:
  // 56) and 6 (16, 3: 60) cost more than 2 (47 tiles, 1 wave: 51): the table stands.
  EXPECT_EQ(wave_guard(2, 96, 6000, 264, 10, 128), 2);
  // 24 CTAs x 16 splits of 782 tiles: 49 tiles, 384 CTAs, 2 waves: 106; one wave fewer (8: 98
  // tiles, 1 wave: 102) is not cheaper by 10%; above, 24 (33 tiles, 3 waves: 111), 32 (25, 3:
  // 87), 48 (17, 5: 105), 64 (13 tiles: not asked): 32. At most the table's most splits: 24 is not
  // cheaper, so 16.
  EXPECT_EQ(wave_guard(16, 24, 50000, 264, 10, 128), 32);
  EXPECT_EQ(wave_guard(16, 24, 50000, 264, 10, 24), 16);
  // At most kWaveGuardMoreFactor times the table's count: from 4 (196 tiles, 1 wave: 200) the
  // search stops at 16: 6 (131, 1: 135), 8 (98, 1: 102), 12 (66, 2: 140), 16 (49, 2: 106): 8.
  EXPECT_EQ(wave_guard(4, 24, 50000, 264, 10, 128), 8);
}

TEST(WaveGuard, OnlyWhereThePlaneNeverMeasuredTheCtaCount) {
  const std::vector<std::int64_t> measured = {48, 88, 104};
  EXPECT_EQ(guard_unmeasured_ctas(2, 96, 20000, 128, measured, 132, 10, 128), 8);
  EXPECT_EQ(guard_unmeasured_ctas(2, 104, 20000, 128, measured, 132, 10, 128), 2);  // measured: stands
  EXPECT_EQ(guard_unmeasured_ctas(2, 96, 20000, 128, measured, 0, 10, 128), 2);     // no SM count
  EXPECT_EQ(guard_unmeasured_ctas(2, 96, 20000, 128, measured, 132, -1, 128), 2);   // guard off
  // head_dim 256: one resident CTA per SM, 132 slots: 2 splits are 1.45 waves (2 x 161 = 322), and
  // 4 (79 tiles, 384 CTAs, 3 waves: 249) is cheaper by more than 10%; 6 (285) and 8 (40 tiles, 6
  // waves: 264) beat the margin too, but 4 is the cheapest.
  EXPECT_EQ(guard_unmeasured_ctas(2, 96, 20000, 256, measured, 132, 10, 128), 4);
}

// At a measured CTA count the table stands unless its count spills a last wave of at most
// kWaveGuardSparseWavePercent of the slots, all of it full-length splits (heuristics/FIT.md, "What
// the 48-CTA family is"): validation's 48 CTAs x 6 splits at L1500.
TEST(WaveGuard, AtMeasuredCountsOnlyASparseSpillOfFullSplits) {
  static_assert(kWaveGuardSparseWavePercent == 25, "the cases below count a quarter of 264 slots");
  // L1500: 24 tiles, 6 splits of 4, 288 CTAs: the last wave is 24 CTAs (9% of 264) of split 5,
  // 4 tiles like the rest.
  EXPECT_TRUE(spills_sparse_wave_of_full_splits(6, 48, 1500, 264));
  // L2048: 32 tiles, 6 per split, split 5 holds 2: the spilled CTAs are short.
  EXPECT_FALSE(spills_sparse_wave_of_full_splits(6, 48, 2048, 264));
  // L1600: 25 tiles, 5 per split, so 5 live splits: 240 CTAs, one wave.
  EXPECT_FALSE(spills_sparse_wave_of_full_splits(6, 48, 1600, 264));
  // 64 CTAs x 8 splits of 4096 tokens (8 tiles each): 512 CTAs, the last wave 248 of 264: not sparse.
  EXPECT_FALSE(spills_sparse_wave_of_full_splits(8, 64, 4096, 264));
  // 88 CTAs x 4 splits of 20000 tokens (313 tiles: 79 per split, the last 76): the last wave
  // (88 CTAs, 33%) starts in split 3, the short one, and is not sparse either.
  EXPECT_FALSE(spills_sparse_wave_of_full_splits(4, 88, 20000, 264));
  // One wave, or no work: nothing spills.
  EXPECT_FALSE(spills_sparse_wave_of_full_splits(4, 48, 1500, 264));
  EXPECT_FALSE(spills_sparse_wave_of_full_splits(6, 48, 0, 264));

  const std::vector<std::int64_t> measured = {48, 88, 104};
  // 48 is measured, and 6 splits of L1500 spill sparsely: the guard runs. 2 waves x (4 + 4) = 16
  // against the most splits in one wave, 264 / 48 = 5, on the ladder 4: 6 tiles, 1 wave: 10.
  EXPECT_EQ(guard_unmeasured_ctas(6, 48, 1500, 128, measured, 132, 5, 128), 4);
  // The same count at L2048 stands: its spill is split 5's 2 tiles, as the cell's lengths measured.
  EXPECT_EQ(guard_unmeasured_ctas(6, 48, 2048, 128, measured, 132, 5, 128), 6);
}

}  // namespace
}  // namespace splitkv::heuristics
