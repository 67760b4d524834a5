// `splitkv compare`: paged against contiguous timings of the same shapes (best split count
// of each layout, and each policy's choice on each), and with --capacity-out the capacity
// scenario (a cache allocated above the real length against one sized to it).
// Columns: heuristics/REPORTS.md.
#pragma once

#include <iosfwd>
#include <string>

#include "splitkv/heuristics/compare.hpp"

namespace CLI {
class App;
}

namespace splitkv::cli {

struct CompareCommandOptions {
  heuristics::CompareRequest request;  // the flags fill it; capacity_scenario follows --capacity-out
  std::string out_path;                // paged_vs_contiguous.csv
  std::string capacity_out_path;       // optional: capacity_scenario.csv
};

CLI::App* add_compare_command(CLI::App& app, CompareCommandOptions& options);

// Exit codes: 0 written, 1 an output could not be written, 2 invalid input (nothing written).
int run_compare_command(const CompareCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
