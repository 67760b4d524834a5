// From a grid to the ordered list of points one sweep (or one shard of it) will time:
// expansion of the block union, deduplication, pruning and sharding. Deterministic, so
// two machines given the same grid and shard agree on every point and its position.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

enum class PruneReason {
  memory_budget,        // one buffer set of the shape exceeds the grid's memory budget
  splits_exceed_tiles,  // num_splits > ceil(context_len / 64): extra splits would be empty
};

std::string_view to_string(PruneReason reason);
std::string describe(PruneReason reason);  // one line for reports

// One shape (everything but num_splits) with the split counts to time for it, ascending.
struct SweepShape {
  SweepPoint shape;         // num_splits is the smallest of split_counts
  std::vector<int> split_counts;
  std::size_t shape_index;  // position among all shapes of the grid (shard assignment)

  SweepPoint point(int num_splits) const {
    SweepPoint p = shape;
    p.num_splits = num_splits;
    return p;
  }
};

// The split counts one kernel is timed at for a shape: all of them, or only the largest for a
// kernel whose own plan picks the count (KernelUnderTest::picks_own_split_count), whose policy row
// records that largest planned count as num_splits.
inline std::vector<int> timed_split_counts(const SweepShape& shape, bool picks_own_split_count) {
  if (picks_own_split_count && !shape.split_counts.empty()) return {shape.split_counts.back()};
  return shape.split_counts;
}

struct PruneCounts {
  std::map<PruneReason, std::int64_t> points;  // per reason; each point counted once
  std::int64_t total() const;
};

struct SweepPlan {
  std::vector<SweepShape> shapes;   // grid order; all split counts of a shape together
  std::int64_t cartesian_points = 0;  // sum of the blocks' products
  std::int64_t duplicate_points = 0;  // dropped because an earlier block produced them
  PruneCounts pruned;

  std::int64_t point_count() const;
  // Points in plan order: shapes in order, split counts ascending within a shape.
  std::vector<SweepPoint> points() const;
};

// Expands the union of the grid's blocks (blocks in file order, then axes in the order
// layout, dtype, heads, head_dim, batch, context_len, cache_capacity, length_distribution),
// drops repeats of a point an earlier block already produced, and prunes.
SweepPlan expand_grid(const GridSpec& grid);

class ShardError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct ShardSpec {
  int index = 0;
  int count = 1;
  std::string to_string() const;  // "i/N"
};

// Parses "i/N" with 0 <= i < N; throws ShardError with the reason otherwise.
ShardSpec parse_shard(std::string_view text);

// Keeps the shapes whose grid-wide shape_index % count == index: whole shapes go to one
// shard, so its split counts are timed back to back on one device and its best is local.
// The prune counts stay those of the whole grid.
SweepPlan select_shard(const SweepPlan& plan, const ShardSpec& shard);

// How shapes are dealt to shards: index, round-robin by shape_index (select_shard above);
// cost, greedily by the planner's time estimate (select_shard in plan_report.hpp).
enum class ShardBy { index, cost };
std::string_view to_string(ShardBy by);
std::optional<ShardBy> parse_shard_by(std::string_view text);

}  // namespace splitkv::tuner
