// A sweep grid read from JSON (schema: tuner/GRID_SCHEMA.md). A grid is a union of blocks,
// each block a cartesian product of axes, so "bf16 everywhere plus an fp16 corner" costs
// two small products instead of one huge one. Every error names the file, the JSON path
// and the reason, because grids are hand-written and a silent default would waste hours
// of GPU time.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/decode_params.hpp"
#include "splitkv/tuner/length_distribution.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

// Message: "<file>: <json path>: <reason>", or "<file>:<line>:<column>: <reason>" for
// JSON syntax errors.
class GridError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LayoutChoice {
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;  // paged only
};

struct HeadConfig {
  int num_heads = 0;
  int num_kv_heads = 0;
};

// Cache capacity: an absolute token count, or "x<m>", a multiple of the context length.
struct CapacityChoice {
  int tokens = 0;       // absolute form
  double multiple = 0;  // multiple form when > 0
  std::string spelling; // as written in the grid, for messages and reports

  bool is_multiple() const { return multiple > 0; }
  // Tokens per sequence for a given real length; multiples round up to whole tokens.
  std::int64_t resolve(int context_len) const;
};

// How each point is timed; the GPU timer reads these, the sidecar records them.
struct MeasurementProtocol {
  int repetitions = 10;                     // timed repetitions per point (median/p10/p90 over them)
  double min_working_set_l2_multiple = 3;   // one graph replay touches at least this x L2
  int warmup_replays = 3;                   // untimed replays before the first repetition
  double min_time_s = 0.01;                 // floor of timed replay time per repetition
};

// An axis keeps the JSON path its values came from, so errors that involve two axes (a
// capacity below a context length) can point at both.
template <class T>
struct GridAxis {
  std::vector<T> values;
  std::string path;
};

struct GridBlock {
  std::string path;  // "blocks[i]", or "" for a grid without blocks
  GridAxis<LayoutChoice> layouts;
  GridAxis<ElementTypes> dtypes;
  GridAxis<int> batch;
  GridAxis<HeadConfig> heads;
  GridAxis<int> head_dim;
  GridAxis<int> context_len;
  GridAxis<CapacityChoice> cache_capacity;
  GridAxis<LengthDistribution> length_distribution;
  GridAxis<int> num_splits;

  // Points in this block's cartesian product, before deduplication and pruning.
  std::int64_t cartesian_size() const;
};

struct GridSpec {
  std::string source;  // the file the grid came from; prefixes every message
  std::string name;
  std::string description;
  double memory_budget_gb = 0;  // decimal GB (1e9 bytes)
  MeasurementProtocol protocol;
  LengthFiles length_files;  // "length_files": read, hashed and parsed with the grid
  std::vector<GridBlock> blocks;

  std::int64_t memory_budget_bytes() const;
};

// `source` names the text in messages (normally the file path).
GridSpec parse_grid(std::string_view json_text, const std::string& source);
GridSpec load_grid_file(const std::string& path);

// Split-count presets shared by the parser and the docs.
inline constexpr int kDefaultPow2MaxSplits = 128;

}  // namespace splitkv::tuner
