#include "ragged_command.hpp"

#include <filesystem>
#include <ostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "option_checks.hpp"
#include "output_paths.hpp"
#include "splitkv/heuristics/atomic_file.hpp"
#include "splitkv/heuristics/ragged_report.hpp"
#include "splitkv/tuner/sha256.hpp"

namespace splitkv::cli {

CLI::App* add_ragged_command(CLI::App& app, RaggedCommandOptions& options) {
  CLI::App* command = app.add_subcommand(
      "evaluate-ragged",
      "Ragged batches and the capacity scenario: per shape, the best fixed split count of kernel "
      "splitkv (the oracle) against ours on the host (table at the max length, capacity-only), FA2 on the "
      "capacity, and the measured device-side policies splitkv_auto, fa3_dynamic, flashinfer_plan. Exit codes: 0 "
      "done, 1 an output could not be written, 2 invalid input.");
  command->add_option("results", options.results_csv,
                      "Results CSV of kernel splitkv at fixed split counts, e.g. results/h200/ragged.csv")
      ->required();
  command->add_option("--policies-csv", options.policies_csv,
                      "Results CSV of the device-policy kernels on the same shapes, e.g. "
                      "results/h200/ragged_policies.csv");
  command->add_option("--out", options.out_path,
                      "Per-shape CSV to write, e.g. results/h200/report/ragged.csv; <stem>.md goes next to it")
      ->required();
  command->add_option("--num-sms", options.num_sms, "SM count, for CSVs without a sidecar naming it.")
      ->check(positive_count());
  return command;
}

int run_ragged_command(const RaggedCommandOptions& options, std::ostream& out, std::ostream& err) {
  using namespace splitkv::heuristics;
  if (!output_path_usable(options.out_path, "evaluate-ragged", "--out", err)) return 2;
  std::string markdown_path = std::filesystem::path(options.out_path).replace_extension(".md").string();
  if (markdown_path == options.out_path) markdown_path += ".md";
  std::map<std::string, std::string> files;
  std::string summary;
  try {
    LoadOptions load;
    load.kernel = "splitkv";
    load.sm_count = options.num_sms;
    const Measurements fixed = load_measurements(options.results_csv, load);
    std::vector<DeviceTimes> device;
    std::string provenance = fmt::format("- fixed split counts: `{}` (sha256 {}), kernel `{}`, {} shapes\n",
                                         fixed.source_display, fixed.sha256.substr(0, 16), fixed.kernel,
                                         fixed.shapes.size());
    if (!options.policies_csv.empty()) {
      device = load_device_times(options.policies_csv);
      provenance += fmt::format("- device policies: `{}` (sha256 {})\n", display_path(options.policies_csv),
                                tuner::sha256_file_hex(options.policies_csv).substr(0, 16));
    }
    const NumSplitsPolicy ours =
        NumSplitsPolicy::for_device(fixed.gpu, fixed.sm_count, num_splits_kv_dtype(fixed.kv_dtype));
    provenance += fmt::format("- GPU `{}`, {} SMs; ours = {}\n", fixed.gpu, fixed.sm_count,
                              ours.table() ? fmt::format("compiled-in table `{}`", ours.table()->name)
                                           : std::string("the one-wave fallback (no table for this GPU)"));
    const RaggedEvaluation evaluation = evaluate_ragged(fixed.shapes, ours, fixed.sm_count, std::move(device));
    const std::vector<RaggedSummaryRow> rows = ragged_summary(evaluation);
    const RaggedAcceptance acceptance = ragged_acceptance(evaluation);
    files[options.out_path] = ragged_points_csv(evaluation);
    files[markdown_path] = ragged_markdown(evaluation, rows, acceptance, provenance);
    for (const RaggedSummaryRow& r : rows) {
      if (r.subset != "all" && r.subset != "capacity_scenario" && r.subset != "ragged") continue;
      summary += fmt::format("{:<18} {:<20} shapes {:>4}  geomean {:.3f}  p95 {:.3f}  max {:.3f}  within 5% {:.1f}%\n",
                             r.subset, r.policy, r.stats.shapes, r.stats.geomean, r.stats.p95, r.stats.max,
                             100 * r.stats.within_5pct);
    }
  } catch (const InputError& error) {
    err << "splitkv evaluate-ragged: " << error.what() << "\n";
    return 2;
  } catch (const std::runtime_error& error) {  // sha256 of an unreadable file
    err << "splitkv evaluate-ragged: " << error.what() << "\n";
    return 2;
  }
  try {
    print_written(tuner::write_files_atomically(files), out);
  } catch (const OutputError& error) {
    err << "splitkv evaluate-ragged: " << error.what() << "\n";
    return 1;
  }
  out << summary;
  return 0;
}

}  // namespace splitkv::cli
