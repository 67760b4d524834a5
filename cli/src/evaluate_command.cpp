#include "evaluate_command.hpp"

#include "option_checks.hpp"
#include "output_paths.hpp"
#include "progress_printer.hpp"

#include <map>
#include <ostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "splitkv/heuristics/atomic_file.hpp"
#include "splitkv/heuristics/fit_pipeline.hpp"

namespace splitkv::cli {
namespace {

constexpr int kExitWriteFailed = 1;
constexpr int kExitBadInput = 2;

}  // namespace

CLI::App* add_evaluate_command(CLI::App& app, EvaluateCommandOptions& options) {
  CLI::App* evaluate = app.add_subcommand(
      "evaluate",
      "Fit the tables on a results CSV's rows of one kernel and KV cache class and report every policy's regret "
      "(policy time / fastest measured time) in sample, under cross-validation and on --validation. Exit codes: 0 done, 1 an output could "
      "not be written, 2 invalid input.");
  evaluate->add_option("results", options.results_csvs,
                       "Training results CSV, e.g. results/h200/full.csv; several CSVs of one GPU and kernel are "
                       "fitted together (a shape may be measured in only one of them)")
      ->required();
  evaluate->add_option("--validation", options.validation_csv,
                       "Results CSV of off-grid shapes (e.g. results/h200/validation.csv), evaluated with the "
                       "tables fitted on the training CSV only");
  evaluate->add_option("--out", options.out_path,
                       "Summary CSV to write, e.g. results/h200/report/regret.csv; <stem>_points.csv (every "
                       "shape and policy) and <stem>.md go next to it")
      ->required();
  evaluate->add_option("--kernel", options.kernel,
                       "Kernel whose rows to use when the CSV holds several. For a peer's kernel (fa3, flashinfer) "
                       "the table is fitted on its fixed-split rows and its policy rows (fa3_heuristic_capacity, "
                       "fa3_heuristic_maxlen, flashinfer_heuristic) are evaluated as that peer's own rule: their "
                       "time / the shape's fastest fixed-split time. The report then adds the subset "
                       "capacity_131072 (fixed lengths 1024-32768 in a 131072-token cache) and the column "
                       "ours_speedup (the policy's time / ours', geomean).");
  evaluate->add_option("--kv-dtype", options.kv_dtype,
                       "KV cache class whose rows to evaluate (and fit `ours` on): 16bit (dtype bf16 and fp16) or "
                       "fp8_e4m3. Default: the only class the kernel's ok rows hold; a CSV holding both is refused "
                       "without it. --validation is read for the same class.")
      ->check(CLI::IsMember({"16bit", "fp8_e4m3"}));
  evaluate->add_option("--num-sms", options.num_sms, "SM count, for CSVs without a sidecar naming it.")
      ->check(positive_count());
  evaluate->add_flag("--no-cross-validation", options.no_cross_validation,
                     "Skip the leave-one-context-length-out, leave-one-batch-out and leave-one-CTA-count-out refits.");
  evaluate->add_option("--table", options.table,
                       "Evaluate this table as `ours` instead of fitting one on the results CSV: a header "
                       "emitted by `splitkv fit` (e.g. heuristics/generated/num_splits_h200.hpp), or the short name "
                       "of a table compiled into this build (h200, fp8_h200), or its GPU name (\"NVIDIA H200\"), "
                       "which picks that GPU's compiled-in table for the KV cache of the rows evaluated. Nothing is "
                       "fitted, so there is no cross-validation. Refused (exit 2) when the table was made for "
                       "another GPU or SM count than the CSV's, unless --allow-other-gpu, or for another KV cache "
                       "class than the rows'.");
  evaluate->add_option("--reuse-table", options.reuse_table,
                       "With rows of another KV cache than 16bit (--kv-dtype fp8_e4m3): also score this 16-bit "
                       "table unchanged on them, as policy reused_16bit_table (its real-length lookup), in sample "
                       "and on --validation, beside `ours`, the table for their own cache; regret.md compares the "
                       "two. A header emitted by `splitkv fit` without kKvDtype (e.g. "
                       "heuristics/generated/num_splits_h200.hpp) or a compiled-in table's GPU name, as for --table. "
                       "Refused (exit 2) on 16-bit rows, for a table of another class, and for another GPU or SM "
                       "count unless --allow-other-gpu.");
  evaluate->add_flag("--allow-other-gpu", options.allow_other_gpu,
                     "With --table or --reuse-table: evaluate a table made for another GPU (or SM count) on this CSV "
                     "anyway.");
  return evaluate;
}

int run_evaluate_command(const EvaluateCommandOptions& options, std::ostream& out, std::ostream& err) {
  using namespace splitkv::heuristics;
  if (!output_path_usable(options.out_path, "evaluate", "--out", err)) return 2;
  FitRequest request;
  request.results_csv = options.results_csvs.front();
  request.more_results_csvs.assign(options.results_csvs.begin() + 1, options.results_csvs.end());
  request.validation_csv = options.validation_csv;
  request.kernel = options.kernel;
  if (!options.kv_dtype.empty()) request.kv_dtype = parse_kv_dtype_class(options.kv_dtype);
  request.num_sms = options.num_sms;
  request.cross_validate = !options.no_cross_validation;
  request.allow_other_gpu = options.allow_other_gpu;

  FitProducts products;
  try {
    if (!options.table.empty()) request.table = load_given_table(options.table);
    if (!options.reuse_table.empty()) request.reused_table = load_given_table(options.reuse_table, "--reuse-table");
    const ProgressPrinter progress(err, "evaluate");
    products = run_fit(request);
  } catch (const InputError& error) {
    err << "splitkv evaluate: " << error.what() << "\n";
    return kExitBadInput;
  }
  const std::map<std::string, std::string> files = report_files(products, options.out_path, false);
  try {
    print_written(tuner::write_files_atomically(files), out);
  } catch (const OutputError& error) {
    err << "splitkv evaluate: " << error.what() << "\n";
    return kExitWriteFailed;
  }
  out << console_summary(products);
  return 0;
}

}  // namespace splitkv::cli
