#include "splitkv/heuristics/synthetic_results.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "splitkv/split_partition.hpp"

namespace splitkv::heuristics {
namespace {

constexpr double kBandwidthBytesPerUs = 4.4e6;       // 4.4 TB/s
constexpr double kCtaBandwidthBytesPerUs = 4.0e4;    // 40 GB/s: one CTA's own ceiling
constexpr double kLaunchUs = 3.5;
constexpr double kCombineLaunchUs = 1.2;

// FNV-1a of the point key: deterministic pseudo-noise in [0, 1).
double unit_hash(const std::string& text, std::uint64_t salt) {
  std::uint64_t h = 1469598103934665603ULL ^ salt;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return double(h >> 11) / double(1ULL << 53);
}

}  // namespace

SyntheticGrid synthetic_training_grid() {
  SyntheticGrid g;
  g.layouts = {{KvLayout::contiguous, 0}, {KvLayout::paged, 16}, {KvLayout::paged, 64}};
  g.batches = {1, 2, 4, 8, 16, 32, 64, 128};
  g.heads = {{32, 32}, {32, 8}, {32, 4}};
  g.head_dims = {64, 128, 256};
  g.context_lens = {128, 512, 2048, 8192, 32768, 131072};
  g.capacities = {0, 131072};
  return g;
}

SyntheticGrid synthetic_validation_grid() {
  SyntheticGrid g;
  g.layouts = {{KvLayout::contiguous, 0}, {KvLayout::paged, 16}};
  g.batches = {3, 12, 48, 96};
  g.heads = {{40, 8}, {28, 4}, {48, 48}};
  g.head_dims = {128};
  g.context_lens = {1500, 6000, 20000, 50000};
  g.capacities = {0, 100000};
  return g;
}

double synthetic_time_us(const tuner::SweepPoint& p, int sm_count) {
  const int slots = sm_count * (p.head_dim <= 128 ? 2 : 1);
  const int tiles = ceil_div(p.context_len, kTokensPerTile);
  const int splits = std::max(1, active_splits(p.context_len, p.num_splits));
  const int tiles_per_split = ceil_div(tiles, splits);
  const std::int64_t ctas = std::int64_t(p.batch) * p.num_kv_heads * splits;
  const double tile_bytes = double(kTokensPerTile) * p.head_dim * 2 /*K and V*/ * p.kv_element_bytes();
  double page_factor = 1.0, page_latency_us = 0.0;
  if (p.layout == KvLayout::paged) {
    page_factor = p.page_size <= 16 ? 1.03 : 1.01;
    page_latency_us = 0.05;
  }
  const auto tile_time = [&](std::int64_t resident) {
    const double shared = tile_bytes * double(resident) / kBandwidthBytesPerUs;
    const double alone = tile_bytes / kCtaBandwidthBytesPerUs;
    return std::max(shared, alone) * page_factor + page_latency_us;
  };
  const std::int64_t full_waves = ctas / slots, rest = ctas % slots;
  double kv_us = double(full_waves) * tiles_per_split * tile_time(slots);
  if (rest > 0) kv_us += tiles_per_split * tile_time(rest);
  double combine_us = 0;
  if (splits > 1) {
    const double partial_bytes = double(p.batch) * p.num_heads * splits * (p.head_dim + 1) * 4.0 * 2.0;
    combine_us = kCombineLaunchUs + partial_bytes / kBandwidthBytesPerUs;
  }
  return kLaunchUs + kv_us + combine_us;
}

std::vector<tuner::ResultRow> synthetic_rows(const SyntheticGrid& g, const std::string& gpu, int sm_count) {
  std::vector<tuner::ResultRow> rows;
  for (const auto& [layout, page_size] : g.layouts) {
    for (const tuner::ElementTypes& types : g.dtypes) {
      for (const auto& [heads, kv_heads] : g.heads) {
        for (int head_dim : g.head_dims) {
          for (int batch : g.batches) {
            for (int context_len : g.context_lens) {
              for (int capacity_spec : g.capacities) {
                const int capacity = capacity_spec == 0 ? context_len : capacity_spec;
                if (capacity < context_len) continue;
                if (capacity_spec != 0 && capacity == context_len) continue;  // same shape as "x1"
                for (int splits : g.split_counts) {
                  tuner::SweepPoint p;
                  p.layout = layout;
                  p.page_size = page_size;
                  p.dtype = types.dtype;
                  p.kv_dtype = types.kv_dtype;
                  p.batch = batch;
                  p.num_heads = heads;
                  p.num_kv_heads = kv_heads;
                  p.head_dim = head_dim;
                  p.context_len = context_len;
                  p.cache_capacity = capacity;
                  p.num_splits = splits;
                  if (splits > 1 && splits > p.kv_tiles()) continue;  // the sweep prunes these
                  const std::string key = p.key();
                  tuner::ResultRow row;
                  row.gpu = gpu;
                  row.kernel = "splitkv";
                  row.point = p;
                  const double noise = 1.0 + 0.006 * (unit_hash(key, 1) - 0.5);
                  const double median = synthetic_time_us(p, sm_count) * noise;
                  // Round to what a CSV would hold: 4 significant decimals of a microsecond.
                  row.time_us_median = std::round(median * 1e4) / 1e4;
                  row.time_us_p10 = std::round(median * 0.995 * 1e4) / 1e4;
                  row.time_us_p90 = std::round(median * 1.006 * 1e4) / 1e4;
                  row.cv = std::round((0.002 + 0.003 * unit_hash(key, 2)) * 1e6) / 1e6;
                  row.repetitions = 10;
                  row.kv_bytes = p.kv_bytes();
                  row.tbps = tuner::achieved_tbps(row.kv_bytes, row.time_us_median);
                  rows.push_back(std::move(row));
                }
              }
            }
          }
        }
      }
    }
  }
  return rows;
}

std::string synthetic_results_csv(const SyntheticGrid& grid, const std::string& gpu, int sm_count) {
  std::string text = tuner::format_results_header();
  for (const tuner::ResultRow& row : synthetic_rows(grid, gpu, sm_count)) text += tuner::format_results_row(row);
  return text;
}

}  // namespace splitkv::heuristics
