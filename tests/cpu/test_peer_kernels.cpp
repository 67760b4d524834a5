#include "splitkv/heuristics/peer_kernels.hpp"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "splitkv/heuristics/fit_pipeline.hpp"
#include "splitkv/heuristics/generated_table.hpp"
#include "splitkv/heuristics/synthetic_results.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using splitkv::testing::contains;
using splitkv::testing::ScopedTempDir;
using splitkv::testing::write_text;

tuner::ResultRow peer_row(const std::string& kernel, const tuner::SweepPoint& point, int splits, double time_us) {
  tuner::ResultRow row = testing::timed_row(point, splits, time_us, 0.001);
  row.kernel = kernel;
  return row;
}

// FA3's rows of two shapes, fixed split counts and FA3's two policy rows each: A in a 131072-token
// cache (the capacity scenario), C sized to its length, where FA3's own choice beats every fixed
// count; and a policy row of a shape D with no fixed-split rows.
std::vector<tuner::ResultRow> fa3_rows() {
  const tuner::SweepPoint a = testing::decode_point(1, 8192, 131072);
  const tuner::SweepPoint c = testing::decode_point(16, 4096);
  const tuner::SweepPoint d = testing::decode_point(2, 1024);
  return {peer_row("fa3", a, 1, 100),
          peer_row("fa3", a, 2, 60),
          peer_row("fa3", a, 4, 50),
          peer_row("fa3_heuristic_capacity", a, 8, 75),
          peer_row("fa3_heuristic_maxlen", a, 8, 50),
          peer_row("fa3", c, 1, 20),
          peer_row("fa3", c, 2, 25),
          peer_row("fa3_heuristic_capacity", c, 2, 22),
          peer_row("fa3_heuristic_maxlen", c, 2, 18),
          peer_row("fa3_heuristic_capacity", d, 16, 10)};
}

Measurements fa3_measurements(const std::vector<tuner::ResultRow>& rows = fa3_rows()) {
  LoadOptions options;
  options.kernel = "fa3";
  return measurements_from_text(testing::csv_text(rows), "fa3.csv", options);
}

std::size_t column(const Evaluation& e, const std::string& policy) {
  return std::size_t(std::find(e.policies.begin(), e.policies.end(), policy) - e.policies.begin());
}

using testing::row_for;

TEST(PeerKernels, RegistryNamesPolicyKernelsHeadersAndCallSites) {
  const PeerKernel* fa3 = find_peer_kernel("fa3");
  ASSERT_NE(fa3, nullptr);
  ASSERT_EQ(fa3->policy_kernels.size(), 2u);
  EXPECT_EQ(fa3->policy_kernels[0].name, "fa3_heuristic_capacity");
  EXPECT_EQ(fa3->policy_kernels[1].name, "fa3_heuristic_maxlen");
  const PeerKernel* flashinfer = find_peer_kernel("flashinfer");
  ASSERT_NE(flashinfer, nullptr);
  EXPECT_EQ(flashinfer->policy_kernels.at(0).name, "flashinfer_heuristic");
  EXPECT_EQ(find_peer_kernel("splitkv"), nullptr);
  EXPECT_EQ(find_peer_kernel("fa3_heuristic_capacity"), nullptr);  // a policy kernel is not fitted

  EXPECT_EQ(table_short_name("splitkv", "h200"), "h200");
  EXPECT_EQ(table_short_name("fa3", "h200"), "fa3_h200");
  EXPECT_EQ(table_short_name("flashinfer", "h100_80gb_hbm3"), "flashinfer_h100_80gb_hbm3");
  // An e4m3 cache's table sits beside the 16-bit one in the same translation unit.
  EXPECT_EQ(table_short_name("splitkv", "h200", KvDtypeClass::sixteen_bit), "h200");
  EXPECT_EQ(table_short_name("splitkv", "h200", KvDtypeClass::fp8_e4m3), "fp8_h200");
  EXPECT_EQ(table_short_name("fa3", "h200", KvDtypeClass::fp8_e4m3), "fa3_fp8_h200");
  EXPECT_EQ(kernel_argument("splitkv"), "");
  EXPECT_EQ(kernel_argument("fa3"), " --kernel fa3");
  EXPECT_EQ(call_site_function("splitkv"), "num_splits_heuristic_fa");
  EXPECT_EQ(call_site_function("fa3"), "num_splits_heuristic_fa3");
  EXPECT_EQ(call_site_function("flashinfer"), "num_splits_flashinfer");
}

TEST(PeerKernels, PolicyRowsAreKeptForEvaluationNotFitted) {
  const Measurements m = fa3_measurements();
  EXPECT_EQ(m.kernel, "fa3");
  ASSERT_EQ(m.shapes.size(), 2u);  // D has policy rows only
  EXPECT_EQ(m.counts.ok, 5);       // the fixed-split rows
  EXPECT_EQ(m.counts.policy_rows, 4);
  EXPECT_EQ(m.counts.other_kernels, 1);  // D's policy row: no fixed-split time to compare it with
  const MeasuredShape& a = m.shapes[0];
  EXPECT_EQ(a.point.batch, 1);
  ASSERT_EQ(a.timings.size(), 3u);
  EXPECT_EQ(a.timings.back().num_splits, 4);  // the policy row's num_splits (8, the grid's bound) is no timing
  EXPECT_EQ(a.policy_time_us, (std::map<std::string, double>{{"fa3_heuristic_capacity", 75}, {"fa3_heuristic_maxlen", 50}}));

  // The rows of a kernel that is no peer's policy kernel stay with the other kernels.
  std::vector<tuner::ResultRow> rows = fa3_rows();
  for (tuner::ResultRow& row : rows) {
    if (row.kernel == "fa3") row.kernel = "splitkv";
  }
  const Measurements ours = measurements_from_text(testing::csv_text(rows), "ours.csv");
  EXPECT_EQ(ours.kernel, "splitkv");
  EXPECT_EQ(ours.counts.policy_rows, 0);
  EXPECT_EQ(ours.counts.other_kernels, 5);
  EXPECT_TRUE(ours.shapes[0].policy_time_us.empty());
}

TEST(PeerKernels, ASecondPolicyRowOfAShapeIsRefused) {
  std::vector<tuner::ResultRow> rows = fa3_rows();
  rows.push_back(peer_row("fa3_heuristic_capacity", testing::decode_point(1, 8192, 131072), 16, 70));
  try {
    fa3_measurements(rows);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "fa3.csv:12: a second ok row of policy kernel fa3_heuristic_capacity");
  }
}

TEST(PeerKernels, PolicyRowRegretIsItsTimeOverTheFastestFixedSplitTime) {
  const Measurements m = fa3_measurements();
  const FittedHeuristic fit = fit_heuristic(m.shapes);
  const Evaluation e = evaluate_policies("in_sample", m.shapes, all_policies(fit, 132, "fa3"));
  // Report order: the peer's rules right after our tables.
  ASSERT_GE(e.policies.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(e.policies.begin(), e.policies.begin() + 5),
            (std::vector<std::string>{"oracle", "ours", "ours_capacity_only", "fa3_heuristic_capacity",
                                      "fa3_heuristic_maxlen"}));
  const std::size_t cap = column(e, "fa3_heuristic_capacity"), maxlen = column(e, "fa3_heuristic_maxlen");
  const std::size_t ours = column(e, "ours");
  EXPECT_DOUBLE_EQ(e.shapes[0].oracle.fastest_time_us, 50);  // the policy rows are no measurements
  EXPECT_DOUBLE_EQ(e.shapes[1].oracle.fastest_time_us, 20);  // ... even where one is faster (18)
  EXPECT_DOUBLE_EQ(e.shapes[0].outcomes[cap].regret, 1.5);
  EXPECT_DOUBLE_EQ(e.shapes[0].outcomes[maxlen].regret, 1.0);
  EXPECT_DOUBLE_EQ(e.shapes[1].outcomes[cap].regret, 1.1);
  EXPECT_DOUBLE_EQ(e.shapes[1].outcomes[maxlen].regret, 0.9);
  EXPECT_EQ(e.shapes[0].outcomes[cap].measured.match, SplitMatch::policy_row);
  EXPECT_EQ(e.shapes[0].outcomes[cap].pick.splits, 0);  // FA3's count is its own, not known
  EXPECT_DOUBLE_EQ(e.shapes[0].outcomes[ours].measured.time_us, 50);  // ours picks A's fastest, 4 splits

  const std::vector<RegretSummaryRow> rows = summarize(e, report_subsets("fa3"));
  const RegretSummaryRow& all = row_for(rows, "all", "fa3_heuristic_capacity");
  EXPECT_EQ(all.stats.shapes, 2);
  EXPECT_NEAR(all.stats.geomean, std::sqrt(1.5 * 1.1), 1e-12);
  EXPECT_DOUBLE_EQ(all.stats.exact_share, 1.0);  // the rule itself was timed
  const RegretSummaryRow& slice = row_for(rows, "capacity_131072", "fa3_heuristic_capacity");
  EXPECT_EQ(slice.stats.shapes, 1);  // A only: C's cache is its length
  EXPECT_DOUBLE_EQ(slice.stats.geomean, 1.5);
  EXPECT_DOUBLE_EQ(slice.stats.ours_speedup, 75.0 / 50.0);
  EXPECT_NEAR(row_for(rows, "all", "fa3_heuristic_maxlen").stats.geomean, std::sqrt(0.9), 1e-12);

  const std::string summary = regret_summary_csv(rows, true);
  EXPECT_TRUE(splitkv::testing::starts_with(summary, "dataset,subset,policy,shapes,geomean_regret,p95_regret,"
                                                     "max_regret,within_5pct,exact_split_share,ours_speedup\n"));
  EXPECT_PRED2(contains, summary, "in_sample,capacity_131072,fa3_heuristic_capacity,1,1.5000,1.5000,1.5000,0.0000,"
                                  "1.0000,1.5000\n");
  // A policy row's splits columns are empty: FA3 chose, and did not say.
  EXPECT_PRED2(contains, regret_points_csv({e}), ",,,policy_row,75.000,1.5000,,,policy_row,50.000,1.0000,");

  ReportContext context;
  context.gpu = "NVIDIA H200";
  context.sm_count = 132;
  context.kernel = "fa3";
  const std::string md = regret_markdown({e}, rows, context);
  EXPECT_PRED2(contains, md, "## FlashAttention 3's own rule against our table");
  EXPECT_PRED2(contains, md, "| in_sample | capacity_131072 | 1 | 1.0000 | 1.5000 | 1.5000x |");
  EXPECT_PRED2(contains, md, "### capacity_131072 (fixed lengths 1024-32768 in a 131072-token cache");
}

TEST(PeerKernels, OurKernelsReportKeepsItsFormat) {
  EXPECT_EQ(report_subsets("splitkv").size(), default_subsets().size());
  const MeasuredShape s = testing::shape_with({{1, 30.0}, {4, 10.0}}, 0.002, testing::decode_point(1, 8192, 131072));
  const Evaluation e = evaluate_policies("in_sample", {s}, all_policies(fit_heuristic({s}), 132));
  EXPECT_EQ(column(e, "fa3_heuristic_capacity"), e.policies.size());
  const std::string summary = regret_summary_csv(summarize(e));
  EXPECT_FALSE(contains(summary, "ours_speedup"));
  EXPECT_FALSE(contains(summary, "capacity_131072"));
}

TEST(PeerKernels, PeerShapesTakeTheNearestTimedCountNotOurPartition) {
  // 128 tokens = 2 of our 64-token tiles: 3 splits are our kernel's 2 (same_partition); a peer
  // cuts its own way, so 3 is stood for by the nearest timed count in log2, 4 (4/3 < 3/2).
  MeasuredShape s = testing::shape_with({{1, 30.0}, {2, 20.0}, {4, 10.0}}, 0.002, testing::decode_point(1, 128));
  EXPECT_EQ(time_at_splits(s, 3).match, SplitMatch::same_partition);
  EXPECT_EQ(time_at_splits(s, 3).timed, 2);
  s.kernel = "fa3";
  EXPECT_EQ(time_at_splits(s, 3).match, SplitMatch::nearest);
  EXPECT_EQ(time_at_splits(s, 3).timed, 4);
}

std::string header_for_kernel(const ScopedTempDir& dir, const std::string& kernel, FitProducts& products) {
  SyntheticGrid grid = synthetic_training_grid();
  grid.head_dims = {128};
  grid.batches = {1, 4, 16};
  std::vector<tuner::ResultRow> rows = synthetic_rows(grid);
  for (tuner::ResultRow& row : rows) row.kernel = kernel;
  const std::string csv = dir.file(kernel + ".csv");
  write_text(csv, testing::csv_text(rows));
  FitRequest request;
  request.results_csv = csv;
  request.kernel = kernel;
  request.header_path = "default";
  request.cross_validate = false;
  products = run_fit(request);
  return products.header_text;
}

TEST(PeerKernels, HeadersAreNamedAfterTheKernelAndOfferItsCallSite) {
  ScopedTempDir dir;
  FitProducts p;
  const std::string fa3 = header_for_kernel(dir, "fa3", p);
  EXPECT_EQ(p.short_name, "fa3_h200");
  EXPECT_EQ(p.header_path, "heuristics/generated/num_splits_fa3_h200.hpp");
  EXPECT_PRED2(contains, fa3, "// num_splits_fa3_h200.hpp: num_splits for FlashAttention 3's decode kernel (`fa3` rows)");
  EXPECT_PRED2(contains, fa3, "--kernel fa3 --out heuristics/generated/num_splits_fa3_h200.hpp\n");
  EXPECT_PRED2(contains, fa3, "namespace splitkv::generated::fa3_h200 {");
  EXPECT_PRED2(contains, fa3, "inline constexpr char kKernel[] = \"fa3\";");
  EXPECT_PRED2(contains, fa3, "inline int num_splits_heuristic_fa3(int batch, int num_heads, int num_heads_k,");
  EXPECT_PRED2(contains, fa3, "inline int determine_num_splits(const ShapeInfo& shape)");
  EXPECT_FALSE(contains(fa3, "num_splits_heuristic_fa("));  // FA2's call site is our kernel's
  const std::string path = dir.file("num_splits_fa3_h200.hpp");
  write_text(path, fa3);
  const GeneratedHeader parsed = read_generated_header(path);
  EXPECT_EQ(parsed.kernel, "fa3");
  EXPECT_EQ(parsed.short_name, "fa3_h200");

  const std::string flashinfer = header_for_kernel(dir, "flashinfer", p);
  EXPECT_EQ(p.short_name, "flashinfer_h200");
  EXPECT_PRED2(contains, flashinfer, "struct FlashInferSplitKv {");
  EXPECT_PRED2(contains, flashinfer, "inline FlashInferSplitKv num_splits_flashinfer(int batch, int num_qo_heads,");

  const std::string ours = header_for_kernel(dir, "splitkv", p);
  EXPECT_EQ(p.short_name, "h200");
  EXPECT_FALSE(contains(ours, "kKernel"));
  EXPECT_PRED2(contains, ours, "inline int num_splits_heuristic_fa(int batch, int num_heads, int num_heads_k,");
  const std::string ours_path = dir.file("num_splits_h200.hpp");
  write_text(ours_path, ours);
  EXPECT_EQ(read_generated_header(ours_path).kernel, "splitkv");
}

}  // namespace
}  // namespace splitkv::heuristics
