#include "compare_command.hpp"

#include "option_checks.hpp"
#include "output_paths.hpp"

#include <exception>
#include <ostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "splitkv/heuristics/atomic_file.hpp"

namespace splitkv::cli {

CLI::App* add_compare_command(CLI::App& app, CompareCommandOptions& options) {
  CLI::App* compare = app.add_subcommand(
      "compare",
      "Compare paged with contiguous timings of the same shapes (each layout's best split count, and the "
      "choices of ours, fa2_capacity and fa2_real_length on each), and optionally the capacity scenario. "
      "Columns: heuristics/REPORTS.md. Exit codes: 0 done, 1 an output could not be written, 2 invalid input.");
  compare->add_option("results", options.request.results_csv, "Results CSV with contiguous and paged rows, e.g. "
                                                      "results/h200/full.csv")
      ->required();
  compare->add_option("--out", options.out_path,
                      "CSV to write: one row per shape, e.g. results/h200/paged_vs_contiguous.csv")
      ->required();
  compare->add_option("--capacity-out", options.capacity_out_path,
                      "Also write the capacity scenario: shapes measured at a capacity above the real length "
                      "against capacity = real length, e.g. results/h200/capacity_scenario.csv");
  compare->add_option("--train", options.request.train_csv,
                      "Fit `ours` on this results CSV (same GPU) instead of the compared one");
  compare->add_option("--kernel", options.request.kernel, "Kernel whose rows to use when the CSV holds several.");
  compare->add_option("--num-sms", options.request.num_sms, "SM count, for CSVs without a sidecar naming it.")
      ->check(positive_count());
  return compare;
}

int run_compare_command(const CompareCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (!output_path_usable(options.out_path, "compare", "--out", err) ||
      !output_path_usable(options.capacity_out_path, "compare", "--capacity-out", err))
    return 2;
  using namespace splitkv::heuristics;
  CompareRequest request = options.request;
  request.capacity_scenario = !options.capacity_out_path.empty();
  const auto fail = [&err](const std::exception& error, int code) {
    err << "splitkv compare: " << error.what() << "\n";
    return code;
  };
  // Everything is computed before the first byte is written, so bad input leaves no file.
  try {
    check_compare_outputs(request, options.out_path, options.capacity_out_path);
    const CompareProducts products = run_compare(request);
    const auto files = compare_files(products, options.out_path, options.capacity_out_path);
    print_written(tuner::write_files_atomically(files), out);
    out << compare_console_summary(products);
    return 0;
  } catch (const InputError& error) {
    return fail(error, 2);
  } catch (const OutputError& error) {
    return fail(error, 1);
  }
}

}  // namespace splitkv::cli
