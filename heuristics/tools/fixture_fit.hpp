// The synthetic fixture both the build-time header generator and the equivalence check
// fit, so that the check can rebuild in memory exactly the table the header holds.
#pragma once

#include <string>

#include "splitkv/heuristics/header_emitter.hpp"
#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/synthetic_results.hpp"
#include "splitkv/heuristics/table_fit.hpp"

namespace splitkv::heuristics::fixture {

inline constexpr const char* kGpuName = "Synthetic H200 model";
inline constexpr int kSmCount = 132;
inline constexpr const char* kShortName = "synthetic";

inline Measurements measurements() {
  LoadOptions options;
  options.sm_count = kSmCount;
  return measurements_from_text(synthetic_results_csv(synthetic_training_grid(), kGpuName, kSmCount),
                                "synthetic/training.csv", options);
}

inline std::string header(const Measurements& m, const FittedHeuristic& fit, const std::string& out_path) {
  return emit_num_splits_header(fit, provenance_of(m, kShortName, out_path, "fixture"));
}

}  // namespace splitkv::heuristics::fixture
