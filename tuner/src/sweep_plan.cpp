#include "splitkv/tuner/sweep_plan.hpp"

#include <algorithm>
#include <memory>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace splitkv::tuner {

std::string_view to_string(PruneReason reason) {
  switch (reason) {
    case PruneReason::memory_budget:
      return "memory_budget";
    case PruneReason::splits_exceed_tiles:
      return "splits_exceed_tiles";
  }
  return "unknown";
}

std::string describe(PruneReason reason) {
  switch (reason) {
    case PruneReason::memory_budget:
      return "one buffer set (KV cache + q/out/workspace) exceeds memory_budget_gb";
    case PruneReason::splits_exceed_tiles:
      return fmt::format("num_splits > ceil(context_len / {}) (splits past the tiles hold no work)",
                         kTokensPerTile);
  }
  return "unknown";
}

std::int64_t PruneCounts::total() const {
  std::int64_t sum = 0;
  for (const auto& [reason, count] : points) sum += count;
  return sum;
}

std::int64_t SweepPlan::point_count() const {
  std::int64_t count = 0;
  for (const SweepShape& shape : shapes) count += std::int64_t(shape.split_counts.size());
  return count;
}

std::vector<SweepPoint> SweepPlan::points() const {
  std::vector<SweepPoint> out;
  out.reserve(std::size_t(point_count()));
  for (const SweepShape& shape : shapes) {
    for (int splits : shape.split_counts) out.push_back(shape.point(splits));
  }
  return out;
}

namespace {

// Why a point is dropped before timing, or nothing. Memory comes first: a shape that does
// not fit is dropped whole, whatever its split count.
std::optional<PruneReason> prune_reason(const SweepPoint& point, std::int64_t budget_bytes) {
  if (point.footprint_bytes() > budget_bytes) return PruneReason::memory_budget;
  if (point.num_splits > 1 && point.num_splits > point.kv_tiles()) {
    return PruneReason::splits_exceed_tiles;
  }
  return std::nullopt;
}

}  // namespace

SweepPlan expand_grid(const GridSpec& grid) {
  SweepPlan plan;
  std::unordered_map<std::string, std::size_t> shape_slot;  // shape key -> index in `all`
  std::vector<SweepShape> all;
  std::vector<std::unordered_set<int>> seen_splits;
  const std::int64_t budget = grid.memory_budget_bytes();

  for (const GridBlock& block : grid.blocks) {
    plan.cartesian_points += block.cartesian_size();
    for (const LayoutChoice& layout : block.layouts.values)
    for (ElementTypes types : block.dtypes.values)
    for (const HeadConfig& heads : block.heads.values)
    for (int head_dim : block.head_dim.values)
    for (int batch : block.batch.values)
    for (int context : block.context_len.values)
    for (const CapacityChoice& capacity : block.cache_capacity.values)
    for (const LengthDistribution& distribution : block.length_distribution.values) {
      SweepPoint shape;
      shape.layout = layout.layout;
      shape.page_size = layout.page_size;
      shape.dtype = types.dtype;
      shape.kv_dtype = types.kv_dtype;
      shape.batch = batch;
      shape.num_heads = heads.num_heads;
      shape.num_kv_heads = heads.num_kv_heads;
      shape.head_dim = head_dim;
      shape.context_len = context;
      shape.cache_capacity = static_cast<int>(capacity.resolve(context));
      shape.length_distribution = distribution;
      shape.num_splits = 1;
      shape.lengths = std::make_shared<const std::vector<std::int32_t>>(sequence_lengths(shape, grid.length_files));

      const std::string key = shape.shape_key();
      auto [slot, inserted] = shape_slot.emplace(key, all.size());
      if (inserted) {
        all.push_back(SweepShape{shape, {}, all.size()});
        seen_splits.emplace_back();
      }
      for (int splits : block.num_splits.values) {
        if (!seen_splits[slot->second].insert(splits).second) {
          ++plan.duplicate_points;
          continue;
        }
        const SweepPoint point = all[slot->second].point(splits);
        if (const auto reason = prune_reason(point, budget)) {
          ++plan.pruned.points[*reason];
          continue;
        }
        all[slot->second].split_counts.push_back(splits);
      }
    }
  }

  // Shape indices are assigned before pruning empties any shape, so adding a memory budget
  // or a split count never reshuffles which shard a surviving shape lands on.
  for (SweepShape& shape : all) {
    if (shape.split_counts.empty()) continue;
    std::sort(shape.split_counts.begin(), shape.split_counts.end());
    shape.shape.num_splits = shape.split_counts.front();
    plan.shapes.push_back(std::move(shape));
  }
  return plan;
}

std::string ShardSpec::to_string() const { return fmt::format("{}/{}", index, count); }

ShardSpec parse_shard(std::string_view text) {
  const std::string input(text);
  const std::size_t slash = input.find('/');
  auto parse_part = [&](const std::string& part, const char* what) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) {
      throw ShardError(fmt::format("--shard \"{}\": {} \"{}\" is not a non-negative integer "
                                   "(expected i/N, e.g. 0/4)",
                                   input, what, part));
    }
    errno = 0;
    const long value = std::strtol(part.c_str(), nullptr, 10);
    if (errno == ERANGE || value > 1000000) {
      throw ShardError(fmt::format("--shard \"{}\": {} {} is too large", input, what, part));
    }
    return static_cast<int>(value);
  };
  if (slash == std::string::npos) {
    throw ShardError(fmt::format("--shard \"{}\": expected i/N, e.g. 0/4", input));
  }
  ShardSpec shard;
  shard.index = parse_part(input.substr(0, slash), "index");
  shard.count = parse_part(input.substr(slash + 1), "count");
  if (shard.count < 1) throw ShardError(fmt::format("--shard \"{}\": count must be at least 1", input));
  if (shard.index >= shard.count) {
    throw ShardError(fmt::format("--shard \"{}\": index must be less than the count {} "
                                 "(shards are numbered 0..{})",
                                 input, shard.count, shard.count - 1));
  }
  return shard;
}

std::string_view to_string(ShardBy by) { return by == ShardBy::cost ? "cost" : "index"; }

std::optional<ShardBy> parse_shard_by(std::string_view text) {
  if (text == "index") return ShardBy::index;
  if (text == "cost") return ShardBy::cost;
  return std::nullopt;
}

SweepPlan select_shard(const SweepPlan& plan, const ShardSpec& shard) {
  SweepPlan selected;
  selected.cartesian_points = plan.cartesian_points;
  selected.duplicate_points = plan.duplicate_points;
  selected.pruned = plan.pruned;
  for (const SweepShape& shape : plan.shapes) {
    if (shape.shape_index % std::size_t(shard.count) == std::size_t(shard.index)) {
      selected.shapes.push_back(shape);
    }
  }
  return selected;
}

}  // namespace splitkv::tuner
