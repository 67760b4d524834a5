#include "splitkv/tuner/merge_results.hpp"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fake_kernel.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_runner.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using testing::contains;
using testing::FakeKernel;
using testing::ScopedTempDir;
using testing::time_with_model;

const char* const kGridText = R"({
  "name": "merge_test",
  "memory_budget_gb": 100,
  "protocol": {"repetitions": 5, "min_working_set_l2_multiple": 3, "warmup_replays": 1, "min_time_s": 0},
  "layouts": [{"layout": "contiguous"}, {"layout": "paged", "page_size": 16}],
  "dtypes": ["bf16"],
  "batch": [1, 16],
  "heads": [[32, 8]],
  "head_dim": [128],
  "context_len": [256, 4096],
  "cache_capacity": ["x1"],
  "num_splits": [1, 2, 4, 8]
})";

class MergeResultsTest : public ::testing::Test {
 protected:
  MergeResultsTest() {
    grid_path_ = dir_.file("grid.json");
    testing::write_text(grid_path_, kGridText);
    grid_ = load_grid_file(grid_path_);
    plan_ = expand_grid(grid_);
  }

  // Runs shard `index` of `count` (count 1: the whole grid) into `name` and returns its path.
  std::string run_shard(const std::string& name, int index, int count, const std::string& gpu = "Fake GPU") {
    SweepRunOptions o = testing::fake_gpu_run_options(dir_.file(name), &progress_);
    o.device.name = gpu;
    o.shard = ShardSpec{index, count};
    FakeKernel kernel;
    SweepRunner(o).run(grid_, select_shard(plan_, o.shard), {&kernel}, time_with_model);
    return o.out_csv;
  }

  static std::set<std::string> keys_of(const std::string& csv) {
    std::set<std::string> keys;
    for (const ResultRow& row : read_results_csv(csv).rows) EXPECT_TRUE(keys.insert(resume_key(row)).second);
    return keys;
  }

  void expect_refused(const std::vector<std::string>& inputs, const std::string& fragment) {
    const std::string out = dir_.file("refused.csv");
    try {
      merge_results(inputs, out);
      ADD_FAILURE() << "merge accepted inputs that should be refused (" << fragment << ")";
    } catch (const std::exception& error) {
      EXPECT_TRUE(contains(error.what(), fragment)) << error.what();
    }
    EXPECT_FALSE(std::filesystem::exists(out)) << "a refused merge wrote output";
  }

  ScopedTempDir dir_;
  std::string grid_path_;
  GridSpec grid_;
  SweepPlan plan_;
  std::ostringstream progress_;
};

TEST_F(MergeResultsTest, ShardsMergeToTheUnshardedSetOfPoints) {
  const std::string whole = run_shard("whole.csv", 0, 1);
  const std::vector<std::string> shards = {run_shard("s0.csv", 0, 3), run_shard("s1.csv", 1, 3),
                                           run_shard("s2.csv", 2, 3)};
  const MergeSummary summary = merge_results(shards, dir_.file("merged.csv"));
  EXPECT_EQ(summary.shards, 3);
  EXPECT_TRUE(summary.missing_shards.empty());
  EXPECT_EQ(keys_of(dir_.file("merged.csv")), keys_of(whole));
  EXPECT_EQ(static_cast<std::size_t>(summary.rows), keys_of(whole).size());
  const Sidecar merged = read_sidecar(sidecar_path_for(dir_.file("merged.csv")));
  EXPECT_EQ(merged.shard, "0/1");
  EXPECT_EQ(merged.counts.ok, summary.rows);
  EXPECT_EQ(merged.device.name, "Fake GPU");
}

TEST_F(MergeResultsTest, AMissingShardIsReportedAsPartial) {
  const MergeSummary summary = merge_results({run_shard("s0.csv", 0, 3), run_shard("s2.csv", 2, 3)},
                                             dir_.file("merged.csv"));
  EXPECT_EQ(summary.missing_shards, std::vector<std::string>{"1/3"});
  EXPECT_EQ(read_sidecar(sidecar_path_for(dir_.file("merged.csv"))).shard, "merged 2 of 3");
}

TEST_F(MergeResultsTest, RefusesMixedGpus) {
  expect_refused({run_shard("s0.csv", 0, 2), run_shard("s1.csv", 1, 2, "Other GPU")}, "GPU");
}

TEST_F(MergeResultsTest, RefusesAShardGivenTwiceAndOverlappingShards) {
  const std::string s0 = run_shard("s0.csv", 0, 2);
  expect_refused({s0, s0}, "given twice");
  expect_refused({run_shard("a.csv", 0, 1), run_shard("b.csv", 0, 2)}, "does not belong");
}

TEST_F(MergeResultsTest, RefusesATornShardAndAMissingSidecar) {
  const std::string s0 = run_shard("s0.csv", 0, 2);
  const std::string s1 = run_shard("s1.csv", 1, 2);
  testing::write_text(s1, testing::read_text(s1) + "Fake GPU,fake,contiguous,0,bf16,1,32");  // torn
  expect_refused({s0, s1}, "torn");
  std::filesystem::remove(sidecar_path_for(s0));
  expect_refused({s0}, "sidecar");
}

TEST_F(MergeResultsTest, RefusesShardsOfDifferentGrids) {
  const std::string s0 = run_shard("s0.csv", 0, 2);
  testing::write_text(grid_path_, std::string(kGridText).replace(std::string(kGridText).find("merge_test"), 10, "other_grid"));
  grid_ = load_grid_file(grid_path_);
  plan_ = expand_grid(grid_);
  expect_refused({s0, run_shard("s1.csv", 1, 2)}, "grid sha256");
}

}  // namespace
}  // namespace splitkv::tuner
