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
  int device = 0;
  std::string search = "exhaustive";
  std::vector<std::string> kernels;
};

// Exit codes: 0 done, 1 could not run or stopped on a device error (rows kept),
// 2 invalid input (grid, flags, output file), 130 interrupted (rows kept).
int run_sweep_command(const SweepCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
