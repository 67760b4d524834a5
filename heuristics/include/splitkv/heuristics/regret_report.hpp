// Regret of every policy on measured shapes: policy time / fastest measured time, per
// shape, summarised as geomean, p95, max and the share within 5%. Also the cross-validation
// of the fitted tables (refit without a group of shapes, evaluate on that group), and the
// CSV and markdown forms of it all (heuristics/FIT.md, "Evaluation").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "splitkv/heuristics/measured_time.hpp"
#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/oracle.hpp"
#include "splitkv/heuristics/policy_set.hpp"
#include "splitkv/heuristics/table_fit.hpp"

namespace splitkv::heuristics {

struct PolicyOutcome {
  bool evaluated = false;  // false: this policy was not run on this dataset (CV rows)
  PolicyPick pick;
  MeasuredTime measured;   // the time standing for the pick (see measured_time.hpp)
  double regret = 0;       // measured.time_us / oracle.fastest_time_us, >= 1
};

struct ShapeResult {
  MeasuredShape shape;
  OracleChoice oracle;
  std::vector<PolicyOutcome> outcomes;  // indexed like Evaluation::policies
};

struct Evaluation {
  std::string dataset;                // in_sample, validation, cv_leave_one_<key>_out
  std::vector<std::string> policies;  // names, report order
  std::vector<std::string> descriptions;
  std::vector<ShapeResult> shapes;
};

Evaluation evaluate_policies(const std::string& dataset, const std::vector<MeasuredShape>& shapes,
                             const std::vector<Policy>& policies);

// A cross-validation scheme: shapes sharing a fold key are held out together.
struct CrossValidationScheme {
  std::string name;  // "context_len" or "batch": dataset becomes cv_leave_one_<name>_out
  std::function<int(const MeasuredShape&)> fold_key;
};
std::vector<CrossValidationScheme> default_cross_validation_schemes();

// For each fold: fit on the other shapes, evaluate the fitted policies (ours,
// ours_capacity_only) on the held-out ones. Every other policy is left unevaluated.
// `more_tables` are the policies the other evaluations list after those two (a reused table),
// so that every evaluation lists the same policies; they are unevaluated here too.
// Returns nothing when the scheme has fewer than two folds.
std::optional<Evaluation> cross_validate(const std::vector<MeasuredShape>& shapes,
                                         const CrossValidationScheme& scheme, int num_sms,
                                         const FitOptions& options = {},
                                         const std::vector<Policy>& more_tables = {});

struct RegretStats {
  int shapes = 0;
  double geomean = 0;
  double p95 = 0;            // nearest rank: the ceil(0.95 n)-th smallest
  double max = 0;
  double within_5pct = 0;    // share of shapes with regret <= 1.05
  double exact_share = 0;    // share whose pick was timed exactly (else same_partition/nearest)
  // Geomean over the same shapes, where `ours` was evaluated too, of this policy's time / ours'
  // time: how much faster our table is (0: ours not evaluated there). Reported for peer kernels.
  double ours_speedup = 0;
};
RegretStats regret_stats(const std::vector<double>& regrets, int exact = -1);

// Shape subsets the summary reports besides "all".
struct ShapeSubset {
  std::string name;
  std::string description;
  std::function<bool(const MeasuredShape&)> contains;
};
std::vector<ShapeSubset> default_subsets();
// The capacity scenario as a peer's rows measure it: fixed lengths 1024..32768 in a
// 131072-token cache, where a rule that reads the capacity sees 4 to 128 times the real length.
ShapeSubset capacity_scenario_subset();
// What a report of `kernel`'s rows summarises: default_subsets(), and for a peer kernel
// (peer_kernels.hpp) the capacity scenario too.
std::vector<ShapeSubset> report_subsets(const std::string& kernel);

struct RegretSummaryRow {
  std::string dataset;
  std::string subset;
  std::string policy;
  RegretStats stats;
};
std::vector<RegretSummaryRow> summarize(const Evaluation& evaluation,
                                        const std::vector<ShapeSubset>& subsets = default_subsets());

// regret.csv: one row per (dataset, subset, policy), long format; `with_speedup` (a peer
// kernel's report) adds the column ours_speedup.
std::string regret_summary_csv(const std::vector<RegretSummaryRow>& rows, bool with_speedup = false);
// regret_points.csv: one row per (dataset, shape), a column group per policy.
std::string regret_points_csv(const std::vector<Evaluation>& evaluations);
// The summary as markdown tables, with what the numbers mean; for a peer kernel (context.kernel)
// with the ours_speedup column and a section on the peer's own rule against our table.
struct ReportContext {
  std::string gpu;
  int sm_count = 0;
  std::string training_input;     // display path and sha256 of the fit's CSV
  std::string training_sha256;
  std::string validation_input;   // empty without --validation
  std::string validation_sha256;
  std::string kernel;
  KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit;
};
std::string regret_markdown(const std::vector<Evaluation>& evaluations,
                            const std::vector<RegretSummaryRow>& rows, const ReportContext& context);
// How the fit went: classes, the data's decisions, row counts, per-table cell coverage.
std::string fit_markdown(const FittedHeuristic& fit, const Measurements& measurements);

}  // namespace splitkv::heuristics
