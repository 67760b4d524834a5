// What the three ways of running `splitkv sweep` share: one process (sweep_command.cpp),
// one worker process per GPU (--devices, multi_device_sweep.cpp) and a Slurm job array
// (--emit-slurm, slurm_scripts.cpp).
#pragma once

#include <atomic>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"
#include "sweep_command.hpp"

namespace splitkv::cli {

inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInterrupted = 130;

// Bad input found by the sweep command itself: exit 2 with the message.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Set by the first SIGINT/SIGTERM (install_stop_handlers); a second one kills at once.
extern std::atomic<bool> g_stop_requested;
void install_stop_handlers();
void restore_default_signals();

// The grid and flags every mode resolves before it runs anything.
struct SweepInputs {
  tuner::GridSpec grid;
  tuner::SearchMode search = tuner::SearchMode::exhaustive;
  tuner::ShardBy shard_by = tuner::ShardBy::index;
  std::vector<std::string> kernels;
};

// The output must go into an existing folder, never over the grid, and never over measured
// data without --resume; with --resume its rows and sidecar must be resumable as `shard`.
// Returns what the file already holds.
tuner::ResultsCsv check_output(const std::string& out_path, bool resume, const std::string& grid_path,
                               const tuner::ShardSpec& shard, tuner::ShardBy shard_by);

// Whether two paths name one file; paths that do not exist yet compare by their normalized form.
bool same_file(const std::string& a, const std::string& b);

// A path or value as a POSIX shell reads it back: bare when safe, else single-quoted.
std::string shell_quote(const std::string& text);

// The kernels as --kernel takes them: "a,b".
std::string joined_kernels(const std::vector<std::string>& kernels);

// The arguments after the program name of one shard's sweep, resumed into `out_csv`: what a
// --devices worker and a Slurm array task run.
std::vector<std::string> shard_sweep_arguments(const SweepCommandOptions& options, const SweepInputs& inputs,
                                               const std::string& out_csv, const std::string& shard);

// The exact command that continues this sweep (same grid, output, shard or devices, search,
// kernels), plus --resume.
std::string resume_command(const SweepCommandOptions& options, const SweepInputs& inputs);

// This executable, for the commands it writes or starts.
std::string self_executable();

int run_multi_device_sweep(const SweepCommandOptions& options, const SweepInputs& inputs, std::ostream& out,
                           std::ostream& err);
int emit_slurm_scripts(const SweepCommandOptions& options, const SweepInputs& inputs, std::ostream& out,
                       std::ostream& err);

}  // namespace splitkv::cli
