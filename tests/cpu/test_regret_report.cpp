#include "splitkv/heuristics/regret_report.hpp"

#include <cmath>

#include <set>
#include <sstream>
#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "splitkv/heuristics/synthetic_results.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using splitkv::testing::contains;
using testing::decode_point;
using testing::shape_with;

Policy fixed(int splits) {
  return {"fixed_" + std::to_string(splits), "always", false, [splits](const MeasuredShape&) {
            return PolicyPick{splits, splits};
          }};
}

using testing::row_for;

TEST(RegretStats, HandComputed) {
  // geomean (1 x 1 x 1.21 x 1.1)^(1/4) = 1.331^(1/4); p95 of 4 values = the 4th (ceil(3.8));
  // within 5%: two of four.
  const RegretStats s = regret_stats({1.0, 1.21, 1.0, 1.1}, 3);
  EXPECT_EQ(s.shapes, 4);
  EXPECT_NEAR(s.geomean, std::pow(1.331, 0.25), 1e-12);
  EXPECT_DOUBLE_EQ(s.p95, 1.21);
  EXPECT_DOUBLE_EQ(s.max, 1.21);
  EXPECT_DOUBLE_EQ(s.within_5pct, 0.5);
  EXPECT_DOUBLE_EQ(s.exact_share, 0.75);
  // 20 values 1.00, 1.01, ..., 1.19: p95 is the 19th smallest (ceil(19.0) = 19): 1.18.
  std::vector<double> twenty;
  for (int i = 0; i < 20; ++i) twenty.push_back(1.0 + 0.01 * i);
  EXPECT_DOUBLE_EQ(regret_stats(twenty).p95, 1.0 + 0.01 * 18);
  EXPECT_DOUBLE_EQ(regret_stats(twenty).within_5pct, 6.0 / 20.0);  // 1.00 .. 1.05
  EXPECT_EQ(regret_stats({}).shapes, 0);
}

TEST(EvaluatePolicies, RegretIsPolicyTimeOverFastest) {
  // Shape A: fastest 4 splits (10 us); shape B: fastest 1 split (20 us), in a big cache.
  const MeasuredShape a = shape_with({{1, 30.0}, {2, 15.0}, {4, 10.0}}, 0.002, decode_point(1, 8192));
  const MeasuredShape b = shape_with({{1, 20.0}, {2, 22.0}, {4, 26.0}}, 0.002, decode_point(64, 8192, 131072));
  const Evaluation e = evaluate_policies("in_sample", {a, b}, {fixed(1), fixed(2), fixed(3)});
  ASSERT_EQ(e.shapes.size(), 2u);
  EXPECT_DOUBLE_EQ(e.shapes[0].outcomes[0].regret, 3.0);  // 30 / 10
  EXPECT_DOUBLE_EQ(e.shapes[1].outcomes[0].regret, 1.0);
  EXPECT_DOUBLE_EQ(e.shapes[0].outcomes[1].regret, 1.5);
  EXPECT_DOUBLE_EQ(e.shapes[1].outcomes[1].regret, 1.1);
  // 3 splits was not timed: 128 tiles / 3 = 43-tile splits, 3 hold work; nearest in log2 is
  // 4 (4/3 < 3/2): 10/10 and 26/20.
  EXPECT_EQ(e.shapes[0].outcomes[2].measured.timed, 4);
  EXPECT_EQ(e.shapes[0].outcomes[2].measured.match, SplitMatch::nearest);
  EXPECT_DOUBLE_EQ(e.shapes[1].outcomes[2].regret, 1.3);

  const auto rows = summarize(e);
  const RegretSummaryRow& two = row_for(rows, "all", "fixed_2");
  EXPECT_EQ(two.stats.shapes, 2);
  EXPECT_NEAR(two.stats.geomean, std::sqrt(1.5 * 1.1), 1e-12);
  EXPECT_DOUBLE_EQ(two.stats.max, 1.5);
  EXPECT_DOUBLE_EQ(two.stats.within_5pct, 0.0);
  EXPECT_DOUBLE_EQ(row_for(rows, "all", "fixed_3").stats.exact_share, 0.0);
  // Subsets: shape B alone has capacity above its length.
  EXPECT_EQ(row_for(rows, "capacity_gt_length", "fixed_1").stats.shapes, 1);
  EXPECT_DOUBLE_EQ(row_for(rows, "capacity_gt_length", "fixed_1").stats.geomean, 1.0);
  EXPECT_DOUBLE_EQ(row_for(rows, "capacity_eq_length", "fixed_1").stats.geomean, 3.0);
}

TEST(EvaluatePolicies, Fa2CapacityIsTimedAtItsNonEmptySplits) {
  // batch 1, 8 kv heads, d=128, 8192 real tokens in a 131072 cache: FA2 picks 28 splits of
  // the capacity, of which 2 overlap the real tokens (see test_baseline_policies).
  const MeasuredShape s = shape_with({{1, 40.0}, {2, 25.0}, {32, 10.0}}, 0.002, decode_point(1, 8192, 131072));
  const FittedHeuristic fit = fit_heuristic({s});
  const Evaluation e = evaluate_policies("in_sample", {s}, all_policies(fit, 132));
  std::size_t k = 0;
  while (e.policies[k] != "fa2_capacity") ++k;
  EXPECT_EQ(e.shapes[0].outcomes[k].pick.splits, 28);
  EXPECT_EQ(e.shapes[0].outcomes[k].measured.timed, 2);
  EXPECT_DOUBLE_EQ(e.shapes[0].outcomes[k].regret, 2.5);
}

TEST(Evaluate, OursBeatsTheBaselinesOnTheSyntheticModel) {
  const auto grid = synthetic_training_grid();
  const Measurements m = measurements_from_text(synthetic_results_csv(grid), "synthetic.csv");
  const FittedHeuristic fit = fit_heuristic(m.shapes);
  const auto rows = summarize(evaluate_policies("in_sample", m.shapes, all_policies(fit, 132)));
  const double ours = row_for(rows, "all", "ours").stats.geomean;
  for (const char* other : {"fa2_capacity", "fa2_real_length", "fa3_dynamic", "flashinfer_one_wave", "vllm_v1_v2",
                            "fixed_1", "fixed_8", "fixed_16", "fixed_32", "fallback_one_wave"}) {
    EXPECT_LT(ours, row_for(rows, "all", other).stats.geomean) << other;
  }
  EXPECT_LE(row_for(rows, "all", "oracle").stats.max, 1.02);  // its own tie band, at most 2 x cv
  // Every column of the points CSV has its own name (pandas renames repeats, DictReader drops them).
  const std::string points = regret_points_csv({evaluate_policies("in_sample", m.shapes, all_policies(fit, 132))});
  std::set<std::string> seen;
  std::string header = points.substr(0, points.find('\n')), column;
  for (std::istringstream columns(header); std::getline(columns, column, ',');)
    EXPECT_TRUE(seen.insert(column).second) << "repeated column " << column;
  // The capacity scenario: FA2 on capacity is far off, ours is not.
  EXPECT_GT(row_for(rows, "capacity_gt_length", "fa2_capacity").stats.geomean, 1.3);
  EXPECT_LT(row_for(rows, "capacity_gt_length", "ours").stats.geomean, 1.05);
}

TEST(CrossValidation, HeldOutShapesUseTablesFittedWithoutThem) {
  SyntheticGrid g = synthetic_training_grid();
  g.head_dims = {128};
  g.layouts = {{KvLayout::contiguous, 0}};
  const Measurements m = measurements_from_text(synthetic_results_csv(g), "synthetic.csv");
  const auto scheme = default_cross_validation_schemes()[0];
  ASSERT_EQ(scheme.name, "context_len");
  const auto e = cross_validate(m.shapes, scheme, 132);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->dataset, "cv_leave_one_context_len_out");
  EXPECT_EQ(e->shapes.size(), m.shapes.size());
  const auto rows = summarize(*e);
  // Only the fitted policies are evaluated under cross-validation.
  for (const auto& r : rows) EXPECT_TRUE(r.policy == "ours" || r.policy == "ours_capacity_only") << r.policy;
  const double held_out = row_for(rows, "all", "ours").stats.geomean;
  const FittedHeuristic fit = fit_heuristic(m.shapes);
  const double in_sample =
      row_for(summarize(evaluate_policies("in_sample", m.shapes, all_policies(fit, 132))), "all", "ours").stats.geomean;
  EXPECT_GE(held_out, in_sample);
  EXPECT_LT(held_out, 1.2);
  // One fold only: nothing to cross-validate.
  std::vector<MeasuredShape> one_length;
  for (const auto& s : m.shapes) {
    if (s.point.context_len == 8192) one_length.push_back(s);
  }
  EXPECT_FALSE(cross_validate(one_length, scheme, 132).has_value());
}

TEST(ReportFormats, CsvAndMarkdown) {
  const MeasuredShape a = shape_with({{1, 30.0}, {2, 15.0}, {4, 10.0}}, 0.002, decode_point(1, 8192));
  const Evaluation e = evaluate_policies("in_sample", {a}, {fixed(1), fixed(4)});
  const auto rows = summarize(e);
  const std::string summary = regret_summary_csv(rows);
  EXPECT_TRUE(splitkv::testing::starts_with(
      summary, "dataset,subset,policy,shapes,geomean_regret,p95_regret,max_regret,within_5pct,exact_split_share\n"));
  EXPECT_PRED2(contains, summary, "in_sample,all,fixed_1,1,3.0000,3.0000,3.0000,0.0000,1.0000\n");
  EXPECT_PRED2(contains, summary, "in_sample,all,fixed_4,1,1.0000,1.0000,1.0000,1.0000,1.0000\n");
  const std::string points = regret_points_csv({e});
  EXPECT_PRED2(contains, points, ",fixed_1_splits,fixed_1_timed_splits,fixed_1_match,fixed_1_time_us,fixed_1_regret");
  EXPECT_PRED2(contains, points, "in_sample,splitkv,contiguous,0,bf16,1,32,8,128,8192,8192,3,4,10.000,4,10.000,"
                                 "1,1,exact,30.000,3.0000,4,4,exact,10.000,1.0000\n");
  ReportContext context;
  context.gpu = "NVIDIA H200";
  context.sm_count = 132;
  const std::string md = regret_markdown({e}, rows, context);
  EXPECT_PRED2(contains, md, "| fixed_1 | 1 | 3.0000 | 3.0000 | 3.0000 | 0.0% | 100.0% |");
}

}  // namespace
}  // namespace splitkv::heuristics
