// The ragged and capacity-scenario evaluation (heuristics/FIT.md, "Ragged batches"):
// on every shape of a sweep of kernel `splitkv` at fixed split counts (sweeps/ragged.json),
// the oracle is the best single host-side split count. Against it stand
//   host policies, timed on splitkv's rows at the count they pick: ours with the batch's max
//   length (the table at L = max), ours capacity-only, FA2 on the capacity;
//   device policies, measured as kernels of their own (sweeps/ragged_policies.json):
//   splitkv_auto, fa3_dynamic, flashinfer_plan. Their regret may fall below 1: a per-sequence
//   schedule can beat every single count.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "splitkv/heuristics/regret_report.hpp"
#include "splitkv/num_splits.hpp"
#include "splitkv/tuner/results_csv.hpp"

namespace splitkv::heuristics {

// The device-policy kernels, in report order.
const std::vector<std::string>& device_policy_kernel_names();

// One device-policy kernel's measured time per shape key (its one row per shape: the cap).
struct DeviceTimes {
  std::string kernel;
  std::map<std::string, double> time_us_by_shape;
};
// The ok rows of the device-policy kernels (a later ok row of a point wins). Kernels without
// rows are left out; InputError when none of them has any.
std::vector<DeviceTimes> device_times_from_rows(const std::vector<tuner::ResultRow>& rows, const std::string& source);
std::vector<DeviceTimes> load_device_times(const std::string& path);

// What the runtime policy (num_splits.hpp) is asked for a sweep shape: its batch, heads,
// head_dim, page size and capacity, and the max length (context_len) when `with_max_length`.
NumSplitsShape num_splits_shape(const tuner::SweepPoint& point, bool with_max_length);

// Fixed lengths in a cache larger than them: FA2's capacity scenario.
bool is_capacity_scenario(const tuner::SweepPoint& point);

// oracle, ours_host_max, ours_capacity_only, fa2_capacity; `ours` is the runtime policy (the
// compiled-in table for the GPU, else its fallback rule).
std::vector<Policy> ragged_host_policies(const NumSplitsPolicy& ours, int num_sms);

struct RaggedEvaluation {
  Evaluation host;                  // ragged_host_policies on kernel splitkv's shapes
  std::vector<DeviceTimes> device;  // may be empty (no --policies-csv)
  // Regret of device kernel k on host.shapes[i]; 0 when it was not measured there.
  double device_regret(std::size_t k, std::size_t i) const;
};
RaggedEvaluation evaluate_ragged(const std::vector<MeasuredShape>& shapes, const NumSplitsPolicy& ours, int num_sms,
                                 std::vector<DeviceTimes> device);

struct RaggedSummaryRow {
  std::string subset;  // all, capacity_scenario, ragged, or a distribution (uniform, long_tail, file:<name>)
  std::string policy;
  RegretStats stats;
};
std::vector<RaggedSummaryRow> ragged_summary(const RaggedEvaluation& evaluation);

// The two headline figures: `auto` against the host's max-length choice and FA3's device rule.
struct RaggedAcceptance {
  int capacity_shapes = 0;           // capacity-scenario shapes where splitkv_auto was measured
  double auto_within_5pct = 0;       // share of them with auto's time <= 1.05 x the best fixed count
  std::string fa2_worst_shape;       // the capacity-scenario shape where fa2_capacity's regret is largest
  double fa2_worst_regret = 0;
  double auto_speedup_at_fa2_worst = 0;  // fa2_capacity time / splitkv_auto time there; 0 = not measured
};
RaggedAcceptance ragged_acceptance(const RaggedEvaluation& evaluation);

// Per shape: the shape's fields, the oracle, then <policy>_splits,_time_us,_regret for the
// host policies and <kernel>_time_us,_regret for the device kernels (empty where unmeasured).
std::string ragged_points_csv(const RaggedEvaluation& evaluation);
std::string ragged_markdown(const RaggedEvaluation& evaluation, const std::vector<RaggedSummaryRow>& rows,
                            const RaggedAcceptance& acceptance, const std::string& provenance);

}  // namespace splitkv::heuristics
