#include "sweep_command.hpp"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

#include "output_paths.hpp"
#include "splitkv/heuristics/device_policy_kernels.hpp"
#include "splitkv/tuner/atomic_file.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/plan_report.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"

namespace splitkv::cli {
namespace {

namespace fs = std::filesystem;
using namespace splitkv::tuner;

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInterrupted = 130;

std::atomic<bool> g_stop_requested{false};

// First SIGINT/SIGTERM: finish the point in flight, write the sidecar, exit. A second one
// kills at once, for a sweep stuck inside a kernel.
extern "C" void request_stop(int signal_number) {
  if (g_stop_requested.exchange(true)) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
}

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether two paths name one file; paths that do not exist yet compare by their
// normalized form.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error) && !error;
  const fs::path left = fs::weakly_canonical(a, error);
  if (error) return false;
  const fs::path right = fs::weakly_canonical(b, error);
  return !error && left == right;
}

// What a resume would refuse once the device is up, checked before it is: mixed rows in
// the CSV, an unreadable sidecar, another grid or another shard.
void check_resumable(const std::string& out_path, const ResultsCsv& contents,
                     const std::string& grid_path, const ShardSpec& shard) {
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
}

// The output must go into an existing folder, never over the grid, and never over measured
// data without --resume. Returns what the file already holds.
ResultsCsv check_output(const std::string& out_path, bool resume, const std::string& grid_path,
                        const ShardSpec& shard) {
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
  if (resume) check_resumable(out_path, contents, grid_path, shard);
  return contents;
}

std::string resume_report(const std::string& out_path, const ResultsCsv& contents,
                          const SweepPlan& plan, const std::vector<std::string>& kernels) {
  const ResumeState state = resume_state_from(contents);
  std::int64_t finished = 0;
  for (const auto& kernel : kernels) {
    for (const SweepShape& shape : plan.shapes) {
      for (int splits : shape.split_counts) {
        finished += state.finished.count(resume_key(kernel, shape.point(splits)));
      }
    }
  }
  std::string text = fmt::format("resume    {} holds {} rows; {} of the {} planned rows are done, {} left\n",
                                 out_path, contents.rows.size(), finished,
                                 plan.point_count() * std::int64_t(kernels.size()),
                                 plan.point_count() * std::int64_t(kernels.size()) - finished);
  if (contents.torn) {
    text += fmt::format("          line {} is torn ({} bytes); --resume will cut it off\n",
                        contents.torn->line, contents.torn->text.size());
  }
  return text;
}

// A path or value as a POSIX shell reads it back: bare when safe, else single-quoted.
std::string shell_quote(const std::string& text) {
  const bool safe = !text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                            "0123456789_./:,=+-@%") == std::string::npos;
  if (safe) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The exact command that continues this sweep: same grid, output, shard, search, kernels
// and device, plus --resume.
std::string resume_command(const SweepCommandOptions& options, const std::vector<std::string>& kernels) {
  std::string command = "splitkv sweep --grid " + shell_quote(options.grid_path) + " --out " +
                        shell_quote(options.out_path) + " --resume";
  if (options.shard != "0/1") command += " --shard " + shell_quote(options.shard);
  if (options.search != "exhaustive") command += " --search " + shell_quote(options.search);
  if (options.device != 0) command += " --device " + std::to_string(options.device);
  if (kernels.size() != 1 || kernels.front() != kDefaultKernelName) {
    std::string joined;
    for (const auto& name : kernels) joined += (joined.empty() ? "" : ",") + name;
    command += " --kernel " + shell_quote(joined);
  }
  return command;
}

int run(const SweepCommandOptions& options, std::ostream& out, std::ostream& err) {
  const GridSpec grid = load_grid_file(options.grid_path);
  const ShardSpec shard = parse_shard(options.shard);
  const auto search = parse_search_mode(options.search);
  if (!search) {
    throw InputError(fmt::format("--search {}: expected exhaustive or pruned", options.search));
  }
  std::vector<std::string> kernels = options.kernels;
  if (kernels.empty()) kernels.push_back(kDefaultKernelName);
  if (built_with_cuda()) {
    KernelRegistry registry;
    heuristics::register_all_kernels(registry);
    for (const auto& name : kernels) {
      if (!registry.contains(name)) registry.create(name);  // throws, naming the known kernels
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

  std::optional<ResultsCsv> existing;
  if (!options.out_path.empty()) {
    existing = check_output(options.out_path, options.resume, options.grid_path, shard);
  }

  const SweepPlan whole = expand_grid(grid);
  const SweepPlan selected = select_shard(whole, shard);

  if (options.dry_run) {
    PlanReportInput report;
    report.grid = &grid;
    report.grid_sha256 = sha256_file_hex(options.grid_path);
    report.whole = &whole;
    report.shard = &selected;
    report.shard_spec = shard;
    report.kernels = kernels;
    report.search = *search;
    out << format_plan_report(report);
    if (!options.plan_csv_path.empty()) {
      write_file_atomically(options.plan_csv_path, format_plan_csv(selected));
      out << fmt::format("plan csv  {} lines written to {}\n", selected.point_count(), options.plan_csv_path);
    }
    if (existing && has_measured_data(*existing)) {
      out << resume_report(options.out_path, *existing, selected, kernels);
    }
    return 0;
  }

  GpuSweepRequest request;
  request.grid = grid;
  request.plan = selected;
  request.shard = shard;
  request.out_csv = options.out_path;
  request.resume = options.resume;
  request.device = options.device;
  request.search = *search;
  request.kernel_names = kernels;
  request.register_more_kernels = heuristics::register_device_policy_kernels;
  request.stop_requested = &g_stop_requested;
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  const GpuSweepResult result = run_gpu_sweep(request);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
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
    err << "splitkv sweep: resume with: " << resume_command(options, kernels) << "\n";
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
