// The named policies the evaluation compares on the same measured shapes: the oracle, our
// fitted tables, the runtime fallback rule and the field's heuristics. A policy maps a
// measured shape to the num_splits it would launch with, and to the count whose measured
// time stands for that launch on our kernel (they differ only for FA2 with capacity, whose
// kernel wastes splits on empty capacity; see baseline_policies.hpp). A peer kernel's built-in
// rule is a policy too, measured as rows of its own (peer_kernels.hpp).
#pragma once

#include <functional>
#include <optional>
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
  // Set for a policy timed as rows of its own (a peer's built-in rule): its time on the shape, or
  // nothing where it was not measured. `pick` is then unused: the count it chose is not known.
  std::function<std::optional<double>(const MeasuredShape&)> measured_time = {};
};

// The policies that need no fit, in report order: oracle, one-wave fallback, FA2 capacity,
// FA2 real length, FA3 dynamic, FlashInfer, vLLM, fixed 1/8/16/32.
std::vector<Policy> reference_policies(int num_sms);
// `ours` (real-length table) and `ours_capacity_only` (capacity table).
std::vector<Policy> table_policies(const FittedHeuristic& fit);
// The policy rows of `kernel`'s peer, one policy per policy kernel (MeasuredShape::policy_time_us);
// none for our kernel or an unknown one.
std::vector<Policy> policy_row_policies(const std::string& kernel);
// Report order: oracle, ours, ours_capacity_only, the policy rows of `kernel`'s peer, then the
// rest of reference_policies.
std::vector<Policy> all_policies(const FittedHeuristic& fit, int num_sms, const std::string& kernel = "splitkv");
// The same with `ours` / `ours_capacity_only` given (e.g. table_policies of a table that
// was not fitted here: `splitkv evaluate --table`).
std::vector<Policy> all_policies(std::vector<Policy> table_policies, int num_sms,
                                 const std::string& kernel = "splitkv");

}  // namespace splitkv::heuristics
