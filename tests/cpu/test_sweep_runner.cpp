#include "splitkv/tuner/sweep_runner.hpp"

#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "fake_kernel.hpp"
#include "splitkv/tuner/plan_report.hpp"
#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using testing::contains;
using testing::FakeKernel;
using testing::ScopedTempDir;
using testing::starts_with;
using testing::time_with_model;

// 2 layouts x 2 batches x 2 heads x 2 contexts = 16 shapes; pow2 splits pruned by tiles:
// context 256 (4 tiles) keeps 1,2,4; context 4096 (64 tiles) keeps 1..64.
const char* const kGridText = R"({
  "name": "runner_test",
  "memory_budget_gb": 100,
  "protocol": {"repetitions": 5, "min_working_set_l2_multiple": 3, "warmup_replays": 1,
               "min_time_s": 0},
  "layouts": [{"layout": "contiguous"}, {"layout": "paged", "page_size": 16}],
  "dtypes": ["bf16"],
  "batch": [1, 16],
  "heads": [[32, 8], [16, 16]],
  "head_dim": [128],
  "context_len": [256, 4096],
  "cache_capacity": ["x1"],
  "num_splits": [1, 2, 4, 8, 16, 32, 64]
})";

class SweepRunnerTest : public ::testing::Test {
 protected:
  SweepRunnerTest() {
    grid_path_ = dir_.file("grid.json");
    testing::write_text(grid_path_, kGridText);
    grid_ = load_grid_file(grid_path_);
    plan_ = expand_grid(grid_);
  }

  SweepRunOptions options(bool resume = false) {
    SweepRunOptions o = testing::fake_gpu_run_options(csv_path(), &progress_);
    o.resume = resume;
    return o;
  }

  std::string csv_path() const { return dir_.file("out.csv"); }

  SweepSummary run(FakeKernel& kernel, const SweepRunOptions& o,
                   const TimingCallback& timer = time_with_model) {
    return SweepRunner(o).run(grid_, plan_, {&kernel}, timer);
  }

  std::set<std::string> planned_keys(const std::string& kernel = "fake") const {
    std::set<std::string> keys;
    for (const SweepPoint& p : plan_.points()) keys.insert(resume_key(kernel, p));
    return keys;
  }

  // Row keys in the CSV; fails the test on a duplicate.
  std::multiset<std::string> csv_keys() const {
    std::multiset<std::string> keys;
    for (const ResultRow& row : read_results_csv(csv_path()).rows) keys.insert(resume_key(row));
    return keys;
  }

  ScopedTempDir dir_;
  std::string grid_path_;
  GridSpec grid_;
  SweepPlan plan_;
  std::ostringstream progress_;
};

TEST_F(SweepRunnerTest, FullRunWritesEveryPlannedPointOnce) {
  ASSERT_EQ(plan_.point_count(), 8 * 3 + 8 * 7);
  FakeKernel kernel;
  const SweepSummary summary = run(kernel, options());
  EXPECT_EQ(summary.stop, StopReason::complete);
  EXPECT_EQ(summary.planned, 80);
  EXPECT_EQ(summary.rows_written, 80);
  EXPECT_EQ(summary.ok, 80);
  EXPECT_EQ(summary.already_done, 0);

  const std::multiset<std::string> keys = csv_keys();
  const std::set<std::string> unique(keys.begin(), keys.end());
  EXPECT_EQ(keys.size(), unique.size());
  EXPECT_EQ(unique, planned_keys());

  // One prepare per shape, each sized for the shape's largest split count, each released.
  EXPECT_EQ(kernel.prepares, 16);
  EXPECT_EQ(kernel.releases, 16);
  EXPECT_EQ(kernel.largest_splits_prepared, 64);
  EXPECT_FALSE(kernel.prepared());

  const ResultsCsv csv = read_results_csv(csv_path());
  for (const ResultRow& row : csv.rows) {
    EXPECT_EQ(row.gpu, "Fake GPU");
    EXPECT_EQ(row.status, PointStatus::ok);
    EXPECT_DOUBLE_EQ(row.time_us_median, FakeKernel::model_time_us(row.point));
    EXPECT_EQ(row.kv_bytes, row.point.kv_bytes());
    EXPECT_DOUBLE_EQ(row.tbps, achieved_tbps(row.kv_bytes, row.time_us_median));
  }

  const Sidecar sidecar = read_sidecar(sidecar_path_for(csv_path()));
  EXPECT_EQ(sidecar.state, "complete");
  EXPECT_EQ(sidecar.grid_sha256, sha256_hex(kGridText));
  EXPECT_EQ(sidecar.counts.planned, 80);
  EXPECT_EQ(sidecar.counts.ok, 80);
  EXPECT_EQ(sidecar.counts.failed, 0);
  EXPECT_EQ(sidecar.counts.pruned, plan_.pruned.total());
  EXPECT_EQ(sidecar.runs, 1);
  EXPECT_EQ(sidecar.device.name, "Fake GPU");
  EXPECT_FALSE(sidecar.finished_at.empty());
}

TEST_F(SweepRunnerTest, ProgressLinesCarryCountPercentEtaPointAndTime) {
  FakeKernel kernel;
  run(kernel, options());
  std::istringstream lines(progress_.str());
  std::string line;
  int count = 0;
  const std::regex format(
      R"(\[(\d+)/80\] \d+\.\d% \d+\.\d pt/s ETA (\d+[hms].*|\?) (contiguous|paged16) bf16 b\d+ h\d+/\d+ d128 L\d+ C\d+ fixed s\d+ -> \d+\.\d us \(\d+\.\d\d TB/s\))");
  while (std::getline(lines, line)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, format)) << line;
    EXPECT_EQ(std::stoi(match[1]), ++count);
  }
  EXPECT_EQ(count, 80);
}

TEST_F(SweepRunnerTest, ResumeAfterACrashYieldsExactlyThePlanWithoutDuplicates) {
  FakeKernel kernel;
  int calls = 0;
  const TimingCallback crash_after_23 = [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    if (++calls > 23) throw std::runtime_error("cudaErrorIllegalAddress (sticky)");
    return time_with_model(k, p, copies);
  };
  const SweepSummary first = run(kernel, options(), crash_after_23);
  EXPECT_EQ(first.stop, StopReason::aborted);
  EXPECT_EQ(first.rows_written, 23);
  EXPECT_PRED2(contains, first.message, "cudaErrorIllegalAddress (sticky)");
  EXPECT_PRED2(contains, first.message, "run again with --resume");
  EXPECT_FALSE(kernel.prepared());  // released on the way out
  EXPECT_EQ(csv_keys().size(), 23u);
  EXPECT_EQ(read_sidecar(sidecar_path_for(csv_path())).state, "aborted");

  // Without --resume the runner refuses to touch the file.
  try {
    run(kernel, options());
    FAIL() << "appended without --resume";
  } catch (const SweepError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "already holds 23 measured rows; pass --resume");
  }

  FakeKernel fresh;
  const SweepSummary second = run(fresh, options(/*resume=*/true));
  EXPECT_EQ(second.stop, StopReason::complete);
  EXPECT_EQ(second.already_done, 23);
  EXPECT_EQ(second.rows_written, 80 - 23);
  const std::multiset<std::string> keys = csv_keys();
  EXPECT_EQ(keys.size(), 80u);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), planned_keys());

  const Sidecar sidecar = read_sidecar(sidecar_path_for(csv_path()));
  EXPECT_EQ(sidecar.runs, 2);
  EXPECT_EQ(sidecar.state, "complete");
  EXPECT_EQ(sidecar.counts.ok, 80);

  // A third run has nothing left to do.
  FakeKernel idle;
  const SweepSummary third = run(idle, options(true));
  EXPECT_EQ(third.rows_written, 0);
  EXPECT_EQ(third.already_done, 80);
  EXPECT_EQ(idle.prepares, 0);
}

TEST_F(SweepRunnerTest, ResumeCutsATornLastLine) {
  FakeKernel kernel;
  int calls = 0;
  run(kernel, options(), [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    if (++calls > 10) throw std::runtime_error("killed");
    return time_with_model(k, p, copies);
  });
  // What a kill in the middle of write() could leave behind.
  const std::string intact = testing::read_text(csv_path());
  testing::write_text(csv_path(), intact + "Fake GPU,fake,paged,16,bf16,16,32,8,128,40");

  FakeKernel fresh;
  const SweepSummary resumed = run(fresh, options(true));
  ASSERT_TRUE(resumed.truncated_tail.has_value());
  EXPECT_EQ(resumed.truncated_tail->line, 12);
  EXPECT_EQ(resumed.already_done, 10);
  const ResultsCsv csv = read_results_csv(csv_path());
  EXPECT_FALSE(csv.torn.has_value());
  EXPECT_EQ(csv.rows.size(), 80u);
  const std::multiset<std::string> keys = csv_keys();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 80u);
}

TEST_F(SweepRunnerTest, FailuresAreRecordedAndTheSweepGoesOn) {
  FakeKernel kernel;
  const std::vector<SweepPoint> points = plan_.points();
  // Shape of point 0 (3 split counts): out of memory at prepare.
  const std::string oom_shape = points[0].shape_key();
  kernel.prepare_failures[oom_shape] = KernelOutcome::failure(PointStatus::oom, "cudaMalloc: out of memory");
  // A single point of a later shape fails at launch.
  const std::string bad_launch = points[10].key();
  kernel.launch_failures[bad_launch] = PointStatus::launch_failed;
  // A shape the kernel does not serve.
  const std::string unsupported = points.back().shape_key();
  kernel.unsupported_shapes.insert(unsupported);

  const SweepSummary summary = run(kernel, options());
  EXPECT_EQ(summary.stop, StopReason::complete);
  EXPECT_EQ(summary.rows_written, 80);

  std::map<PointStatus, int> by_status;
  for (const ResultRow& row : read_results_csv(csv_path()).rows) {
    ++by_status[row.status];
    if (row.point.shape_key() == oom_shape) {
      EXPECT_EQ(row.status, PointStatus::oom);
      EXPECT_EQ(row.message, "cudaMalloc: out of memory");
      EXPECT_TRUE(std::isnan(row.time_us_median));
    } else if (row.point.key() == bad_launch) {
      EXPECT_EQ(row.status, PointStatus::launch_failed);
      EXPECT_EQ(row.message, "injected launch failure");
    } else if (row.point.shape_key() == unsupported) {
      EXPECT_EQ(row.status, PointStatus::skipped);
      EXPECT_EQ(row.message, "fake kernel does not serve this shape");
    } else {
      EXPECT_EQ(row.status, PointStatus::ok) << row.point.key();
    }
  }
  const int unsupported_points = int(plan_.shapes.back().split_counts.size());
  EXPECT_EQ(by_status[PointStatus::oom], 3);
  EXPECT_EQ(by_status[PointStatus::launch_failed], 1);
  EXPECT_EQ(by_status[PointStatus::skipped], unsupported_points);
  EXPECT_EQ(summary.failed, 3 + 1 + unsupported_points);
  EXPECT_EQ(kernel.prepares, 15);  // the unsupported shape is never prepared
  EXPECT_EQ(kernel.releases, 14);  // nor is the one that failed to prepare left allocated
  EXPECT_FALSE(kernel.prepared());

  // Failures are final: a resume does not retry them.
  FakeKernel healthy;
  EXPECT_EQ(run(healthy, options(true)).rows_written, 0);
  EXPECT_EQ(read_sidecar(sidecar_path_for(csv_path())).counts.failed, 4 + unsupported_points);
}

TEST_F(SweepRunnerTest, ThrottledPointsAreRetriedThenRecordedAndRemeasuredOnResume) {
  FakeKernel kernel;
  std::map<std::string, int> attempts;
  const std::string always = plan_.points()[5].key();
  const std::string once = plan_.points()[6].key();
  const TimingCallback throttling = [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    const int attempt = ++attempts[p.key()];
    TimingResult result = time_with_model(k, p, copies);
    if (p.key() == always || (p.key() == once && attempt == 1)) {
      result.status = PointStatus::throttled;
      result.message = "SM clock fell to 1200 MHz";
    }
    return result;
  };
  SweepRunOptions o = options();
  o.throttle_retries = 2;
  run(kernel, o, throttling);
  EXPECT_EQ(attempts[always], 3);
  EXPECT_EQ(attempts[once], 2);
  ResultsCsv csv = read_results_csv(csv_path());
  ASSERT_EQ(csv.rows.size(), 80u);
  EXPECT_EQ(csv.rows[5].status, PointStatus::throttled);
  EXPECT_FALSE(std::isnan(csv.rows[5].time_us_median));  // kept, flagged
  EXPECT_EQ(csv.rows[6].status, PointStatus::ok);

  FakeKernel again;
  const SweepSummary resumed = run(again, options(true));
  EXPECT_EQ(resumed.rows_written, 1);  // only the throttled point
  csv = read_results_csv(csv_path());
  EXPECT_EQ(csv.rows.back().point.key(), always);
  EXPECT_EQ(csv.rows.back().status, PointStatus::ok);
  EXPECT_EQ(read_sidecar(sidecar_path_for(csv_path())).counts.ok, 80);
}

TEST_F(SweepRunnerTest, OkWithoutFiniteTimesIsRecordedAsAFailure) {
  FakeKernel kernel;
  const std::string broken = plan_.points()[2].key();
  run(kernel, options(), [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    TimingResult result = time_with_model(k, p, copies);
    if (p.key() == broken) result.time_us_p90 = TimingResult::kMissing;
    return result;
  });
  const ResultRow row = read_results_csv(csv_path()).rows[2];
  EXPECT_EQ(row.status, PointStatus::launch_failed);
  EXPECT_PRED2(starts_with, row.message, "timer returned ok without finite");
}

TEST_F(SweepRunnerTest, StopRequestEndsBetweenPointsWithRowsKept) {
  FakeKernel kernel;
  std::atomic<bool> stop{false};
  int calls = 0;
  SweepRunOptions o = options();
  o.stop_requested = &stop;
  const SweepSummary summary = run(kernel, o, [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    if (++calls == 7) stop = true;  // SIGINT arrives while point 7 is timed
    return time_with_model(k, p, copies);
  });
  EXPECT_EQ(summary.stop, StopReason::interrupted);
  EXPECT_EQ(summary.rows_written, 7);
  EXPECT_PRED2(contains, summary.message, "--resume");
  EXPECT_EQ(read_results_csv(csv_path()).rows.size(), 7u);
  EXPECT_EQ(read_sidecar(sidecar_path_for(csv_path())).state, "interrupted");
  EXPECT_FALSE(kernel.prepared());
}

TEST_F(SweepRunnerTest, ResumeRefusesAnotherGpuOrAChangedGrid) {
  FakeKernel kernel;
  int calls = 0;
  run(kernel, options(), [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    if (++calls > 5) throw std::runtime_error("stop");
    return time_with_model(k, p, copies);
  });

  SweepRunOptions other_gpu = options(true);
  other_gpu.device.name = "Other GPU";
  try {
    run(kernel, other_gpu);
    FAIL();
  } catch (const SweepError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "measured on \"Fake GPU\", this device is \"Other GPU\"");
  }

  SweepRunOptions other_shard = options(true);
  other_shard.shard = ShardSpec{1, 2};
  EXPECT_THROW(run(kernel, other_shard), SweepError);

  testing::write_text(grid_path_, std::string(kGridText) + "\n");
  try {
    run(kernel, options(true));
    FAIL();
  } catch (const SweepError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "changed since this CSV was started");
  }
  EXPECT_EQ(read_results_csv(csv_path()).rows.size(), 5u);  // untouched by the refusals
}

TEST_F(SweepRunnerTest, PrunedSearchFindsTheExhaustiveBestWithFewerPoints) {
  FakeKernel exhaustive_kernel;
  run(exhaustive_kernel, options());
  std::map<std::string, std::pair<double, int>> exhaustive_best;  // shape -> (time, splits)
  for (const ResultRow& row : read_results_csv(csv_path()).rows) {
    auto& best = exhaustive_best.try_emplace(row.point.shape_key(), 1e300, 0).first->second;
    if (row.time_us_median < best.first) best = {row.time_us_median, row.point.num_splits};
  }

  ScopedTempDir other;
  SweepRunOptions o = options();
  o.out_csv = other.file("pruned.csv");
  o.search = SearchMode::pruned;
  FakeKernel pruned_kernel;
  const SweepSummary summary = run(pruned_kernel, o);
  EXPECT_EQ(summary.rows_written + summary.search_skipped, 80);
  EXPECT_GT(summary.search_skipped, 0);
  std::map<std::string, std::pair<double, int>> pruned_best;
  for (const ResultRow& row : read_results_csv(o.out_csv).rows) {
    auto& best = pruned_best.try_emplace(row.point.shape_key(), 1e300, 0).first->second;
    if (row.time_us_median < best.first) best = {row.time_us_median, row.point.num_splits};
  }
  EXPECT_EQ(pruned_best, exhaustive_best);
  EXPECT_EQ(read_sidecar(sidecar_path_for(o.out_csv)).counts.search_skipped, summary.search_skipped);
}

// Patience decides how far past a bump the walk looks: with 2, one slower count does not
// end the walk, two in a row do, and what lies beyond is left untimed.
TEST_F(SweepRunnerTest, PrunedSearchStopsAfterPatienceSlowerCountsInARow) {
  const std::map<int, double> curve = {{1, 10}, {2, 8}, {4, 9}, {8, 7}, {16, 7.5}, {32, 7.6}, {64, 5}};
  const TimingCallback bumpy = [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    TimingResult result = time_with_model(k, p, copies);
    result.time_us_median = curve.at(p.num_splits);
    return result;
  };
  for (int patience : {1, 2}) {
    ScopedTempDir other;
    SweepRunOptions o = options();
    o.out_csv = other.file("pruned.csv");
    o.search = SearchMode::pruned;
    o.pruned_search_patience = patience;
    FakeKernel kernel;
    const SweepSummary summary = run(kernel, o, bumpy);
    std::map<int, int> rows_per_context;
    std::map<std::string, int> best_splits;
    std::map<std::string, double> best_time;
    for (const ResultRow& row : read_results_csv(o.out_csv).rows) {
      ++rows_per_context[row.point.context_len];
      auto [it, inserted] = best_time.try_emplace(row.point.shape_key(), row.time_us_median);
      if (inserted || row.time_us_median < it->second) {
        it->second = row.time_us_median;
        best_splits[row.point.shape_key()] = row.point.num_splits;
      }
    }
    // 8 shapes per context. Context 256 times 1, 2, 4 either way (nothing left to skip).
    EXPECT_EQ(rows_per_context[256], 8 * 3) << "patience " << patience;
    EXPECT_EQ(rows_per_context[4096], 8 * (patience == 1 ? 3 : 6)) << "patience " << patience;
    EXPECT_EQ(summary.search_skipped, 8 * (patience == 1 ? 4 : 1));
    for (const auto& [shape, splits] : best_splits) {
      if (shape.find("L4096") != std::string::npos) {
        EXPECT_EQ(splits, patience == 1 ? 2 : 8) << shape;
      }
    }
  }
}

TEST_F(SweepRunnerTest, SeveralKernelsShareOneCsvAndResumeIndependently) {
  FakeKernel a("kernel_a");
  FakeKernel b("kernel_b");
  int calls = 0;
  const TimingCallback crash_at_100 = [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    if (++calls > 100) throw std::runtime_error("stop");
    return time_with_model(k, p, copies);
  };
  SweepSummary first = SweepRunner(options()).run(grid_, plan_, {&a, &b}, crash_at_100);
  EXPECT_EQ(first.planned, 160);
  EXPECT_EQ(first.rows_written, 100);
  SweepSummary second = SweepRunner(options(true)).run(grid_, plan_, {&a, &b}, time_with_model);
  EXPECT_EQ(second.already_done, 100);
  EXPECT_EQ(second.rows_written, 60);
  std::set<std::string> expected = planned_keys("kernel_a");
  for (const auto& key : planned_keys("kernel_b")) expected.insert(key);
  const std::multiset<std::string> keys = csv_keys();
  EXPECT_EQ(keys.size(), 160u);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), expected);
  EXPECT_THROW(SweepRunner(options(true)).run(grid_, plan_, {&a, &a}, time_with_model), SweepError);
}

TEST_F(SweepRunnerTest, AKernelThatPicksItsOwnCountIsTimedOncePerShapeAtItsLargestCount) {
  FakeKernel fixed("fixed");
  FakeKernel policy("policy");
  policy.picks_own = true;
  int calls = 0;
  const TimingCallback crash_at_90 = [&](KernelUnderTest& k, const SweepPoint& p, int copies) {
    if (++calls > 90) throw std::runtime_error("stop");
    return time_with_model(k, p, copies);
  };
  // 80 points of the fixed kernel, then one row per shape (16) of the policy kernel.
  const SweepSummary first = SweepRunner(options()).run(grid_, plan_, {&fixed, &policy}, crash_at_90);
  EXPECT_EQ(first.planned, 96);
  EXPECT_EQ(first.rows_written, 90);
  SweepRunOptions pruned = options(true);
  pruned.search = SearchMode::pruned;  // nothing to search with one count
  const SweepSummary second = SweepRunner(pruned).run(grid_, plan_, {&fixed, &policy}, time_with_model);
  EXPECT_EQ(second.planned, 96);
  EXPECT_EQ(second.already_done, 90);
  EXPECT_EQ(second.rows_written, 6);
  EXPECT_EQ(second.search_skipped, 0);

  std::set<std::string> expected = planned_keys("fixed");
  for (const SweepShape& shape : plan_.shapes) {
    expected.insert(resume_key("policy", shape.point(shape.split_counts.back())));
  }
  const std::multiset<std::string> keys = csv_keys();
  EXPECT_EQ(keys.size(), 96u);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), expected);
  EXPECT_EQ(policy.prepares, 16 + 1);  // one per shape, and the shape the crash interrupted again
  EXPECT_EQ(policy.largest_splits_prepared, 64);
  EXPECT_EQ(read_sidecar(sidecar_path_for(csv_path())).counts.planned, 96);

  const SweepSummary third = SweepRunner(options(true)).run(grid_, plan_, {&policy}, time_with_model);
  EXPECT_EQ(third.planned, 16);
  EXPECT_EQ(third.already_done, 16);
  EXPECT_EQ(third.rows_written, 0);
}

TEST_F(SweepRunnerTest, TheDryRunCountsAKernelThatPicksItsOwnCountOncePerShape) {
  const PlanEstimate every_point = estimate_plan(grid_, plan_, 1);
  const PlanEstimate both = estimate_plan(grid_, plan_, 2, {}, 1);
  EXPECT_EQ(every_point.timed_rows, 80);
  EXPECT_EQ(both.timed_rows, 96);
  EXPECT_GT(both.seconds, every_point.seconds);
  EXPECT_LT(both.seconds, 2 * every_point.seconds);
  PlanReportInput report;
  report.grid = &grid_;
  report.whole = &plan_;
  report.shard = &plan_;
  report.kernels = {"fixed", "policy"};
  report.own_count_kernels = {"policy"};
  EXPECT_TRUE(contains(format_plan_report(report), "fixed, policy -> 96 rows")) << format_plan_report(report);
}

TEST_F(SweepRunnerTest, ShardsRunSeparatelyAddUpToTheWholeSweep) {
  std::set<std::string> keys;
  std::int64_t rows = 0;
  for (int index = 0; index < 3; ++index) {
    SweepRunOptions o = options();
    o.out_csv = dir_.file("shard" + std::to_string(index) + ".csv");
    o.shard = ShardSpec{index, 3};
    FakeKernel kernel;
    SweepRunner(o).run(grid_, select_shard(plan_, o.shard), {&kernel}, time_with_model);
    for (const ResultRow& row : read_results_csv(o.out_csv).rows) {
      ++rows;
      EXPECT_TRUE(keys.insert(resume_key(row)).second) << resume_key(row);
    }
    EXPECT_EQ(read_sidecar(sidecar_path_for(o.out_csv)).shard, o.shard.to_string());
  }
  EXPECT_EQ(rows, 80);
  EXPECT_EQ(keys, planned_keys());
}

TEST(SweepRunnerFormat, DurationsAndModes) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(45.4), "45s");
  EXPECT_EQ(format_duration(92), "1m32s");
  EXPECT_EQ(format_duration(3600 + 180), "1h03m");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(parse_search_mode("pruned"), SearchMode::pruned);
  EXPECT_EQ(parse_search_mode("exhaustive"), SearchMode::exhaustive);
  EXPECT_FALSE(parse_search_mode("greedy").has_value());
}

}  // namespace
}  // namespace splitkv::tuner
