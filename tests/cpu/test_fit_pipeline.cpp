#include "splitkv/heuristics/fit_pipeline.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "splitkv/heuristics/synthetic_results.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using splitkv::testing::contains;
using splitkv::testing::ScopedTempDir;
using splitkv::testing::write_text;

SyntheticGrid small_grid() {
  SyntheticGrid g = synthetic_training_grid();
  g.head_dims = {128};
  g.batches = {1, 4, 16, 64};
  return g;
}

TEST(FitPipeline, ComputesEverythingAndWritesNothing) {
  ScopedTempDir dir;
  const std::string csv = dir.file("full.csv");
  write_text(csv, synthetic_results_csv(small_grid()));
  SyntheticGrid validation = synthetic_validation_grid();
  const std::string validation_csv = dir.file("validation.csv");
  write_text(validation_csv, synthetic_results_csv(validation));

  FitRequest request;
  request.results_csv = csv;
  request.validation_csv = validation_csv;
  request.header_path = "default";
  const FitProducts p = run_fit(request);
  EXPECT_EQ(p.short_name, "h200");
  EXPECT_EQ(p.header_path, "heuristics/generated/num_splits_h200.hpp");
  EXPECT_FALSE(std::filesystem::exists(p.header_path));
  std::vector<std::string> datasets;
  for (const auto& e : p.evaluations) datasets.push_back(e.dataset);
  EXPECT_EQ(datasets, (std::vector<std::string>{"in_sample", "cv_leave_one_context_len_out",
                                                "cv_leave_one_batch_out", "cv_leave_one_ctas_out", "validation"}));

  // Same file, same header bytes.
  EXPECT_EQ(run_fit(request).header_text, p.header_text);

  const auto files = report_files(p, (dir.path() / "report" / "regret.csv").string(), true);
  std::vector<std::string> names;
  for (const auto& [path, bytes] : files) names.push_back(std::filesystem::path(path).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"fit.md", "regret.csv", "regret.md", "regret_points.csv"}));
  EXPECT_PRED2(contains, files.at((dir.path() / "report" / "regret.md").string()), "## Validation");
  EXPECT_PRED2(contains, console_summary(p), "capacity > real length:");
}

TEST(FitPipeline, ValidationMustComeFromTheSameGpu) {
  ScopedTempDir dir;
  const std::string csv = dir.file("full.csv");
  write_text(csv, synthetic_results_csv(small_grid()));
  const std::string other = dir.file("other.csv");
  write_text(other, synthetic_results_csv(synthetic_validation_grid(), "NVIDIA H100 80GB HBM3"));
  FitRequest request;
  request.results_csv = csv;
  request.validation_csv = other;
  request.cross_validate = false;
  try {
    run_fit(request);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "other.csv: gpu \"NVIDIA H100 80GB HBM3\" differs");
  }
  request.validation_csv.clear();
  request.gpu_short_name = "Bad Name";
  EXPECT_THROW(run_fit(request), InputError);
}

}  // namespace
}  // namespace splitkv::heuristics
