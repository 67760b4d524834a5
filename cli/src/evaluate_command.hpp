// `splitkv evaluate`: regret of every policy (ours, the field's heuristics, fixed counts)
// on measured shapes, with cross-validation of ours and an optional off-grid validation CSV.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace splitkv::cli {

struct EvaluateCommandOptions {
  std::vector<std::string> results_csvs;  // training: the tables are fitted on them (one or more)
  std::string validation_csv;  // optional: shapes the fit never sees
  std::string out_path;        // summary CSV; <stem>_points.csv and <stem>.md go next to it
  std::string kernel;
  std::string kv_dtype;        // 16bit or fp8_e4m3; empty: the only class of the kernel's rows
  int num_sms = 0;
  bool no_cross_validation = false;
  std::string table;             // --table: a generated header path or a GPU name; empty: fit on `results_csvs`
  std::string reuse_table;       // --reuse-table: a 16-bit table scored on other rows as reused_16bit_table
  bool allow_other_gpu = false;  // --table / --reuse-table made for another GPU or SM count than the CSV's
};

CLI::App* add_evaluate_command(CLI::App& app, EvaluateCommandOptions& options);

// Exit codes: 0 written, 1 an output could not be written, 2 invalid input.
int run_evaluate_command(const EvaluateCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
