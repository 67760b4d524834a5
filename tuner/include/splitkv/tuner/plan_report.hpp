// What `splitkv sweep --dry-run` prints: how many points a grid yields, what pruning
// dropped and why, and a rough bill in bytes and time, so a grid is sized before it costs
// GPU time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"

namespace splitkv::tuner {

// The estimate has no GPU to ask, so it assumes one; the defaults describe an H200 with
// the harness's per-point costs as first measured. Only the ranking of grids by cost is
// meant to be trusted, not the seconds.
struct PlanAssumptions {
  std::int64_t l2_bytes = 60ll * 1024 * 1024;
  double bandwidth_tbps = 4.0;        // sustained KV read rate
  double launch_floor_us = 5.0;       // split kernel + combine on a tiny shape
  double per_point_overhead_s = 2e-3; // graph capture, instantiation, synchronisation
  double per_shape_overhead_s = 1e-2; // allocation and fill of the rotating buffers
  double fill_tbps = 1.0;             // random fill of K/V
  int max_copies = 1024;
};

struct PlanEstimate {
  std::int64_t timed_rows = 0;       // points x kernels (an upper bound for --search pruned); a
                                     // kernel that picks its own split count: one row per shape
  std::int64_t kv_bytes_total = 0;   // KV bytes one pass over the points reads
  std::int64_t peak_bytes = 0;       // largest buffer set x its rotating copies
  std::string peak_point;            // the shape responsible for peak_bytes
  double seconds = 0;
};

// `kernel_count` kernels, of which the last `own_count_kernels` pick their own split count and are
// timed once per shape (KernelUnderTest::picks_own_split_count).
PlanEstimate estimate_plan(const GridSpec& grid, const SweepPlan& plan, int kernel_count,
                           const PlanAssumptions& assumptions = {}, int own_count_kernels = 0);

// The estimate's seconds for one shape, all its split counts, one kernel: what
// --shard-by cost balances.
double estimate_shape_seconds(const GridSpec& grid, const SweepShape& shape,
                              const PlanAssumptions& assumptions = {});

// The shard (0..count-1) of each shape of `plan`, by position: longest processing time
// first, each shape in turn, dearest first (ties by shape_index), to the shard with the
// least estimated time so far (ties to the lower shard). Every shard's total then lies
// within the dearest shape's cost of the mean. It depends only on the grid and the fixed
// assumptions, never on the GPU at hand, so every machine of a sharded sweep deals alike.
std::vector<int> deal_shapes_by_cost(const GridSpec& grid, const SweepPlan& plan, int count,
                                     const PlanAssumptions& assumptions = {});

// The shapes of `shard`, in plan order, dealt `by` index (select_shard) or by cost.
SweepPlan select_shard(const GridSpec& grid, const SweepPlan& plan, const ShardSpec& shard, ShardBy by);

struct PlanReportInput {
  const GridSpec* grid = nullptr;
  std::string grid_sha256;
  const SweepPlan* whole = nullptr;  // the full grid, before sharding
  const SweepPlan* shard = nullptr;  // what this invocation would run
  ShardSpec shard_spec;
  ShardBy shard_by = ShardBy::index;
  std::vector<std::string> kernels;
  // Of `kernels`, those whose own plan picks the split count: timed once per shape. Where the
  // build cannot ask (no CUDA), every kernel counts at every point, an upper bound.
  std::vector<std::string> own_count_kernels;
  SearchMode search = SearchMode::exhaustive;
  PlanAssumptions assumptions;
};

std::string format_plan_report(const PlanReportInput& input);

// The planned points as CSV (`splitkv sweep --dry-run --plan-csv`), one line per (shape,
// num_splits) in plan order, for a driver that times a kernel outside this binary and must
// time exactly the points, keys and batches a sweep would: shape_index, key, the results CSV's
// key columns, kv_bytes, working_set_bytes, footprint_bytes, and lengths, the batch's real
// lengths run-length coded as space-separated "length" or "length*count" in sequence order.
std::string format_plan_csv(const SweepPlan& plan);

// "1.23 GB", "512 B": decimal units, like memory_budget_gb.
std::string format_bytes(std::int64_t bytes);

}  // namespace splitkv::tuner
