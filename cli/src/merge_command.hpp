// `splitkv merge`: join the CSVs of a sharded sweep into one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace splitkv::cli {

struct MergeCommandOptions {
  std::vector<std::string> inputs;
  std::string out_path;
};

CLI::App* add_merge_command(CLI::App& app, MergeCommandOptions& options);
int run_merge_command(const MergeCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace splitkv::cli
