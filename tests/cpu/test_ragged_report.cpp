#include "splitkv/heuristics/ragged_report.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "splitkv/heuristics/baseline_policies.hpp"

namespace splitkv::heuristics {
namespace {

using testing::decode_point;
using testing::shape_with;
using testing::timed_row;

// No table for this name: ours is the one-wave fallback, which is deterministic.
NumSplitsPolicy fallback_policy() { return NumSplitsPolicy::for_device("synthetic GPU", 132); }

tuner::ResultRow device_row(const std::string& kernel, tuner::SweepPoint point, int cap, double time_us) {
  tuner::ResultRow row = timed_row(point, cap, time_us);
  row.kernel = kernel;
  return row;
}

// A capacity-scenario shape (fixed lengths, 131072-token cache) and a ragged one.
std::vector<MeasuredShape> synthetic_shapes() {
  tuner::SweepPoint capacity = decode_point(1, 2048, 131072);
  tuner::SweepPoint ragged = decode_point(16, 8192, 8192);
  ragged.length_distribution = {tuner::LengthKind::long_tail, {}};
  return {shape_with({{1, 40}, {2, 22}, {4, 12}, {8, 10}, {16, 11}, {32, 12}}, 0.002, capacity),
          shape_with({{1, 30}, {2, 20}, {4, 18}, {8, 19}}, 0.002, ragged)};
}

TEST(RaggedReport, CapacityScenarioIsFixedLengthsInALargerCache) {
  EXPECT_TRUE(is_capacity_scenario(decode_point(1, 2048, 131072)));
  EXPECT_FALSE(is_capacity_scenario(decode_point(1, 2048, 2048)));
  tuner::SweepPoint ragged = decode_point(1, 2048, 131072);
  ragged.length_distribution = {tuner::LengthKind::uniform, {}};
  EXPECT_FALSE(is_capacity_scenario(ragged));
}

TEST(RaggedReport, DeviceTimesKeepOkRowsOfThePolicyKernelsOnly) {
  const auto shapes = synthetic_shapes();
  std::vector<tuner::ResultRow> rows = {device_row("splitkv_auto", shapes[0].point, 32, 10.5),
                                        device_row("fa3_dynamic", shapes[0].point, 32, 30),
                                        device_row("splitkv", shapes[0].point, 32, 1)};
  rows.push_back(device_row("flashinfer_plan", shapes[1].point, 128, 17));
  rows.back().status = tuner::PointStatus::oom;
  const auto times = device_times_from_rows(rows, "p.csv");
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[0].kernel, "splitkv_auto");
  EXPECT_EQ(times[0].time_us_by_shape.at(shapes[0].point.shape_key()), 10.5);
  EXPECT_EQ(times[1].kernel, "fa3_dynamic");
  EXPECT_THROW(device_times_from_rows({rows[2]}, "p.csv"), InputError);
}

TEST(RaggedReport, RegretsSummaryAndAcceptance) {
  const auto shapes = synthetic_shapes();
  const auto device = device_times_from_rows(
      {device_row("splitkv_auto", shapes[0].point, 32, 10.4), device_row("splitkv_auto", shapes[1].point, 128, 15.0),
       device_row("fa3_dynamic", shapes[0].point, 32, 12.0)},
      "p.csv");
  const RaggedEvaluation e = evaluate_ragged(shapes, fallback_policy(), 132, device);
  ASSERT_EQ(e.host.policies, (std::vector<std::string>{"oracle", "ours_host_max", "ours_host_total", "ours_capacity_only", "fa2_capacity"}));
  ASSERT_EQ(e.host.shapes.size(), 2u);
  EXPECT_DOUBLE_EQ(e.device_regret(0, 0), 10.4 / 10);
  EXPECT_DOUBLE_EQ(e.device_regret(0, 1), 15.0 / 18);  // a per-sequence schedule may beat every count
  EXPECT_EQ(e.device_regret(1, 1), 0);                 // fa3_dynamic not measured there

  const auto rows = ragged_summary(e);
  auto find = [&](const std::string& subset, const std::string& policy) -> const RaggedSummaryRow* {
    for (const auto& r : rows)
      if (r.subset == subset && r.policy == policy) return &r;
    return nullptr;
  };
  ASSERT_NE(find("all", "splitkv_auto"), nullptr);
  EXPECT_EQ(find("all", "splitkv_auto")->stats.shapes, 2);
  ASSERT_NE(find("capacity_scenario", "fa3_dynamic"), nullptr);
  EXPECT_DOUBLE_EQ(find("capacity_scenario", "fa3_dynamic")->stats.max, 1.2);
  ASSERT_NE(find("long_tail", "oracle"), nullptr);
  EXPECT_EQ(find("long_tail", "fa3_dynamic"), nullptr);

  // FA2 on the capacity: 131072 tokens look long, so it splits; the splits overlapping the
  // real 2048 tokens are what run on our kernel.
  DecodeShape d = decode_shape(e.host.shapes[0].shape, 132);
  const int fa2 = fa2_num_splits(d, d.capacity_tokens);
  const int fa2_work = capacity_chunks_with_work(d.capacity_tokens, d.context_len, fa2);
  const RaggedAcceptance a = ragged_acceptance(e);
  EXPECT_EQ(a.capacity_shapes, 1);
  EXPECT_DOUBLE_EQ(a.auto_within_5pct, 1.0);
  EXPECT_EQ(a.fa2_worst_shape, shapes[0].point.shape_key());
  // outcomes follow e.host.policies: oracle, ours_host_max, ours_host_total, ours_capacity_only, fa2_capacity
  EXPECT_DOUBLE_EQ(a.fa2_worst_regret, e.host.shapes[0].outcomes[4].regret);
  EXPECT_EQ(e.host.shapes[0].outcomes[4].pick.evaluated_splits, fa2_work);
  EXPECT_DOUBLE_EQ(a.auto_speedup_at_fa2_worst, a.fa2_worst_regret / 1.04);

  const std::string csv = ragged_points_csv(e);
  EXPECT_NE(csv.find("shape,layout,page_size,dtype,batch"), std::string::npos);
  EXPECT_NE(csv.find(",splitkv_auto_time_us,splitkv_auto_regret,fa3_dynamic_time_us,fa3_dynamic_regret\n"),
            std::string::npos);
  EXPECT_NE(csv.find(",10.400,1.0400,12.000,1.2000\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",15.000,0.8333,,\n"), std::string::npos) << csv;
  const std::string md = ragged_markdown(e, rows, a, "- provenance\n");
  EXPECT_NE(md.find("within 5% of the best fixed split count on **100.0%** of 1 shapes"), std::string::npos) << md;
}

TEST(RaggedReport, SharedFa3AndFlashinferRulesAgreeWithTheUniformBaselines) {
  for (int batch : {1, 4, 16, 64}) {
    for (int length : {512, 2048, 8192, 32768}) {
      for (int page : {0, 16}) {
        DecodeShape s;
        s.batch = batch;
        s.num_heads = 32;
        s.num_kv_heads = 8;
        s.head_dim = 128;
        s.context_len = length;
        s.capacity_tokens = 131072;
        s.page_size = page;
        const std::vector<int> lengths(std::size_t(batch), length);
        for (int splits : fa3_dynamic_splits_per_sequence(s, lengths)) EXPECT_EQ(splits, fa3_dynamic_num_splits(s));
        for (int splits : flashinfer_splits_per_sequence(s, lengths)) EXPECT_EQ(splits, flashinfer_num_splits(s));
      }
    }
  }
  // Ragged: a shorter sequence never gets more splits, and every count stays within FA3's bound.
  DecodeShape s;
  s.batch = 4;
  s.num_heads = 32;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.capacity_tokens = 32768;
  const std::vector<int> lengths = {32768, 100, 4096, 16384};
  const std::vector<int> fa3 = fa3_dynamic_splits_per_sequence(s, lengths);
  const int bound = fa3_dynamic_inputs(s).static_splits;
  EXPECT_LE(fa3[1], fa3[2]);
  EXPECT_LE(fa3[2], fa3[3]);
  EXPECT_LE(fa3[3], fa3[0]);
  for (int splits : fa3) {
    EXPECT_GE(splits, 1);
    EXPECT_LE(splits, bound);
  }
  const std::vector<int> fi = flashinfer_splits_per_sequence(s, lengths);
  EXPECT_LE(fi[1], fi[0]);
  EXPECT_EQ(fi[1], 1);
}

}  // namespace
}  // namespace splitkv::heuristics
