// splitkv: measure split-KV decode attention on a GPU and turn the measurements into a
// num_splits heuristic. This file only wires flags to commands.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "compare_command.hpp"
#include "devices_command.hpp"
#include "escaping_streambuf.hpp"
#include "evaluate_command.hpp"
#include "fit_command.hpp"
#include "merge_command.hpp"
#include "option_checks.hpp"
#include "ragged_command.hpp"
#include "splitkv/heuristics/device_policy_kernels.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "sweep_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"splitkv: sweep split-KV (Flash-Decoding) decode attention kernels over shapes "
               "and split counts, and record the timings.",
               "splitkv"};
  app.set_version_flag("--version", splitkv::tuner::tool_version());
  app.require_subcommand(1);

  splitkv::cli::SweepCommandOptions sweep_options;
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Time every point of a grid file and append one CSV row per point (plus a JSON sidecar "
      "next to it). Exit codes: 0 done, 1 could not run or stopped on a device error, "
      "2 invalid input, 130 interrupted (rows so far are kept; rerun with --resume).");
  sweep->add_option("--grid", sweep_options.grid_path,
                    "Grid JSON file (schema: tuner/GRID_SCHEMA.md), e.g. sweeps/quick.json")
      ->required();
  sweep->add_option("--out", sweep_options.out_path,
                    "Results CSV to append to (schema: tuner/CSV_SCHEMA.md); its folder must "
                    "exist. The sidecar goes next to it with a .json extension. Required unless "
                    "--dry-run.");
  sweep->add_flag("--resume", sweep_options.resume,
                  "Continue a sweep into an --out that already holds rows: points already "
                  "measured (or failed for good) are skipped and a torn last line is cut off. "
                  "Without it a non-empty --out is refused.");
  sweep->add_flag("--dry-run", sweep_options.dry_run,
                  "Expand, prune and shard the grid and print what would run (point counts, "
                  "pruning by reason, bytes, rough time, first and last point); time nothing.");
  sweep->add_option("--plan-csv", sweep_options.plan_csv_path,
                    "With --dry-run: also write the planned points of the shard to this CSV, one line "
                    "per (shape, num_splits) with the results CSV's key columns, byte counts and the "
                    "batch's real lengths, for drivers that time a kernel outside this binary "
                    "(scripts/fa3_sweep.py).");
  sweep->add_option("--shard", sweep_options.shard,
                    "Run only shard i of N (i/N, 0 <= i < N): all split counts of a shape go to the "
                    "same shard, and the shapes are dealt as --shard-by says. Default 0/1 (everything).");
  sweep->add_option("--shard-by", sweep_options.shard_by,
                    "How shapes are dealt to shards. index: round-robin by position in the grid. cost: "
                    "dearest first, each to the shard with the least estimated time so far (the --dry-run "
                    "estimate, the same on every machine), so shards take about as long. Default index "
                    "for --shard, cost for --devices and --emit-slurm; a resume must use the same.")
      ->check(CLI::IsMember({"cost", "index"}));
  sweep->add_option("--device", sweep_options.device, "CUDA device ordinal to time on. Default 0.");
  sweep->add_option("--devices", sweep_options.devices,
                    "Sweep on several GPUs of this machine: all, or indices as `splitkv devices` numbers "
                    "them (0,1,...). One worker process per entry, started with CUDA_VISIBLE_DEVICES=<index> "
                    "on its own shard (--shard-by, default cost) into <out stem>.shards/shard<i>.csv with a "
                    "log beside it; one progress line and ETA for all; a worker that dies is restarted "
                    "with --resume (--worker-retries); when all are done their CSVs are merged into --out "
                    "(as `splitkv merge` does). --resume continues every worker. The GPUs must be one "
                    "model. An index may repeat: --devices 0,0 runs two workers that share GPU 0, which "
                    "tests the machinery on one GPU but lets each disturb the other's timings.");
  sweep->add_option("--worker-retries", sweep_options.worker_retries,
                    "With --devices: how often a worker that dies (a crash, a kill, a lost GPU context) "
                    "is restarted with --resume before the sweep gives up on it. Default 3.");
  sweep->add_option("--emit-slurm", sweep_options.emit_slurm_dir,
                    "Write a Slurm job array into this folder instead of sweeping: sweep_array.sh (one "
                    "task per shard, each `splitkv sweep --shard i/N --resume` into DIR/shard<i>.csv, "
                    "logs in DIR/logs), merge.sh (merges them into --out once the array is done, afterok), "
                    "submit.sh (submits both) and resume.sh (resubmits only the shards not complete, then "
                    "the merge). Needs --shards. SPLITKV_SBATCH_ARGS adds sbatch arguments to every job.");
  sweep->add_option("--shards", sweep_options.slurm_shards, "With --emit-slurm: the number of array tasks (shards).")
      ->check(splitkv::cli::positive_count());
  sweep->add_option("--slurm-gres", sweep_options.slurm_gres,
                    "With --emit-slurm: the --gres each array task asks for. Default gpu:1; none asks for "
                    "nothing (CPU-only partitions).");
  sweep->add_option("--search", sweep_options.search,
                    "exhaustive: time every planned split count. pruned: per shape, walk the "
                    "split counts upwards and stop once three in a row are slower than the best.")
      ->check(CLI::IsMember({"exhaustive", "pruned"}));
  std::string registered;
  {
    splitkv::tuner::KernelRegistry registry;
    splitkv::heuristics::register_all_kernels(registry);
    for (const std::string& name : registry.names()) registered += (registered.empty() ? "" : ", ") + name;
  }
  sweep->add_option("--kernel", sweep_options.kernels,
                    "Registered kernel(s) to time; repeat the flag or separate with commas to "
                    "measure several in one sweep. Default: splitkv. Registered in this build: " +
                        (registered.empty() ? std::string("none (no CUDA)") : registered) + ".")
      ->delimiter(',');

  CLI::App* devices =
      app.add_subcommand("devices", "Print the facts a sweep records about each visible GPU.");

  splitkv::cli::FitCommandOptions fit_options;
  CLI::App* fit = splitkv::cli::add_fit_command(app, fit_options);
  splitkv::cli::EvaluateCommandOptions evaluate_options;
  CLI::App* evaluate = splitkv::cli::add_evaluate_command(app, evaluate_options);
  splitkv::cli::MergeCommandOptions merge_options;
  CLI::App* merge = splitkv::cli::add_merge_command(app, merge_options);
  splitkv::cli::CompareCommandOptions compare_options;
  CLI::App* compare = splitkv::cli::add_compare_command(app, compare_options);
  splitkv::cli::RaggedCommandOptions ragged_options;
  CLI::App* ragged = splitkv::cli::add_ragged_command(app, ragged_options);

  splitkv::cli::EscapingStreambuf out_buffer(std::cout.rdbuf());
  splitkv::cli::EscapingStreambuf err_buffer(std::cerr.rdbuf());
  std::ostream out(&out_buffer);
  std::ostream err(&err_buffer);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& error) {
    return app.exit(error);
  } catch (const CLI::CallForAllHelp& error) {
    return app.exit(error);
  } catch (const CLI::CallForVersion& error) {
    return app.exit(error);
  } catch (const CLI::ParseError& error) {
    std::string commands;
    for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + command->get_name();
    }
    // A word where the subcommand goes is left over, not parsed: CLI11 then only misses a subcommand.
    const std::vector<CLI::App*> parsed = app.get_subcommands();
    const std::vector<std::string> left_over = app.remaining();
    if (parsed.empty() && !left_over.empty()) {
      const bool option = left_over.front().rfind('-', 0) == 0;
      err << "splitkv: unknown " << (option ? "option" : "subcommand") << " \"" << left_over.front()
          << "\"; the subcommands are " << commands << " (see splitkv --help)\n";
      return 2;
    }
    const std::string help = parsed.empty() ? "splitkv --help" : "splitkv " + parsed.front()->get_name() + " --help";
    err << "splitkv: " << error.what();
    if (parsed.empty() && left_over.empty()) err << "; one of " << commands;
    err << " (see " << help << ")\n";
    return 2;
  }

  if (sweep->parsed()) {
    sweep_options.device_given = sweep->count("--device") > 0;
    return splitkv::cli::run_sweep_command(sweep_options, out, err);
  }
  if (devices->parsed()) return splitkv::cli::run_devices_command(out, err);
  if (fit->parsed()) return splitkv::cli::run_fit_command(fit_options, out, err);
  if (merge->parsed()) return splitkv::cli::run_merge_command(merge_options, out, err);
  if (evaluate->parsed()) return splitkv::cli::run_evaluate_command(evaluate_options, out, err);
  if (compare->parsed()) return splitkv::cli::run_compare_command(compare_options, out, err);
  if (ragged->parsed()) return splitkv::cli::run_ragged_command(ragged_options, out, err);
  return 2;
}
