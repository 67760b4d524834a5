#include "splitkv/tuner/plan_report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace splitkv::tuner {

std::string format_bytes(std::int64_t bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = double(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1000 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, kUnits[unit]);
}

namespace {

int shape_copies(const GridSpec& grid, const SweepShape& shape, const PlanAssumptions& a) {
  return rotating_copies(shape.point(shape.split_counts.back()), a.l2_bytes,
                         grid.protocol.min_working_set_l2_multiple, grid.memory_budget_bytes(), a.max_copies);
}

// Filling the rotating buffers of one shape, once per kernel. Only the real tokens of each
// copy need filling; capacity beyond them is never read.
double shape_prepare_seconds(const SweepPoint& widest, int copies, const PlanAssumptions& a) {
  return a.per_shape_overhead_s + double(widest.kv_bytes()) * copies / (a.fill_tbps * 1e12);
}

double point_seconds(const MeasurementProtocol& protocol, const SweepPoint& point, int copies,
                     const PlanAssumptions& a) {
  const double launch_s =
      std::max(a.launch_floor_us * 1e-6, double(point.working_set_bytes()) / (a.bandwidth_tbps * 1e12));
  const double replay_s = launch_s * copies;
  return a.per_point_overhead_s + protocol.warmup_replays * replay_s +
         protocol.repetitions * std::max(protocol.min_time_s, replay_s);
}

}  // namespace

double estimate_shape_seconds(const GridSpec& grid, const SweepShape& shape, const PlanAssumptions& a) {
  const SweepPoint widest = shape.point(shape.split_counts.back());
  const int copies = shape_copies(grid, shape, a);
  double seconds = shape_prepare_seconds(widest, copies, a);
  for (int splits : shape.split_counts) seconds += point_seconds(grid.protocol, shape.point(splits), copies, a);
  return seconds;
}

PlanEstimate estimate_plan(const GridSpec& grid, const SweepPlan& plan, int kernel_count,
                           const PlanAssumptions& a, int own_count_kernels) {
  PlanEstimate estimate;
  own_count_kernels = std::clamp(own_count_kernels, 0, kernel_count);
  const int every_point_kernels = kernel_count - own_count_kernels;
  double seconds = 0;
  for (const SweepShape& shape : plan.shapes) {
    const SweepPoint widest = shape.point(shape.split_counts.back());
    const int copies = shape_copies(grid, shape, a);
    const std::int64_t peak = widest.footprint_bytes() * copies;
    if (peak > estimate.peak_bytes) {
      estimate.peak_bytes = peak;
      estimate.peak_point = fmt::format("{} x{} copies", widest.shape_key(), copies);
    }
    seconds += shape_prepare_seconds(widest, copies, a) * kernel_count;
    for (int splits : shape.split_counts) {
      const SweepPoint point = shape.point(splits);
      const int kernels_here = every_point_kernels + (splits == widest.num_splits ? own_count_kernels : 0);
      seconds += point_seconds(grid.protocol, point, copies, a) * kernels_here;
      estimate.kv_bytes_total += point.kv_bytes() * kernels_here;
      estimate.timed_rows += kernels_here;
    }
  }
  estimate.seconds = seconds;
  return estimate;
}

std::vector<int> deal_shapes_by_cost(const GridSpec& grid, const SweepPlan& plan, int count,
                                     const PlanAssumptions& a) {
  std::vector<double> cost(plan.shapes.size());
  std::vector<std::size_t> order(plan.shapes.size());
  for (std::size_t i = 0; i < plan.shapes.size(); ++i) {
    cost[i] = estimate_shape_seconds(grid, plan.shapes[i], a);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (cost[x] != cost[y]) return cost[x] > cost[y];
    return plan.shapes[x].shape_index < plan.shapes[y].shape_index;
  });
  std::vector<double> load(std::size_t(std::max(count, 1)), 0.0);
  std::vector<int> shard_of(plan.shapes.size(), 0);
  for (std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equals
    shard_of[i] = int(least - load.begin());
    *least += cost[i];
  }
  return shard_of;
}

SweepPlan select_shard(const GridSpec& grid, const SweepPlan& plan, const ShardSpec& shard, ShardBy by) {
  if (by == ShardBy::index) return select_shard(plan, shard);
  SweepPlan selected;
  selected.cartesian_points = plan.cartesian_points;
  selected.duplicate_points = plan.duplicate_points;
  selected.pruned = plan.pruned;
  const std::vector<int> shard_of = deal_shapes_by_cost(grid, plan, shard.count);
  for (std::size_t i = 0; i < plan.shapes.size(); ++i) {
    if (shard_of[i] == shard.index) selected.shapes.push_back(plan.shapes[i]);
  }
  return selected;
}

std::string format_plan_csv(const SweepPlan& plan) {
  // No field can hold a comma or a quote (keys and lengths are spaces and digits, distribution
  // names are [A-Za-z0-9_.-]), so nothing is quoted.
  std::string out =
      "shape_index,key,layout,page_size,dtype,batch,num_heads,num_kv_heads,head_dim,context_len,"
      "cache_capacity,length_distribution,num_splits,kv_bytes,working_set_bytes,footprint_bytes,lengths\n";
  for (const SweepShape& shape : plan.shapes) {
    // A batch of 256 equal lengths is one token, not 256: a grid of fixed lengths stays small.
    std::string lengths;
    const std::vector<std::int32_t> real = shape.shape.real_lengths();
    for (std::size_t i = 0; i < real.size();) {
      std::size_t run = 1;
      while (i + run < real.size() && real[i + run] == real[i]) ++run;
      if (!lengths.empty()) lengths += ' ';
      lengths += run == 1 ? fmt::format("{}", real[i]) : fmt::format("{}*{}", real[i], run);
      i += run;
    }
    for (int splits : shape.split_counts) {
      const SweepPoint p = shape.point(splits);
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", shape.shape_index, p.key(),
                         to_string(p.layout), p.page_size, to_string(p.element_types()), p.batch, p.num_heads,
                         p.num_kv_heads, p.head_dim, p.context_len, p.cache_capacity,
                         to_string(p.length_distribution), p.num_splits, p.kv_bytes(), p.working_set_bytes(),
                         p.footprint_bytes(), lengths);
    }
  }
  return out;
}

std::string format_plan_report(const PlanReportInput& in) {
  const GridSpec& grid = *in.grid;
  const SweepPlan& whole = *in.whole;
  const SweepPlan& shard = *in.shard;
  std::string out;
  auto line = [&out](const std::string& text) { out += text + "\n"; };

  line(fmt::format("grid      {} (\"{}\", {} block{}{})", grid.source, grid.name, grid.blocks.size(),
                   grid.blocks.size() == 1 ? "" : "s",
                   in.grid_sha256.empty() ? "" : ", sha256 " + in.grid_sha256.substr(0, 16)));
  line(fmt::format("points    {} in the blocks' products, {} repeated across blocks, {} pruned, "
                   "{} planned in {} shapes",
                   whole.cartesian_points, whole.duplicate_points, whole.pruned.total(),
                   whole.point_count(), whole.shapes.size()));
  for (const PruneReason reason : {PruneReason::memory_budget, PruneReason::splits_exceed_tiles}) {
    const auto found = whole.pruned.points.find(reason);
    const std::int64_t count = found == whole.pruned.points.end() ? 0 : found->second;
    std::string why = describe(reason);
    if (reason == PruneReason::memory_budget) why += fmt::format(" ({} GB)", grid.memory_budget_gb);
    line(fmt::format("  pruned  {:>8} {:<20} {}", count, to_string(reason), why));
  }
  if (in.shard_spec.count > 1) {
    line(fmt::format("shard     {}: {} points in {} shapes{}", in.shard_spec.to_string(),
                     shard.point_count(), shard.shapes.size(),
                     in.shard_by == ShardBy::cost ? " (shapes dealt by estimated cost)" : ""));
  }
  std::string kernels;
  for (const auto& name : in.kernels) kernels += (kernels.empty() ? "" : ", ") + name;
  int own_count = 0;
  for (const auto& name : in.kernels) {
    own_count += std::count(in.own_count_kernels.begin(), in.own_count_kernels.end(), name) > 0 ? 1 : 0;
  }
  const PlanEstimate estimate = estimate_plan(grid, shard, int(in.kernels.size()), in.assumptions, own_count);
  line(fmt::format("kernels   {} -> {} rows{}", kernels, estimate.timed_rows,
                   in.search == SearchMode::pruned ? " at most (--search pruned stops early)" : ""));
  line(fmt::format("protocol  {} repetitions, >= {} s each, {} warm-up replays, working set >= {} x L2",
                   grid.protocol.repetitions, grid.protocol.min_time_s, grid.protocol.warmup_replays,
                   grid.protocol.min_working_set_l2_multiple));
  line(fmt::format("bytes     {} of KV read by one pass over the points", format_bytes(estimate.kv_bytes_total)));
  if (!estimate.peak_point.empty()) {
    line(fmt::format("memory    peak {} ({})", format_bytes(estimate.peak_bytes), estimate.peak_point));
  }
  line(fmt::format("time      ~{} (rough: assumes {:.1f} TB/s, {} L2, {} ms per point, {} ms per shape)",
                   format_duration(estimate.seconds), in.assumptions.bandwidth_tbps,
                   format_bytes(in.assumptions.l2_bytes), in.assumptions.per_point_overhead_s * 1e3,
                   in.assumptions.per_shape_overhead_s * 1e3));
  if (!shard.shapes.empty()) {
    const SweepShape& first = shard.shapes.front();
    const SweepShape& last = shard.shapes.back();
    line(fmt::format("first     {}", first.point(first.split_counts.front()).key()));
    line(fmt::format("last      {}", last.point(last.split_counts.back()).key()));
  } else {
    line("nothing to time: every point was pruned or belongs to another shard");
  }
  return out;
}

}  // namespace splitkv::tuner
