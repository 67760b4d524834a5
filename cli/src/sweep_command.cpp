#include "sweep_command.hpp"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>

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

// The output must go into an existing folder, and never over measured data without
// --resume. Returns what the file already holds.
ResultsCsv check_output(const std::string& out_path, bool resume) {
  const fs::path path(out_path);
  const fs::path parent = path.parent_path();
  std::error_code error;
  if (!parent.empty() && !fs::is_directory(parent, error)) {
    throw InputError(fmt::format("--out {}: folder {} does not exist; create it first", out_path,
                                 parent.string()));
  }
  if (fs::is_directory(path, error)) {
    throw InputError(fmt::format("--out {}: is a folder; give a CSV file path", out_path));
  }
  ResultsCsv contents = read_results_csv(out_path);
  if (has_measured_data(contents) && !resume) {
    throw InputError(fmt::format("--out {}: already holds {} measured rows; pass --resume to "
                                 "continue that sweep, or choose another --out",
                                 out_path, contents.rows.size() + (contents.torn ? 1 : 0)));
  }
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
    register_gpu_kernels(registry);
    for (const auto& name : kernels) {
      if (!registry.contains(name)) registry.create(name);  // throws, naming the known kernels
    }
  }
  if (options.out_path.empty() && !options.dry_run) {
    throw InputError("--out is required unless --dry-run is given");
  }
  if (options.device < 0) throw InputError(fmt::format("--device {}: must be >= 0", options.device));

  std::optional<ResultsCsv> existing;
  if (!options.out_path.empty()) existing = check_output(options.out_path, options.resume);

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
  }
  return kExitBadInput;
}

}  // namespace splitkv::cli
