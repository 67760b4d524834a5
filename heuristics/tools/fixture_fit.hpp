// The synthetic fixture both the build-time header generator and the equivalence check
// fit, so that the check can rebuild in memory exactly the table the header holds.
#pragma once

#include <string>

#include "splitkv/heuristics/header_emitter.hpp"
#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/heuristics/synthetic_results.hpp"
#include "splitkv/heuristics/table_fit.hpp"

namespace splitkv::heuristics::fixture {

inline constexpr const char* kGpuName = "Synthetic H200 model";
inline constexpr int kSmCount = 132;
inline constexpr const char* kShortName = "synthetic";

// The model's rows as `kernel`'s: a peer's (peer_kernels.hpp) header offers that peer's call site.
// With an fp8_e4m3 `kv_dtype` the rows are an e4m3 cache's, so that its header (kKvDtype, the
// fp8_ namespace) is compiled and checked like the others.
inline Measurements measurements(const std::string& kernel = "splitkv",
                                 KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit) {
  LoadOptions options;
  options.sm_count = kSmCount;
  options.kernel = kernel;
  SyntheticGrid grid = synthetic_training_grid();
  if (kv_dtype == KvDtypeClass::fp8_e4m3) grid.dtypes = {{DType::bf16, KvDtype::fp8_e4m3}};
  std::string csv = tuner::format_results_header();
  for (tuner::ResultRow row : synthetic_rows(grid, kGpuName, kSmCount)) {
    row.kernel = kernel;
    csv += tuner::format_results_row(row);
  }
  return measurements_from_text(csv, "synthetic/training.csv", options);
}

inline std::string header(const Measurements& m, const FittedHeuristic& fit, const std::string& out_path) {
  return emit_num_splits_header(
      fit, provenance_of(m, table_short_name(m.kernel, kShortName, m.kv_dtype), out_path, "fixture"));
}

}  // namespace splitkv::heuristics::fixture
