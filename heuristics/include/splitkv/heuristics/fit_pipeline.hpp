// What `splitkv fit` and `splitkv evaluate` do, minus the flags: load, fit, emit, evaluate,
// and the bytes of every output file, computed before anything is written so that a
// failure half-way leaves no file behind (and --check writes nothing at all).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "splitkv/heuristics/generated_table.hpp"
#include "splitkv/heuristics/header_emitter.hpp"
#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/regret_report.hpp"
#include "splitkv/heuristics/table_fit.hpp"

namespace splitkv::heuristics {

struct FitRequest {
  std::string results_csv;
  // More training CSVs of the same GPU and kernel, fitted together with results_csv
  // (merge_measurements: no shape in two files).
  std::vector<std::string> more_results_csvs;
  std::string validation_csv;  // optional: off-grid shapes to evaluate the fitted tables on
  std::string header_path;     // empty: no header (evaluate); "default": default_header_path()
  std::string gpu_short_name;  // empty: short_gpu_name(gpu column)
  std::string kernel;          // empty: the file's only kernel, or "splitkv"
  std::optional<KvDtypeClass> kv_dtype;  // empty: the only class of the kernel's rows (LoadOptions)
  int num_sms = 0;             // 0: sidecar, then the known-GPU list
  bool cross_validate = true;
  FitOptions options;
  // Evaluate this table as `ours` / `ours_capacity_only` instead of fitting one (nothing is
  // fitted, no header, no cross-validation); one named by its GPU name is that GPU's compiled-in
  // table for the training rows' KV cache (given_table_for_rows). Refused when it was made for
  // another GPU or SM count than the training CSV's, unless allow_other_gpu.
  std::optional<GivenTable> table;
  // A 16-bit table scored unchanged on the rows of another KV cache class, beside the table fitted
  // (or given) for them: policy `reused_16bit_table`, in sample and on validation (a table not
  // fitted here has nothing to refit under cross-validation). Refused on 16-bit rows, for a table
  // of another class, and like `table` for another GPU or SM count.
  std::optional<GivenTable> reused_table;
  bool allow_other_gpu = false;  // for `table` and `reused_table`
};

struct FitProducts {
  Measurements training;
  Measurements validation;     // empty shapes without a validation CSV
  FittedHeuristic fit;
  std::string short_name;
  std::string header_path;     // empty when no header was asked for
  std::string header_text;
  std::vector<Evaluation> evaluations;       // in_sample, cv_*, validation
  std::vector<RegretSummaryRow> summary;
  ReportContext context;
};

// Throws InputError for bad inputs (the message names file, line, field and reason).
FitProducts run_fit(const FitRequest& request);

// The report files for a summary CSV at `regret_csv_path`: that file, <stem>_points.csv
// and <stem>.md next to it; plus fit.md when `with_fit_notes`. Path -> bytes, sorted.
std::map<std::string, std::string> report_files(const FitProducts& products, const std::string& regret_csv_path,
                                                bool with_fit_notes);

// The short console form of the regret summary: the "all" subset of every dataset.
std::string console_summary(const FitProducts& products);

}  // namespace splitkv::heuristics
