// `splitkv fit`: fit the num_splits tables on a results CSV, emit the generated header and
// the regret report; with --check, verify that the committed header is what the CSV gives.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace splitkv::cli {

struct FitCommandOptions {
  std::vector<std::string> results_csvs;  // the first, then any more fitted with it
  std::string out_path;    // empty: heuristics/generated/num_splits_<gpu>.hpp
  std::string report_dir;  // empty: no report
  bool check = false;
  bool no_cross_validation = false;  // --report without the held-out refits
  std::string gpu_name;    // short name for the namespace and file; empty: from the CSV's gpu
  std::string kernel;      // empty: the file's only kernel, or "splitkv"
  std::string kv_dtype;    // 16bit or fp8_e4m3; empty: the only class of the kernel's rows
  int num_sms = 0;         // 0: from the sidecar or the known-GPU list
};

// Registers the subcommand and its flags on `app`, bound to `options`.
CLI::App* add_fit_command(CLI::App& app, FitCommandOptions& options);

// Exit codes: 0 written (or --check: up to date), 1 --check found a difference or an output
// could not be written, 2 invalid input (file, field and reason on stderr).
int run_fit_command(const FitCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
