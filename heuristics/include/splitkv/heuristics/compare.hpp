// What `splitkv compare` does, minus the flags: load the results, fit our tables (through
// the fit pipeline, so `ours` is exactly what `splitkv fit` emits for the training CSV),
// evaluate the policies, and lay the measured times out as the paged-vs-contiguous and
// capacity-scenario reports (paged_vs_contiguous.hpp). Every output's bytes are computed
// before anything is written, so bad input leaves no file behind.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "splitkv/heuristics/fit_pipeline.hpp"
#include "splitkv/heuristics/paged_vs_contiguous.hpp"

namespace splitkv::heuristics {

struct CompareRequest {
  std::string results_csv;     // the shapes to compare
  std::string train_csv;       // the CSV `ours` is fitted on; empty (or the same path): results_csv
  std::string kernel;          // empty: the file's only kernel, or "splitkv"
  int num_sms = 0;             // 0: sidecar, then the known-GPU list
  bool capacity_scenario = false;
};

struct CompareProducts {
  FitProducts fit;             // loaded data, fitted tables, the evaluation the reports read
  bool separate_training = false;  // fitted on another CSV: results_csv is fit.validation
  LayoutComparison layouts;
  std::optional<CapacityScenario> capacity;  // with CompareRequest::capacity_scenario

  const Measurements& compared() const { return separate_training ? fit.validation : fit.training; }
  const Evaluation& evaluation() const;  // the policies on the compared shapes
};

// Throws InputError for bad input: everything load_measurements and run_fit refuse (a
// missing or malformed file, several GPUs in one file, a train CSV of another GPU), a file
// without contiguous or without paged rows, no shape measured in both layouts, and, with
// the capacity scenario, no contiguous shape measured at both capacities.
CompareProducts run_compare(const CompareRequest& request);

// Refuses (InputError) an output path that is one of the inputs, or both outputs at one path.
void check_compare_outputs(const CompareRequest& request, const std::string& out_path,
                           const std::string& capacity_out_path);

// Path -> bytes of the outputs: the layout comparison at `out_path`, and the capacity
// scenario at `capacity_out_path` when it was computed and the path is not empty.
std::map<std::string, std::string> compare_files(const CompareProducts& products, const std::string& out_path,
                                                 const std::string& capacity_out_path);

// What the console shows: inputs, shapes compared and left out, and the headline ratios.
std::string compare_console_summary(const CompareProducts& products);

}  // namespace splitkv::heuristics
