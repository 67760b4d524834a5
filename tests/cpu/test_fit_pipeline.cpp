#include "splitkv/heuristics/fit_pipeline.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>

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

SyntheticGrid fp8(SyntheticGrid g) {
  g.dtypes = {{DType::bf16, KvDtype::fp8_e4m3}};
  return g;
}

std::string fit_error(const FitRequest& request) {
  return testing::input_error([&] { run_fit(request); });
}

TEST(FitPipeline, AnFp8FitIsKeyedOnItsCache) {
  ScopedTempDir dir;
  const std::string csv = dir.file("fp8.csv");
  write_text(csv, synthetic_results_csv(fp8(small_grid())));
  FitRequest request;
  request.results_csv = csv;
  request.header_path = "default";
  request.cross_validate = false;
  const FitProducts p = run_fit(request);
  EXPECT_EQ(p.training.kv_dtype, KvDtypeClass::fp8_e4m3);
  EXPECT_EQ(p.short_name, "fp8_h200");
  EXPECT_EQ(p.header_path, "heuristics/generated/num_splits_fp8_h200.hpp");
  EXPECT_PRED2(contains, p.header_text, "inline constexpr char kKvDtype[] = \"fp8_e4m3\";");
  const auto files = report_files(p, (dir.path() / "regret.csv").string(), true);
  EXPECT_PRED2(contains, files.at((dir.path() / "regret.md").string()), "KV cache: `fp8_e4m3`");
  EXPECT_PRED2(contains, files.at((dir.path() / "fit.md").string()), "- KV cache: `fp8_e4m3` rows fitted");

  // Half the bytes per tile against the same combine: the model's best counts move, so the
  // tables differ from the 16-bit ones fitted on the same shapes.
  const std::string sixteen_csv = dir.file("full.csv");
  write_text(sixteen_csv, synthetic_results_csv(small_grid()));
  FitRequest sixteen = request;
  sixteen.results_csv = sixteen_csv;
  EXPECT_NE(run_fit(sixteen).fit.real_length.splits, p.fit.real_length.splits);

  // One file with both: refused without a class, and the validation CSV is read for the class.
  const std::string mixed = dir.file("mixed.csv");
  const std::string fp8_text = synthetic_results_csv(fp8(small_grid()));
  write_text(mixed, synthetic_results_csv(small_grid()) + fp8_text.substr(fp8_text.find('\n') + 1));
  FitRequest both = request;
  both.results_csv = mixed;
  EXPECT_PRED2(contains, fit_error(both), "mixed.csv: ok rows of kernel splitkv for two KV cache classes");
  both.kv_dtype = KvDtypeClass::fp8_e4m3;
  EXPECT_EQ(run_fit(both).fit.real_length.splits, p.fit.real_length.splits);
  FitRequest validated = request;
  validated.validation_csv = sixteen_csv;
  EXPECT_PRED2(contains, fit_error(validated),
               "full.csv: no ok rows of kernel splitkv with KV cache class fp8_e4m3 (--kv-dtype fp8_e4m3)");
  validated.validation_csv = mixed;
  const FitProducts v = run_fit(validated);
  EXPECT_EQ(v.validation.kv_dtype, KvDtypeClass::fp8_e4m3);
  EXPECT_EQ(v.validation.shapes.size(), p.training.shapes.size());
}

// The 16-bit table reused unchanged on fp8 rows is a policy of its own beside the fp8 table, in
// sample and on validation; the cross-validations list it (every evaluation lists the same
// policies) but leave it unevaluated, as nothing of it is refitted.
TEST(FitPipeline, TheReused16BitTableIsScoredBesideTheFp8One) {
  ScopedTempDir dir;
  const std::string csv = dir.file("fp8.csv");
  write_text(csv, synthetic_results_csv(fp8(small_grid())));
  const std::string validation = dir.file("fp8_validation.csv");
  write_text(validation, synthetic_results_csv(fp8(synthetic_validation_grid())));
  FitRequest request;
  request.results_csv = csv;
  request.validation_csv = validation;
  request.reused_table = load_given_table(std::string(SPLITKV_SOURCE_DIR) + "/heuristics/generated/num_splits_h200.hpp");
  const FitProducts p = run_fit(request);
  ASSERT_EQ(p.evaluations.size(), 5u);
  for (const Evaluation& e : p.evaluations) {
    const auto at = std::find(e.policies.begin(), e.policies.end(), "reused_16bit_table");
    ASSERT_NE(at, e.policies.end()) << e.dataset;
    EXPECT_EQ(at - e.policies.begin(), 3) << e.dataset;  // oracle, ours, ours_capacity_only, then it
  }
  std::set<std::string> scored;
  for (const RegretSummaryRow& r : p.summary) {
    if (r.policy == "reused_16bit_table" && r.subset == "all") scored.insert(r.dataset);
  }
  EXPECT_EQ(scored, (std::set<std::string>{"in_sample", "validation"}));
  const RegretSummaryRow* reused = nullptr;
  const RegretSummaryRow* ours = nullptr;
  for (const RegretSummaryRow& r : p.summary) {
    if (r.dataset != "in_sample" || r.subset != "all") continue;
    if (r.policy == "reused_16bit_table") reused = &r;
    if (r.policy == "ours") ours = &r;
  }
  ASSERT_TRUE(reused != nullptr && ours != nullptr);
  EXPECT_EQ(reused->stats.shapes, ours->stats.shapes);
  EXPECT_GE(reused->stats.geomean, 1.0);

  const auto files = report_files(p, (dir.path() / "regret.csv").string(), false);
  const std::string& md = files.at((dir.path() / "regret.md").string());
  EXPECT_PRED2(contains, md, "## The fp8_e4m3 table against the 16-bit table reused");
  EXPECT_PRED2(contains, md, "| in_sample | all | ");
  EXPECT_PRED2(contains, md, "| validation | all | ");
  EXPECT_PRED2(contains, md, "| reused_16bit_table | the 16-bit KV cache's table (");
  const std::string& summary = files.at((dir.path() / "regret.csv").string());
  EXPECT_PRED2(contains, summary, "\nin_sample,all,reused_16bit_table,");
  EXPECT_PRED2(contains, summary, "\nvalidation,all,reused_16bit_table,");
  EXPECT_FALSE(contains(summary, "cv_leave_one_batch_out,all,reused_16bit_table"));
  EXPECT_PRED2(contains, files.at((dir.path() / "regret_points.csv").string()), ",reused_16bit_table_regret");
  EXPECT_PRED2(contains, console_summary(p), "  reused_16bit_table ");

  // The compiled-in table of the same GPU is the same table.
  FitRequest compiled = request;
  compiled.cross_validate = false;
  compiled.reused_table = load_given_table("h200");
  const FitProducts c = run_fit(compiled);
  for (const RegretSummaryRow& r : c.summary) {
    if (r.dataset == "in_sample" && r.subset == "all" && r.policy == "reused_16bit_table") {
      EXPECT_DOUBLE_EQ(r.stats.geomean, reused->stats.geomean);
    }
  }
}

// The synthetic rows of an fp8 cache and of a 16-bit one, as fp8.csv and full.csv in `dir`.
std::pair<std::string, std::string> write_both_caches(const ScopedTempDir& dir) {
  const std::string fp8_csv = dir.file("fp8.csv");
  write_text(fp8_csv, synthetic_results_csv(fp8(small_grid())));
  const std::string sixteen_csv = dir.file("full.csv");
  write_text(sixteen_csv, synthetic_results_csv(small_grid()));
  return {fp8_csv, sixteen_csv};
}

TEST(FitPipeline, TablesOfTheWrongCacheAreRefused) {
  ScopedTempDir dir;
  const auto [fp8_csv, sixteen_csv] = write_both_caches(dir);
  FitRequest fp8_fit;
  fp8_fit.results_csv = fp8_csv;
  fp8_fit.cross_validate = false;
  fp8_fit.header_path = dir.file("num_splits_fp8_h200.hpp");
  const FitProducts f = run_fit(fp8_fit);
  write_text(f.header_path, f.header_text);
  const GivenTable fp8_table = load_given_table(f.header_path);

  FitRequest request;
  request.cross_validate = false;
  request.results_csv = sixteen_csv;
  request.reused_table = load_given_table("h200");
  EXPECT_PRED2(contains, fit_error(request),
               "--reuse-table compiled-in table h200: scores a 16-bit table on the rows of another KV cache, but the "
               "rows of " + sixteen_csv + " evaluated are 16bit already");
  request.results_csv = fp8_csv;
  request.reused_table = fp8_table;
  EXPECT_PRED2(contains, fit_error(request), "num_splits_fp8_h200.hpp: made for the fp8_e4m3 KV cache, not a 16-bit one");
  request.reused_table.reset();
  request.results_csv = sixteen_csv;
  request.table = fp8_table;
  EXPECT_PRED2(contains, fit_error(request),
               "num_splits_fp8_h200.hpp: made for the fp8_e4m3 KV cache, but the rows of " + sixteen_csv +
                   " evaluated are 16bit");
  request.results_csv = fp8_csv;
  EXPECT_EQ(fit_error(request), "");  // its own class
  request.table.reset();
  request.reused_table = load_given_table("h200");
  request.reused_table->sm_count = 108;
  EXPECT_PRED2(contains, fit_error(request), "--reuse-table compiled-in table h200: made for \"NVIDIA H200\" (108 SMs)");
  request.allow_other_gpu = true;
  EXPECT_EQ(fit_error(request), "");
}

// --table "NVIDIA H200" scores that GPU's compiled-in table for the rows' cache, whichever it is.
TEST(FitPipeline, AGpuNameAsTableIsTheTableOfTheRowsCache) {
  ScopedTempDir dir;
  const auto [fp8_csv, sixteen_csv] = write_both_caches(dir);
  const auto ours = [&](const std::string& csv, const char* spec) {
    FitRequest request;
    request.cross_validate = false;
    request.results_csv = csv;
    request.table = load_given_table(spec);
    const FitProducts p = run_fit(request);
    const auto row = std::find_if(p.summary.begin(), p.summary.end(), [](const RegretSummaryRow& r) {
      return r.dataset == "in_sample" && r.subset == "all" && r.policy == "ours";
    });
    EXPECT_NE(row, p.summary.end()) << spec;
    const auto files = report_files(p, (dir.path() / "regret.csv").string(), false);
    return std::make_pair(row == p.summary.end() ? 0.0 : row->stats.geomean,
                          files.at((dir.path() / "regret.md").string()));
  };
  const auto fp8_by_gpu = ours(fp8_csv, "NVIDIA H200");
  const auto fp8_by_name = ours(fp8_csv, "fp8_h200");
  EXPECT_DOUBLE_EQ(fp8_by_gpu.first, fp8_by_name.first);
  EXPECT_PRED2(contains, fp8_by_gpu.second, "given table (compiled-in table fp8_h200)");
  const auto sixteen_by_gpu = ours(sixteen_csv, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(sixteen_by_gpu.first, ours(sixteen_csv, "h200").first);
  EXPECT_PRED2(contains, sixteen_by_gpu.second, "given table (compiled-in table h200)");

  // A short name is one table: the 16-bit one on fp8 rows is refused, as a header would be.
  FitRequest request;
  request.cross_validate = false;
  request.results_csv = fp8_csv;
  request.table = load_given_table("h200");
  EXPECT_PRED2(contains, fit_error(request),
               "--table compiled-in table h200: made for the 16bit KV cache, but the rows of " + fp8_csv +
                   " evaluated are fp8_e4m3");
}

}  // namespace
}  // namespace splitkv::heuristics
