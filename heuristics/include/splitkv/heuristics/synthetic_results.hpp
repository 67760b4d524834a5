// Results CSVs from a simple time model of our split-KV kernel instead of a GPU: fixtures
// for the CPU tests, the generated-header compile checks and the lookup benchmark, which
// must run where no H200 (and no real results file) exists. Never written under results/:
// everything there comes from a real run.
//
// The model: a decode step costs a launch, plus waves of CTAs streaming their share of
// 64-token K/V tiles (a CTA alone cannot pull more than a fixed bandwidth; together they
// share the HBM bandwidth), plus the combine when more than one split holds work. Paged
// caches pay a little per tile; an e4m3 cache's tiles are half the bytes. It reproduces the shape of the trade-off (few CTAs want
// many splits, long sequences tolerate more), not H200 numbers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "splitkv/tuner/results_csv.hpp"

namespace splitkv::heuristics {

struct SyntheticGrid {
  std::vector<std::pair<KvLayout, int>> layouts{{KvLayout::contiguous, 0}};  // (layout, page size)
  // q/out and cache types; {bf16, fp8_e4m3} is an e4m3 cache, whose tiles hold half the bytes.
  std::vector<tuner::ElementTypes> dtypes{{DType::bf16, KvDtype::same_as_q}};
  std::vector<int> batches{1};
  std::vector<std::pair<int, int>> heads{{32, 8}};  // (num_heads, num_kv_heads)
  std::vector<int> head_dims{128};
  std::vector<int> context_lens{1024};
  std::vector<int> capacities{0};                   // 0: the context length itself
  std::vector<int> split_counts{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
};

// A grid shaped like sweeps/full.json but small enough for unit tests (a few hundred shapes).
SyntheticGrid synthetic_training_grid();
// Off-grid batches, lengths, heads and capacity, like sweeps/validation.json.
SyntheticGrid synthetic_validation_grid();

// Modelled median time of one decode step in microseconds.
double synthetic_time_us(const tuner::SweepPoint& point, int sm_count);

// One ok row per (shape, split count); split counts above the real length's tiles are
// left out, as the sweep prunes them. Deterministic, including its small "noise".
std::vector<tuner::ResultRow> synthetic_rows(const SyntheticGrid& grid, const std::string& gpu = "NVIDIA H200",
                                             int sm_count = 132);
// The same rows as results-CSV text (header included).
std::string synthetic_results_csv(const SyntheticGrid& grid, const std::string& gpu = "NVIDIA H200",
                                  int sm_count = 132);

}  // namespace splitkv::heuristics
