// Paged against contiguous timings of the same decode shapes, and the capacity scenario
// (a cache allocated far above the real length against one sized to it), read off one
// evaluation of the policies on measured shapes (regret_report.hpp). Nothing is modelled
// here: every time is a measured median, either the shape's fastest split count or the
// count that stands for a policy's pick under measured_time.hpp's rules (for fa2_capacity,
// the capacity chunks that overlap the real length, as in `splitkv evaluate`).
// The CSV columns are documented in heuristics/REPORTS.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "splitkv/heuristics/regret_report.hpp"

namespace splitkv::heuristics {

// Policies whose choices the layout comparison reports, in column order.
std::vector<std::string> layout_comparison_policies();    // ours, fa2_capacity, fa2_real_length
// ... and the capacity scenario: the same plus ours_capacity_only (ours when it, like FA2,
// knows only the capacity).
std::vector<std::string> capacity_scenario_policies();

// "contiguous", "paged16", ...: the column prefix of a layout.
std::string layout_label(int page_size);

// A policy's choice on one measured shape.
struct PolicyTime {
  int splits = 1;        // what the policy asked for
  int timed_splits = 1;  // the timed count whose median stands for it
  double time_us = 0;
};

// One layout of one shape: its fastest measured split count, and each policy's choice.
struct LayoutTiming {
  int page_size = 0;         // 0 = contiguous
  int best_splits = 1;       // fastest median (oracle_choice().fastest_splits)
  double best_time_us = 0;
  double best_tbps = 0;      // kv_bytes / best time, TB/s
  std::vector<PolicyTime> policies;  // in the order of the comparison's policy list
};

// ---- Paged vs contiguous -------------------------------------------------------------

struct LayoutComparisonRow {
  tuner::SweepPoint shape;  // layout, page_size and num_splits are meaningless here
  std::int64_t kv_bytes = 0;
  LayoutTiming contiguous;
  std::vector<std::optional<LayoutTiming>> paged;  // indexed like LayoutComparison::page_sizes

  // paged time / contiguous time: at each layout's best, or at `policy`'s choice on each.
  std::optional<double> best_ratio(std::size_t page_index) const;
  std::optional<double> policy_ratio(std::size_t page_index, std::size_t policy_index) const;
};

struct LayoutComparison {
  std::string gpu;
  std::string kernel;
  std::vector<int> page_sizes;        // every paged page size in the data, ascending
  std::vector<std::string> policies;  // layout_comparison_policies()
  std::vector<LayoutComparisonRow> rows;  // shapes measured contiguous and with >= 1 page size
  int paged_shapes_without_contiguous = 0;  // paged shapes left out: no contiguous twin
  int contiguous_shapes_without_paged = 0;  // contiguous shapes left out: no paged twin
};

// One row per shape (dtype, batch, heads, kv heads, head_dim, context_len, cache_capacity)
// measured both contiguous and paged. `source` names the data in errors. Throws InputError
// when the data has no contiguous shapes, no paged shapes, or no shape measured in both.
LayoutComparison compare_layouts(const Evaluation& evaluation, const std::string& gpu,
                                 const std::string& source);
std::string layout_comparison_csv(const LayoutComparison& comparison);

// ---- Capacity scenario -----------------------------------------------------------------

struct CapacityScenarioRow {
  tuner::SweepPoint shape;  // at the large capacity; num_splits is meaningless
  std::int64_t kv_bytes = 0;
  LayoutTiming sized;       // the same shape with cache_capacity = context_len
  LayoutTiming oversized;   // at shape.cache_capacity > context_len

  double capacity_cost() const;  // oversized best / sized best: what capacity alone costs
};

struct CapacityScenario {
  std::string gpu;
  std::string kernel;
  std::vector<std::string> policies;  // capacity_scenario_policies()
  std::vector<CapacityScenarioRow> rows;  // every layout, contiguous first

  std::size_t policy_index(const std::string& name) const;  // throws std::out_of_range
};

// One row per shape measured at a capacity above its real length whose twin at
// capacity = real length was measured too (same layout and page size). Throws InputError
// when no contiguous shape has such a pair (the scenario is about contiguous caches).
CapacityScenario capacity_scenario(const Evaluation& evaluation, const std::string& gpu,
                                   const std::string& source);
std::string capacity_scenario_csv(const CapacityScenario& scenario);

}  // namespace splitkv::heuristics
