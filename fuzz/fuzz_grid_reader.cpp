// libFuzzer target: the grid reader (tuner/GRID_SCHEMA.md) and what the CLI does with an
// accepted grid before any GPU work (expansion, pruning, sharding, the dry-run report).
//
// The contract under test: any byte string either parses, or fails with a GridError whose
// message starts with the source name. Any other exception, a crash, a sanitizer report or
// a broken plan invariant is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/plan_report.hpp"
#include "splitkv/tuner/sweep_plan.hpp"

namespace {

using namespace splitkv::tuner;

constexpr const char* kSource = "fuzz.json";
// Expansion is linear in the blocks' products; bigger grids are valid but only slow.
constexpr std::int64_t kMaxExpandedPoints = 200000;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_grid_reader: invariant broken: %s\n", what);
  std::abort();
}

void check_plan(const GridSpec& grid) {
  std::int64_t product = 0;
  for (const GridBlock& block : grid.blocks) {
    if (block.cartesian_size() <= 0) fail("a block with an empty product was accepted");
    product += block.cartesian_size();
    if (product > kMaxExpandedPoints) return;
  }
  const SweepPlan plan = expand_grid(grid);
  if (plan.cartesian_points != product) fail("cartesian_points differs from the blocks' products");
  if (plan.point_count() + plan.duplicate_points + plan.pruned.total() != plan.cartesian_points) {
    fail("planned + duplicate + pruned points do not add up to the product");
  }
  const std::int64_t budget = grid.memory_budget_bytes();
  if (budget <= 0) fail("memory budget is not positive");
  for (const SweepShape& shape : plan.shapes) {
    if (shape.split_counts.empty()) fail("a planned shape has no split counts");
    for (std::size_t i = 0; i < shape.split_counts.size(); ++i) {
      const SweepPoint point = shape.point(shape.split_counts[i]);
      if (i > 0 && shape.split_counts[i] <= shape.split_counts[i - 1]) fail("split counts not ascending");
      if (point.cache_capacity < point.context_len) fail("capacity below context");
      if (point.kv_bytes() <= 0 || point.footprint_bytes() <= 0) fail("non-positive byte counts");
      if (point.footprint_bytes() > budget) fail("a point over the memory budget was planned");
    }
  }
  // Shards are disjoint and cover the plan.
  std::int64_t sharded = 0;
  for (int index = 0; index < 3; ++index) {
    sharded += select_shard(plan, ShardSpec{index, 3}).point_count();
  }
  if (sharded != plan.point_count()) fail("shards do not cover the plan exactly");

  PlanReportInput report;
  report.grid = &grid;
  report.grid_sha256 = "0000000000000000";
  report.whole = &plan;
  report.shard = &plan;
  report.kernels = {"splitkv"};
  const std::string text = format_plan_report(report);
  if (text.empty()) fail("empty dry-run report");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  GridSpec grid;
  try {
    grid = parse_grid(text, kSource);
  } catch (const GridError& error) {
    const std::string message = error.what();
    if (message.rfind(std::string(kSource) + ":", 0) != 0) fail("GridError without the file name");
    return 0;
  }
  if (grid.blocks.empty()) fail("an accepted grid has no block");
  if (grid.name.empty()) fail("an accepted grid has no name");
  check_plan(grid);
  return 0;
}
