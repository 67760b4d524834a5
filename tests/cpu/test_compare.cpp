#include "splitkv/heuristics/compare.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "splitkv/heuristics/synthetic_results.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

namespace st = splitkv::testing;
using st::contains;

// Contiguous and both page sizes, sized and 131072-token caches, one head configuration:
// small enough to fit in milliseconds.
SyntheticGrid grid() {
  SyntheticGrid g;
  g.layouts = {{KvLayout::contiguous, 0}, {KvLayout::paged, 16}, {KvLayout::paged, 64}};
  g.batches = {1, 4, 16};
  g.context_lens = {512, 8192, 32768};
  g.capacities = {0, 131072};
  return g;
}

std::string input_error(const CompareRequest& request) {
  try {
    run_compare(request);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(Compare, LaysOutTheFittedPoliciesOnEveryShape) {
  st::ScopedTempDir dir;
  CompareRequest request;
  request.results_csv = dir.file("full.csv");
  request.capacity_scenario = true;
  st::write_text(request.results_csv, synthetic_results_csv(grid()));

  const CompareProducts p = run_compare(request);
  EXPECT_FALSE(p.separate_training);
  EXPECT_EQ(p.evaluation().dataset, "in_sample");
  EXPECT_EQ(p.layouts.page_sizes, (std::vector<int>{16, 64}));
  // 3 batches x 3 lengths x 2 capacities, every one in all three layouts.
  EXPECT_EQ(p.layouts.rows.size(), 18u);
  EXPECT_EQ(p.layouts.paged_shapes_without_contiguous, 0);
  // `ours` is the fitted real-length table's answer on each layout.
  for (const LayoutComparisonRow& r : p.layouts.rows) {
    tuner::SweepPoint contiguous = r.shape;
    EXPECT_EQ(r.contiguous.policies[0].splits,
              p.fit.fit.real_length.lookup(contiguous.batch, contiguous.num_kv_heads, contiguous.head_dim,
                                           contiguous.context_len, 0));
  }
  ASSERT_TRUE(p.capacity.has_value());
  EXPECT_EQ(p.capacity->rows.size(), 3u * 3u * 3u);  // every layout, batch and length has both capacities

  const auto files = compare_files(p, dir.file("pvc.csv"), dir.file("cap.csv"));
  ASSERT_EQ(files.size(), 2u);
  EXPECT_PRED2(contains, files.at(dir.file("pvc.csv")), "paged64_ratio_fa2_real_length\n");
  EXPECT_PRED2(contains, files.at(dir.file("cap.csv")), "fa2_capacity_over_sized_best\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("pvc.csv")));  // computing writes nothing
  EXPECT_EQ(compare_files(p, dir.file("pvc.csv"), "").size(), 1u);

  const std::string console = compare_console_summary(p);
  EXPECT_PRED2(contains, console, "18 shapes measured contiguous and paged");
  EXPECT_PRED2(contains, console, "fa2_capacity time / ours time");
}

TEST(Compare, FitsOursOnAnotherCsvOfTheSameGpu) {
  st::ScopedTempDir dir;
  CompareRequest request;
  request.results_csv = dir.file("validation.csv");
  request.train_csv = dir.file("full.csv");
  SyntheticGrid validation = grid();
  validation.batches = {2, 8};
  st::write_text(request.results_csv, synthetic_results_csv(validation));
  st::write_text(request.train_csv, synthetic_results_csv(grid()));
  const CompareProducts p = run_compare(request);
  EXPECT_TRUE(p.separate_training);
  EXPECT_EQ(p.evaluation().dataset, "validation");
  EXPECT_EQ(p.compared().source, request.results_csv);
  EXPECT_EQ(p.layouts.rows.size(), 2u * 3u * 2u);

  st::write_text(request.train_csv, synthetic_results_csv(grid(), "NVIDIA A100-SXM4-80GB", 108));
  EXPECT_PRED2(contains, input_error(request), "differs from \"NVIDIA A100-SXM4-80GB\"");
}

TEST(Compare, RefusesMissingLayoutsAndOutputsOverInputs) {
  st::ScopedTempDir dir;
  CompareRequest request;
  request.results_csv = dir.file("contiguous.csv");
  SyntheticGrid contiguous = grid();
  contiguous.layouts = {{KvLayout::contiguous, 0}};
  st::write_text(request.results_csv, synthetic_results_csv(contiguous));
  EXPECT_PRED2(contains, input_error(request), "no paged rows with status ok (layouts measured: contiguous)");

  SyntheticGrid sized = grid();
  sized.capacities = {0};
  st::write_text(request.results_csv, synthetic_results_csv(sized));
  request.capacity_scenario = true;
  EXPECT_PRED2(contains, input_error(request), "the capacity scenario needs both");
  request.capacity_scenario = false;
  EXPECT_NO_THROW(run_compare(request));

  EXPECT_THROW(check_compare_outputs(request, request.results_csv, ""), InputError);
  EXPECT_THROW(check_compare_outputs(request, dir.file("a.csv"), dir.file("./a.csv")), InputError);
  EXPECT_NO_THROW(check_compare_outputs(request, dir.file("a.csv"), dir.file("b.csv")));
}

}  // namespace
}  // namespace splitkv::heuristics
