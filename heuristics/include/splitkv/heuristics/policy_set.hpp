// The named policies the evaluation compares on the same measured shapes: the oracle, our
// fitted tables, the runtime fallback rule and the field's heuristics. A policy maps a
// measured shape to the num_splits it would launch with, and to the count whose measured
// time stands for that launch on our kernel (they differ only for FA2 with capacity, whose
// kernel wastes splits on empty capacity; see baseline_policies.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/table_fit.hpp"

namespace splitkv::heuristics {

struct PolicyPick {
  int splits = 1;            // what the policy returns
  int evaluated_splits = 1;  // what runs on our kernel: non-empty splits
};

struct Policy {
  std::string name;         // column prefix in the CSVs: [a-z0-9_]+
  std::string description;  // one line for the markdown report
  bool fitted = false;      // depends on the fit (re-fitted per cross-validation fold)
  std::function<PolicyPick(const MeasuredShape&)> pick;
};

// The policies that need no fit, in report order: oracle, one-wave fallback, FA2 capacity,
// FA2 real length, FA3 dynamic, FlashInfer, vLLM, fixed 1/8/16/32.
std::vector<Policy> reference_policies(int num_sms);
// `ours` (real-length table) and `ours_capacity_only` (capacity table).
std::vector<Policy> table_policies(const FittedHeuristic& fit);
// Report order: oracle, ours, ours_capacity_only, then the rest of reference_policies.
std::vector<Policy> all_policies(const FittedHeuristic& fit, int num_sms);
// The same with `ours` / `ours_capacity_only` given (e.g. table_policies of a table that
// was not fitted here: `splitkv evaluate --table`).
std::vector<Policy> all_policies(std::vector<Policy> table_policies, int num_sms);

}  // namespace splitkv::heuristics
