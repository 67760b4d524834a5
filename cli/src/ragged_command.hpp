// `splitkv evaluate-ragged`: the ragged and capacity-scenario evaluation
// (heuristics/ragged_report.hpp; heuristics/FIT.md, "Ragged batches").
#pragma once

#include <iosfwd>
#include <string>

namespace CLI {
class App;
}

namespace splitkv::cli {

struct RaggedCommandOptions {
  std::string results_csv;   // kernel splitkv at fixed split counts (sweeps/ragged.json)
  std::string policies_csv;  // optional: the device-policy kernels (sweeps/ragged_policies.json)
  std::string out_path;      // per-shape CSV; <stem>.md goes next to it
  int num_sms = 0;
};

CLI::App* add_ragged_command(CLI::App& app, RaggedCommandOptions& options);

// Exit codes: 0 written, 1 an output could not be written, 2 invalid input.
int run_ragged_command(const RaggedCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
