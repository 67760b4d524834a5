// `splitkv sweep`: plan a grid (always) and time it (when not --dry-run and CUDA exists).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace splitkv::cli {

struct SweepCommandOptions {
  std::string grid_path;
  std::string out_path;
  bool resume = false;
  bool dry_run = false;
  std::string plan_csv_path;  // with dry_run: where the planned points go as CSV
  std::string shard = "0/1";
  std::string shard_by;       // cost | index; empty: index, or cost with --devices and --emit-slurm
  int device = 0;
  bool device_given = false;  // --device was on the command line
  std::string search = "exhaustive";
  std::vector<std::string> kernels;
  std::string devices;        // --devices: "all" or "0,1,..."; empty: one process on --device
  int worker_retries = 3;     // --devices: restarts of a worker that dies, each
  std::string emit_slurm_dir; // --emit-slurm: write the Slurm scripts here instead of sweeping
  int slurm_shards = 0;       // --shards: array tasks of --emit-slurm
  std::string slurm_gres = "gpu:1";  // --slurm-gres: what each array task asks for; "none" for nothing
};

// Exit codes: 0 done, 1 could not run or stopped on a device error (rows kept),
// 2 invalid input (grid, flags, output file), 130 interrupted (rows kept).
int run_sweep_command(const SweepCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
