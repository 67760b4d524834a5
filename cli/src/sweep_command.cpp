#include "sweep_command.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "output_paths.hpp"
#include "splitkv/heuristics/device_policy_kernels.hpp"
#include "splitkv/tuner/atomic_file.hpp"
#include "splitkv/tuner/fake_gpu.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/plan_report.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"
#include "sweep_support.hpp"

namespace splitkv::cli {

namespace fs = std::filesystem;
using namespace splitkv::tuner;

std::atomic<bool> g_stop_requested{false};

namespace {

// First SIGINT/SIGTERM: finish the point in flight, write the sidecar, exit. A second one
// kills at once, for a sweep stuck inside a kernel.
extern "C" void request_stop(int signal_number) {
  if (g_stop_requested.exchange(true)) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
}

void restore_default_signals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error) && !error;
  const fs::path left = fs::weakly_canonical(a, error);
  if (error) return false;
  const fs::path right = fs::weakly_canonical(b, error);
  return !error && left == right;
}

namespace {

// What a resume would refuse once the device is up, checked before it is: mixed rows in
// the CSV, an unreadable sidecar, another grid or another shard.
void check_resumable(const std::string& out_path, const ResultsCsv& contents,
                     const std::string& grid_path, const ShardSpec& shard, ShardBy shard_by) {
  check_results_consistency(contents, out_path);
  const std::string sidecar_path = sidecar_path_for(out_path);
  std::error_code error;
  if (!fs::exists(sidecar_path, error)) return;
  const Sidecar previous = read_sidecar(sidecar_path);
  const std::string grid_sha = sha256_file_hex(grid_path);
  if (!previous.grid_sha256.empty() && previous.grid_sha256 != grid_sha) {
    throw InputError(fmt::format(
        "{}: grid.sha256: {} differs from {} ({} now): the grid changed since this CSV was "
        "started; resuming would mix grids, so write to a new --out",
        sidecar_path, previous.grid_sha256.substr(0, 12), grid_path, grid_sha.substr(0, 12)));
  }
  if (previous.shard != shard.to_string()) {
    throw InputError(fmt::format("{}: shard: this CSV holds shard {}, not {}; resume it with "
                                 "--shard {} or write to a new --out",
                                 sidecar_path, previous.shard, shard.to_string(), previous.shard));
  }
  if (shard.count > 1 && previous.shard_by != to_string(shard_by)) {
    throw InputError(fmt::format("{}: shard_by: shard {} of this CSV was dealt by {}, not {}; resume it "
                                 "with --shard-by {} or write to a new --out",
                                 sidecar_path, previous.shard, previous.shard_by, to_string(shard_by),
                                 previous.shard_by));
  }
}

}  // namespace

ResultsCsv check_output(const std::string& out_path, bool resume, const std::string& grid_path,
                        const ShardSpec& shard, ShardBy shard_by) {
  const fs::path path(out_path);
  const fs::path parent = path.parent_path();
  std::error_code error;
  if (!parent.empty() && !fs::is_directory(parent, error)) {
    if (fs::exists(parent, error)) {
      throw InputError(fmt::format("--out {}: {} is a file, not a folder", out_path, parent.string()));
    }
    throw InputError(fmt::format("--out {}: folder {} does not exist; create it first", out_path,
                                 parent.string()));
  }
  if (fs::is_directory(path, error)) {
    throw InputError(fmt::format("--out {}: is a folder; give a CSV file path", out_path));
  }
  // Reading a FIFO or a device would block or never end.
  if (const std::string kind = non_regular_file_kind(out_path); !kind.empty()) {
    throw InputError(fmt::format("--out {}: exists and is {}, not a regular file", out_path, kind));
  }
  if (const std::string sidecar_kind = non_regular_file_kind(sidecar_path_for(out_path)); !sidecar_kind.empty()) {
    throw InputError(fmt::format("--out {}: its sidecar {} exists and is {}, not a regular file", out_path,
                                 sidecar_path_for(out_path), sidecar_kind));
  }
  if (same_file(out_path, grid_path)) {
    throw InputError(fmt::format("--out {}: is the grid file; give a CSV path", out_path));
  }
  if (same_file(sidecar_path_for(out_path), grid_path)) {
    throw InputError(fmt::format("--out {}: its sidecar {} would overwrite the grid file {}; "
                                 "choose another --out",
                                 out_path, sidecar_path_for(out_path), grid_path));
  }
  ResultsCsv contents = read_results_csv(out_path);
  if (has_measured_data(contents) && !resume) {
    throw InputError(fmt::format("--out {}: already holds {} measured rows; pass --resume to "
                                 "continue that sweep, or choose another --out",
                                 out_path, contents.rows.size() + (contents.torn ? 1 : 0)));
  }
  if (resume) check_resumable(out_path, contents, grid_path, shard, shard_by);
  return contents;
}

namespace {

std::string resume_report(const std::string& out_path, const ResultsCsv& contents, const SweepPlan& plan,
                          const std::vector<std::string>& kernels, const std::vector<std::string>& own_count_kernels) {
  const ResumeState state = resume_state_from(contents);
  std::int64_t planned = 0;
  std::int64_t finished = 0;
  for (const auto& kernel : kernels) {
    const bool picks_own =
        std::find(own_count_kernels.begin(), own_count_kernels.end(), kernel) != own_count_kernels.end();
    for (const SweepShape& shape : plan.shapes) {
      for (int splits : timed_split_counts(shape, picks_own)) {
        ++planned;
        finished += state.finished.count(resume_key(kernel, shape.point(splits)));
      }
    }
  }
  std::string text = fmt::format("resume    {} holds {} rows; {} of the {} planned rows are done, {} left\n",
                                 out_path, contents.rows.size(), finished, planned, planned - finished);
  if (contents.torn) {
    text += fmt::format("          line {} is torn ({} bytes); --resume will cut it off\n",
                        contents.torn->line, contents.torn->text.size());
  }
  return text;
}

}  // namespace

std::string shell_quote(const std::string& text) {
  const bool safe = !text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                            "0123456789_./:,=+-@%") == std::string::npos;
  if (safe) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string joined_kernels(const std::vector<std::string>& kernels) {
  std::string joined;
  for (const auto& name : kernels) joined += (joined.empty() ? "" : ",") + name;
  return joined;
}

// Flags that a resume or a shard's sweep repeats when they differ from the defaults.
std::vector<std::string> repeated_flags(const SweepCommandOptions& options, const SweepInputs& inputs) {
  std::vector<std::string> flags;
  if (options.search != "exhaustive") flags.insert(flags.end(), {"--search", options.search});
  if (inputs.kernels.size() != 1 || inputs.kernels.front() != kDefaultKernelName) {
    flags.insert(flags.end(), {"--kernel", joined_kernels(inputs.kernels)});
  }
  return flags;
}

std::vector<std::string> shard_sweep_arguments(const SweepCommandOptions& options, const SweepInputs& inputs,
                                               const std::string& out_csv, const std::string& shard) {
  std::vector<std::string> args = {"sweep", "--grid", options.grid_path, "--out", out_csv, "--shard", shard,
                                   "--shard-by", std::string(to_string(inputs.shard_by)), "--resume"};
  for (std::string& flag : repeated_flags(options, inputs)) args.push_back(std::move(flag));
  return args;
}

std::string resume_command(const SweepCommandOptions& options, const SweepInputs& inputs) {
  std::string command = "splitkv sweep --grid " + shell_quote(options.grid_path) + " --out " +
                        shell_quote(options.out_path) + " --resume";
  if (!options.devices.empty()) {
    command += " --devices " + shell_quote(options.devices);
    if (inputs.shard_by != ShardBy::cost) command += " --shard-by index";
  } else {
    if (options.shard != "0/1") command += " --shard " + shell_quote(options.shard);
    if (options.shard != "0/1" && inputs.shard_by != ShardBy::index) command += " --shard-by cost";
    if (options.device != 0) command += " --device " + std::to_string(options.device);
  }
  for (const std::string& flag : repeated_flags(options, inputs)) command += " " + shell_quote(flag);
  return command;
}

std::string self_executable() {
  std::error_code error;
  const fs::path self = fs::canonical("/proc/self/exe", error);
  return error ? std::string("splitkv") : self.string();
}

namespace {

int run(const SweepCommandOptions& options, std::ostream& out, std::ostream& err) {
  SweepInputs inputs;
  inputs.grid = load_grid_file(options.grid_path);
  const GridSpec& grid = inputs.grid;
  const ShardSpec shard = parse_shard(options.shard);
  const auto search = parse_search_mode(options.search);
  if (!search) {
    throw InputError(fmt::format("--search {}: expected exhaustive or pruned", options.search));
  }
  inputs.search = *search;
  const bool several = !options.devices.empty() || !options.emit_slurm_dir.empty();
  const auto shard_by = parse_shard_by(options.shard_by.empty() ? (several ? "cost" : "index") : options.shard_by);
  if (!shard_by) throw InputError(fmt::format("--shard-by {}: expected cost or index", options.shard_by));
  inputs.shard_by = *shard_by;
  std::vector<std::string>& kernels = inputs.kernels;
  kernels = options.kernels;
  if (kernels.empty()) kernels.push_back(kDefaultKernelName);
  // Kernels whose own plan picks the split count are timed once per shape; only a build that
  // has the kernels can ask them.
  std::vector<std::string> own_count_kernels;
  if (built_with_cuda()) {
    KernelRegistry registry;
    heuristics::register_all_kernels(registry);
    for (const auto& name : kernels) {
      // Throws for an unknown name, naming the known kernels; creating one touches no device.
      if (registry.create(name)->picks_own_split_count()) own_count_kernels.push_back(name);
    }
  }
  if (options.out_path.empty() && !options.dry_run) {
    throw InputError("--out is required unless --dry-run is given");
  }
  if (options.device < 0) throw InputError(fmt::format("--device {}: must be >= 0", options.device));
  if (!options.plan_csv_path.empty()) {
    if (!options.dry_run) throw InputError("--plan-csv writes the plan of a --dry-run; add --dry-run");
    if (same_file(options.plan_csv_path, options.grid_path)) {
      throw InputError(fmt::format("--plan-csv {}: is the grid file; give a CSV path", options.plan_csv_path));
    }
    if (!output_path_usable(options.plan_csv_path, "sweep", "--plan-csv", err)) return kExitBadInput;
  }
  if (several) {
    const char* mode = options.devices.empty() ? "--emit-slurm" : "--devices";
    if (!options.devices.empty() && !options.emit_slurm_dir.empty()) {
      throw InputError("--devices and --emit-slurm: choose one (a Slurm array task runs on the GPU Slurm gives it)");
    }
    if (options.shard != "0/1") throw InputError(fmt::format("{} deals the grid into its own shards; drop --shard", mode));
    if (options.device_given) throw InputError(fmt::format("{} picks the devices; drop --device", mode));
    if (!options.plan_csv_path.empty()) throw InputError(fmt::format("--plan-csv plans one shard; drop {}", mode));
    if (!options.devices.empty()) return run_multi_device_sweep(options, inputs, out, err);
    return emit_slurm_scripts(options, inputs, out, err);
  }
  if (options.slurm_shards != 0) throw InputError("--shards is the shard count of --emit-slurm; add --emit-slurm DIR");

  std::optional<ResultsCsv> existing;
  if (!options.out_path.empty()) {
    existing = check_output(options.out_path, options.resume, options.grid_path, shard, inputs.shard_by);
  }

  const SweepPlan whole = expand_grid(grid);
  const SweepPlan selected = select_shard(grid, whole, shard, inputs.shard_by);

  if (options.dry_run) {
    PlanReportInput report;
    report.grid = &grid;
    report.grid_sha256 = sha256_file_hex(options.grid_path);
    report.whole = &whole;
    report.shard = &selected;
    report.shard_spec = shard;
    report.shard_by = inputs.shard_by;
    report.kernels = kernels;
    report.own_count_kernels = own_count_kernels;
    report.search = *search;
    out << format_plan_report(report);
    if (!options.plan_csv_path.empty()) {
      write_file_atomically(options.plan_csv_path, format_plan_csv(selected));
      out << fmt::format("plan csv  {} lines written to {}\n", selected.point_count(), options.plan_csv_path);
    }
    if (existing && has_measured_data(*existing)) {
      out << resume_report(options.out_path, *existing, selected, kernels, own_count_kernels);
    }
    return 0;
  }

  GpuSweepRequest request;
  request.grid = grid;
  request.plan = selected;
  request.shard = shard;
  request.shard_by = inputs.shard_by;
  request.out_csv = options.out_path;
  request.resume = options.resume;
  request.device = options.device;
  request.search = *search;
  request.kernel_names = kernels;
  request.register_more_kernels = heuristics::register_device_policy_kernels;
  request.stop_requested = &g_stop_requested;
  install_stop_handlers();
  const GpuSweepResult result = run_sweep_on_device(request);
  restore_default_signals();
  if (!result.started) {
    err << "splitkv sweep: " << result.error << "\n";
    return kExitFailed;
  }
  const SweepSummary& summary = result.summary;
  err << fmt::format("splitkv sweep: {}: {} rows written ({} ok, {} failed), {} already done, "
                     "{} skipped by the pruned search, in {}\n",
                     to_string(summary.stop), summary.rows_written, summary.ok, summary.failed,
                     summary.already_done, summary.search_skipped, format_duration(summary.elapsed_s));
  if (!summary.message.empty()) err << "splitkv sweep: " << summary.message << "\n";
  if (summary.stop != StopReason::complete) {
    err << "splitkv sweep: resume with: " << resume_command(options, inputs) << "\n";
  }
  switch (summary.stop) {
    case StopReason::complete:
      return 0;
    case StopReason::interrupted:
      return kExitInterrupted;
    case StopReason::aborted:
      return kExitFailed;
  }
  return kExitFailed;
}

}  // namespace

int run_sweep_command(const SweepCommandOptions& options, std::ostream& out, std::ostream& err) {
  try {
    return run(options, out, err);
  } catch (const GridError& error) {
    err << "splitkv sweep: " << error.what() << "\n";
  } catch (const ShardError& error) {
    err << "splitkv sweep: " << error.what() << "\n";
  } catch (const CsvError& error) {
    err << "splitkv sweep: " << error.what() << "\n";
  } catch (const SidecarError& error) {
    err << "splitkv sweep: " << error.what() << "\n";
  } catch (const SweepError& error) {
    err << "splitkv sweep: " << error.what() << "\n";
  } catch (const InputError& error) {
    err << "splitkv sweep: " << error.what() << "\n";
  } catch (const std::invalid_argument& error) {
    err << "splitkv sweep: --kernel: " << error.what() << "\n";
  } catch (const std::exception& error) {
    // Not an input problem we know how to name (an I/O failure, out of memory): say so and
    // exit 1 rather than let std::terminate abort with a core dump.
    err << "splitkv sweep: error: " << error.what() << "\n";
    return kExitFailed;
  }
  return kExitBadInput;
}

}  // namespace splitkv::cli
