#include "splitkv/heuristics/paged_vs_contiguous.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using testing::decode_point;
using testing::shape_with;
using splitkv::testing::contains;

// Stand-ins with the names the reports read; fa2_capacity asks for 14 splits of which 2 hold
// tokens, like FA2 on a capacity-sized cache.
std::vector<Policy> named_policies() {
  const auto fixed = [](int splits, int evaluated) {
    return [splits, evaluated](const MeasuredShape&) { return PolicyPick{splits, evaluated}; };
  };
  return {{"oracle", "", false, [](const MeasuredShape& s) { return PolicyPick{oracle_choice(s).num_splits, oracle_choice(s).num_splits}; }},
          {"ours", "", true, fixed(4, 4)},
          {"ours_capacity_only", "", true, fixed(8, 8)},
          {"fa2_capacity", "", false, fixed(14, 2)},
          {"fa2_real_length", "", false, fixed(1, 1)}};
}

// A shape timed at 1, 2, 4 and 8 splits: `base` at its fastest (4 splits).
MeasuredShape timed(tuner::SweepPoint point, double base) {
  return shape_with({{1, 3 * base}, {2, 1.5 * base}, {4, base}, {8, 1.2 * base}}, 0.002, point);
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

std::vector<std::vector<std::string>> csv_lines(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(split_csv_line(line));
  return lines;
}

TEST(PagedVsContiguous, OneRowPerShapeInBothLayoutsWithRatiosAtBestAndAtEachPolicy) {
  const std::vector<MeasuredShape> shapes = {
      timed(decode_point(1, 8192), 10.0),                    // contiguous
      timed(decode_point(1, 8192, 0, 8, 128, 16), 11.0),     // paged16: 1.1x
      timed(decode_point(1, 8192, 0, 8, 128, 64), 10.5),     // paged64: 1.05x
      timed(decode_point(4, 8192), 20.0),                    // contiguous, paged16 only
      timed(decode_point(4, 8192, 0, 8, 128, 16), 18.0),     // 0.9x: paged faster
      timed(decode_point(16, 8192, 0, 8, 128, 16), 50.0),    // paged without a contiguous twin
  };
  const Evaluation e = evaluate_policies("in_sample", shapes, named_policies());
  const LayoutComparison c = compare_layouts(e, "NVIDIA H200", "x.csv");
  EXPECT_EQ(c.page_sizes, (std::vector<int>{16, 64}));
  EXPECT_EQ(c.policies, (std::vector<std::string>{"ours", "fa2_capacity", "fa2_real_length"}));
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.paged_shapes_without_contiguous, 1);
  EXPECT_EQ(c.contiguous_shapes_without_paged, 0);

  const LayoutComparisonRow& r = c.rows[0];
  EXPECT_EQ(r.contiguous.best_splits, 4);
  EXPECT_DOUBLE_EQ(r.contiguous.best_time_us, 10.0);
  EXPECT_DOUBLE_EQ(*r.best_ratio(0), 1.1);
  EXPECT_DOUBLE_EQ(*r.best_ratio(1), 1.05);
  // fa2_capacity is timed at its 2 splits with work: paged 16.5 / contiguous 15.
  EXPECT_EQ(r.contiguous.policies[1].splits, 14);
  EXPECT_EQ(r.contiguous.policies[1].timed_splits, 2);
  EXPECT_DOUBLE_EQ(*r.policy_ratio(0, 1), 1.1);
  EXPECT_DOUBLE_EQ(r.contiguous.policies[2].time_us, 30.0);  // fa2_real_length: 1 split
  EXPECT_DOUBLE_EQ(r.contiguous.best_tbps, tuner::achieved_tbps(r.kv_bytes, 10.0));
  EXPECT_FALSE(c.rows[1].paged[1].has_value());
  EXPECT_FALSE(c.rows[1].best_ratio(1).has_value());

  const auto lines = csv_lines(layout_comparison_csv(c));
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::string>& header = lines[0];
  for (const auto& line : lines) EXPECT_EQ(line.size(), header.size());
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return std::size_t(it - header.begin());
  };
  EXPECT_EQ(lines[1][column("paged16_ratio_best")], "1.1000");
  EXPECT_EQ(lines[1][column("paged64_ratio_fa2_capacity")], "1.0500");
  EXPECT_EQ(lines[1][column("contiguous_fa2_capacity_timed_splits")], "2");
  EXPECT_EQ(lines[1][column("fastest_layout")], "contiguous");
  EXPECT_EQ(lines[2][column("fastest_layout")], "paged16");
  EXPECT_EQ(lines[2][column("paged16_ratio_best")], "0.9000");
  EXPECT_EQ(lines[2][column("paged64_ratio_best")], "");
  EXPECT_EQ(lines[2][column("batch")], "4");
  EXPECT_EQ(header.front(), "gpu");
}

TEST(PagedVsContiguous, RefusesDataWithoutBothLayouts) {
  const auto message = [](const std::vector<MeasuredShape>& shapes) {
    try {
      compare_layouts(evaluate_policies("in_sample", shapes, named_policies()), "NVIDIA H200", "x.csv");
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_PRED2(contains, message({timed(decode_point(1, 8192), 10)}),
               "x.csv: no paged rows with status ok (layouts measured: contiguous)");
  EXPECT_PRED2(contains, message({timed(decode_point(1, 8192, 0, 8, 128, 16), 10)}),
               "x.csv: no contiguous rows with status ok (layouts measured: paged16)");
  EXPECT_PRED2(contains, message({timed(decode_point(1, 8192), 10), timed(decode_point(2, 8192, 0, 8, 128, 16), 10)}),
               "x.csv: no shape was measured both contiguous and paged");
}

TEST(CapacityScenario, PairsEachOversizedCacheWithItsSizedTwin) {
  const std::vector<MeasuredShape> shapes = {
      timed(decode_point(1, 2048), 8.0),
      timed(decode_point(1, 2048, 131072), 8.4),                 // capacity costs 1.05x
      timed(decode_point(1, 8192, 131072), 20.0),                // no sized twin: left out
      timed(decode_point(1, 2048, 0, 8, 128, 16), 9.0),
      timed(decode_point(1, 2048, 131072, 8, 128, 16), 9.0),
  };
  const CapacityScenario s = capacity_scenario(evaluate_policies("in_sample", shapes, named_policies()),
                                               "NVIDIA H200", "x.csv");
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].shape.layout, KvLayout::contiguous);
  EXPECT_EQ(s.rows[1].shape.layout, KvLayout::paged);
  EXPECT_DOUBLE_EQ(s.rows[0].capacity_cost(), 8.4 / 8.0);
  const std::size_t fa2 = s.policy_index("fa2_capacity"), ours = s.policy_index("ours");
  EXPECT_DOUBLE_EQ(s.rows[0].oversized.policies[fa2].time_us / s.rows[0].oversized.policies[ours].time_us, 1.5);

  const auto lines = csv_lines(capacity_scenario_csv(s));
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) EXPECT_EQ(line.size(), lines[0].size());
  EXPECT_EQ(lines[1][2], "contiguous");
  EXPECT_EQ(lines[1][10], "131072");
  EXPECT_EQ(lines[1].back(), fmt::format("{:.4f}", 12.6 / 8.0));  // fa2 (2 splits) over the sized best
  EXPECT_EQ(lines[1][lines[1].size() - 2], "1.5000");

  EXPECT_THROW(capacity_scenario(evaluate_policies("in_sample", {shapes[3], shapes[4]}, named_policies()),
                                 "NVIDIA H200", "x.csv"),
               InputError);
}

}  // namespace
}  // namespace splitkv::heuristics
