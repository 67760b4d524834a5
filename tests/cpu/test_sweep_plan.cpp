#include "splitkv/tuner/sweep_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "splitkv/tuner/plan_report.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using nlohmann::json;

json small_grid() {
  return json::parse(R"({
    "name": "small",
    "memory_budget_gb": 100,
    "protocol": {"repetitions": 3, "min_working_set_l2_multiple": 3, "warmup_replays": 1,
                 "min_time_s": 0.001},
    "layouts": [{"layout": "contiguous"}, {"layout": "paged", "page_size": 16}],
    "dtypes": ["bf16"],
    "batch": [1, 4],
    "heads": [[32, 8]],
    "head_dim": [128],
    "context_len": [64, 1000],
    "cache_capacity": ["x1"],
    "num_splits": [32, 16, 4, 2, 1]
  })");
}

SweepPlan plan_of(const json& grid) { return expand_grid(parse_grid(grid.dump(), "small.json")); }

TEST(SweepPlan, PrunesSplitCountsBeyondTheTilesButKeepsOne) {
  const SweepPlan plan = plan_of(small_grid());
  EXPECT_EQ(plan.cartesian_points, 2 * 2 * 2 * 5);
  // context 64 is one tile: only s=1 survives; context 1000 is 16 tiles: s=32 goes.
  EXPECT_EQ(plan.pruned.points.at(PruneReason::splits_exceed_tiles), 2 * 2 * (4 + 1));
  EXPECT_EQ(plan.pruned.points.count(PruneReason::memory_budget), 0u);
  EXPECT_EQ(plan.point_count(), 2 * 2 * (1 + 4));
  EXPECT_EQ(plan.shapes.size(), 8u);
  for (const SweepShape& shape : plan.shapes) {
    for (int s : shape.split_counts) {
      EXPECT_TRUE(s == 1 || s <= shape.shape.kv_tiles()) << shape.point(s).key();
    }
  }
}

TEST(SweepPlan, OrderIsDeterministicWithSplitsAscendingPerShape) {
  const std::vector<SweepPoint> points = plan_of(small_grid()).points();
  ASSERT_EQ(points.size(), 20u);
  EXPECT_EQ(points[0].key(), "contiguous bf16 b1 h32/8 d128 L64 C64 fixed s1");
  EXPECT_EQ(points[1].key(), "contiguous bf16 b1 h32/8 d128 L1000 C1000 fixed s1");
  EXPECT_EQ(points[2].key(), "contiguous bf16 b1 h32/8 d128 L1000 C1000 fixed s2");
  EXPECT_EQ(points[4].key(), "contiguous bf16 b1 h32/8 d128 L1000 C1000 fixed s16");
  EXPECT_EQ(points[5].key(), "contiguous bf16 b4 h32/8 d128 L64 C64 fixed s1");
  EXPECT_EQ(points.back().key(), "paged16 bf16 b4 h32/8 d128 L1000 C1000 fixed s16");
  EXPECT_EQ(plan_of(small_grid()).points().front(), points.front());  // same again
}

TEST(SweepPlan, MemoryBudgetDropsWholeShapes) {
  json grid = small_grid();
  grid["cache_capacity"] = json::array({"x1", 1 << 24});
  grid["memory_budget_gb"] = 10;
  // Contiguous at 16M tokens: b1 is 2*16M*8*128*2 = 68.7 GB > 10 GB; paged pools hold only
  // real pages, so paged shapes stay whatever the capacity.
  const SweepPlan plan = plan_of(grid);
  EXPECT_EQ(plan.pruned.points.at(PruneReason::memory_budget), 2 * 2 * 5);
  for (const SweepShape& shape : plan.shapes) {
    EXPECT_FALSE(shape.shape.layout == KvLayout::contiguous && shape.shape.cache_capacity == (1 << 24))
        << shape.shape.key();
  }
  EXPECT_EQ(plan.point_count(), 3 * 2 * (1 + 4));
  EXPECT_EQ(plan.pruned.total(), plan.cartesian_points - plan.point_count());
}

TEST(SweepPlan, UnionOfBlocksDropsRepeatedPoints) {
  json grid = small_grid();
  grid["blocks"] = json::parse(R"([
    {},
    {"batch": [4, 16], "num_splits": [1, 3]},
    {"cache_capacity": [1000], "context_len": [1000]}
  ])");
  const SweepPlan plan = plan_of(grid);
  // Block 1 repeats b4 s1 for both layouts and both contexts; block 2's capacity 1000 at
  // context 1000 is the same point as block 0's "x1".
  EXPECT_EQ(plan.duplicate_points, 2 * 2 + 2 * 2 * 5);
  std::set<std::string> keys;
  for (const SweepPoint& p : plan.points()) EXPECT_TRUE(keys.insert(p.key()).second) << p.key();
  // b4 L1000 shapes hold block 0's splits plus block 1's s=3, in order.
  for (const SweepShape& shape : plan.shapes) {
    if (shape.shape.batch == 4 && shape.shape.context_len == 1000) {
      EXPECT_EQ(shape.split_counts, (std::vector<int>{1, 2, 3, 4, 16}));
    }
  }
  EXPECT_EQ(plan.cartesian_points, plan.point_count() + plan.duplicate_points + plan.pruned.total());
}

TEST(SweepPlan, ShardsAreDisjointCoverEverythingAndKeepShapesWhole) {
  const SweepPlan whole = plan_of(small_grid());
  for (int count = 1; count <= 7; ++count) {
    std::map<std::string, int> owner;
    std::int64_t total = 0;
    for (int index = 0; index < count; ++index) {
      const SweepPlan shard = select_shard(whole, ShardSpec{index, count});
      total += shard.point_count();
      for (const SweepShape& shape : shard.shapes) {
        EXPECT_EQ(shape.shape_index % std::size_t(count), std::size_t(index));
        for (int s : shape.split_counts) {
          EXPECT_TRUE(owner.emplace(shape.point(s).key(), index).second)
              << shape.point(s).key() << " in two shards of " << count;
        }
      }
      // Shard shapes are the whole plan's shapes, split counts intact.
      for (const SweepShape& shape : shard.shapes) {
        EXPECT_EQ(shape.split_counts, whole.shapes[shape.shape_index].split_counts);
      }
    }
    EXPECT_EQ(total, whole.point_count()) << count << " shards";
    EXPECT_EQ(owner.size(), std::size_t(whole.point_count()));
  }
}

TEST(SweepPlan, ParseShardAcceptsIOverNAndExplainsBadInput) {
  const ShardSpec shard = parse_shard("2/5");
  EXPECT_EQ(shard.index, 2);
  EXPECT_EQ(shard.count, 5);
  EXPECT_EQ(shard.to_string(), "2/5");
  const std::pair<const char*, const char*> bad[] = {
      {"3/2", "--shard \"3/2\": index must be less than the count 2 (shards are numbered 0..1)"},
      {"2/2", "--shard \"2/2\": index must be less than the count 2 (shards are numbered 0..1)"},
      {"0/0", "--shard \"0/0\": count must be at least 1"},
      {"1", "--shard \"1\": expected i/N, e.g. 0/4"},
      {"a/2", "--shard \"a/2\": index \"a\" is not a non-negative integer (expected i/N, e.g. 0/4)"},
      {"-1/2", "--shard \"-1/2\": index \"-1\" is not a non-negative integer (expected i/N, e.g. 0/4)"},
      {"1/2/3", "--shard \"1/2/3\": count \"2/3\" is not a non-negative integer (expected i/N, e.g. 0/4)"},
      {"1/", "--shard \"1/\": count \"\" is not a non-negative integer (expected i/N, e.g. 0/4)"},
  };
  for (const auto& [text, message] : bad) {
    try {
      parse_shard(text);
      ADD_FAILURE() << text << " parsed";
    } catch (const ShardError& error) {
      EXPECT_EQ(std::string(error.what()), message);
    }
  }
}

std::string shipped_grid(const std::string& name) {
  return std::string(SPLITKV_SOURCE_DIR) + "/sweeps/" + name + ".json";
}

// The counts --dry-run reports for the shipped grids; a change here is a change in GPU
// time and in what the heuristic is trained on, so it should be deliberate.
TEST(ShippedGridPlans, CountsAreWhatTheDocsSay) {
  const SweepPlan quick = expand_grid(load_grid_file(shipped_grid("quick")));
  EXPECT_EQ(quick.cartesian_points, 576);
  EXPECT_EQ(quick.pruned.points.at(PruneReason::memory_budget), 24);
  EXPECT_EQ(quick.pruned.points.at(PruneReason::splits_exceed_tiles), 69);
  EXPECT_EQ(quick.point_count(), 483);

  const SweepPlan full = expand_grid(load_grid_file(shipped_grid("full")));
  EXPECT_GE(full.point_count(), 20000);  // the issue's floor for timed rows
  EXPECT_LE(full.point_count(), 30000);  // and what one 10-minute device call can time

  const SweepPlan validation = expand_grid(load_grid_file(shipped_grid("validation")));
  EXPECT_GT(validation.point_count(), 1000);

  const SweepPlan fp8 = expand_grid(load_grid_file(shipped_grid("fp8")));
  EXPECT_EQ(fp8.point_count(), 13384);
  EXPECT_EQ(fp8.shapes.size(), 1252u);
  const SweepPlan fp8_validation = expand_grid(load_grid_file(shipped_grid("fp8_validation")));
  EXPECT_EQ(fp8_validation.point_count(), 2467);
  EXPECT_EQ(fp8_validation.shapes.size(), 220u);
}

// The fp8 grids are sized to one short device call each: the dry run's estimate of the training
// grid under 4 minutes, of its validation under 1.5 (the H200 took about 1.5x the estimate on
// full.json and validation.json).
TEST(ShippedGridPlans, Fp8GridsFitTheirTimeBudget) {
  for (const auto& [name, budget_s] : std::vector<std::pair<std::string, double>>{{"fp8", 240}, {"fp8_validation", 90}}) {
    const GridSpec grid = load_grid_file(shipped_grid(name));
    const SweepPlan plan = expand_grid(grid);
    EXPECT_LT(estimate_plan(grid, plan, 1).seconds, budget_s) << name;
  }
}

// --shard-by cost: longest processing time first on the planner's estimate. Each shape lands
// in one shard, every shard's estimate is within the dearest shape's of the mean (the bound of
// greedy list scheduling), and a shard keeps the plan's order.
TEST(ShardByCost, DealsEveryShapeOnceAndBalancesTheEstimate) {
  const GridSpec grid = load_grid_file(shipped_grid("full"));
  const SweepPlan plan = expand_grid(grid);
  double dearest = 0, total = 0;
  for (const SweepShape& shape : plan.shapes) {
    dearest = std::max(dearest, estimate_shape_seconds(grid, shape));
    total += estimate_shape_seconds(grid, shape);
  }
  for (int count : {2, 3, 4, 8}) {
    std::vector<double> by_cost(std::size_t(count), 0), by_index(std::size_t(count), 0);
    std::set<std::size_t> seen;
    std::int64_t points = 0;
    for (int i = 0; i < count; ++i) {
      const SweepPlan shard = select_shard(grid, plan, ShardSpec{i, count}, ShardBy::cost);
      std::size_t previous = 0;
      for (std::size_t k = 0; k < shard.shapes.size(); ++k) {
        const SweepShape& shape = shard.shapes[k];
        EXPECT_TRUE(seen.insert(shape.shape_index).second) << "shape in two shards";
        if (k > 0) EXPECT_GT(shape.shape_index, previous) << "shard out of plan order";
        previous = shape.shape_index;
        by_cost[std::size_t(i)] += estimate_shape_seconds(grid, shape);
      }
      points += shard.point_count();
      for (const SweepShape& shape : select_shard(plan, ShardSpec{i, count}).shapes) {
        by_index[std::size_t(i)] += estimate_shape_seconds(grid, shape);
      }
    }
    EXPECT_EQ(seen.size(), plan.shapes.size());
    EXPECT_EQ(points, plan.point_count());
    const double mean = total / count;
    const auto [low, high] = std::minmax_element(by_cost.begin(), by_cost.end());
    EXPECT_LE(*high - mean, dearest) << count << " shards";
    EXPECT_LE(mean - *low, dearest) << count << " shards";
    EXPECT_LE(*high / mean, 1.02) << count << " shards";  // 2839 shapes: far tighter than the bound
    EXPECT_LE(*high - *low, *std::max_element(by_index.begin(), by_index.end()) -
                                *std::min_element(by_index.begin(), by_index.end()))
        << "cost dealt worse than round-robin at " << count << " shards";
  }
  // The same on every call (every machine of a sharded sweep must deal alike).
  EXPECT_EQ(deal_shapes_by_cost(grid, plan, 3), deal_shapes_by_cost(grid, plan, 3));
}

TEST(ShardByCost, ParsesItsNamesAndOneShardIsEverything) {
  EXPECT_EQ(parse_shard_by("cost"), ShardBy::cost);
  EXPECT_EQ(parse_shard_by("index"), ShardBy::index);
  EXPECT_FALSE(parse_shard_by("round-robin").has_value());
  const GridSpec grid = parse_grid(small_grid().dump(), "small.json");
  const SweepPlan plan = expand_grid(grid);
  EXPECT_EQ(select_shard(grid, plan, ShardSpec{0, 1}, ShardBy::cost).points(), plan.points());
}

}  // namespace
}  // namespace splitkv::tuner
