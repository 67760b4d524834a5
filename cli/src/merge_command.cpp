#include "merge_command.hpp"

#include "output_paths.hpp"

#include <filesystem>
#include <ostream>

#include "splitkv/tuner/atomic_file.hpp"
#include "splitkv/tuner/merge_results.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sidecar.hpp"

namespace splitkv::cli {

CLI::App* add_merge_command(CLI::App& app, MergeCommandOptions& options) {
  CLI::App* merge = app.add_subcommand(
      "merge",
      "Join the results CSVs of a sharded sweep (each with its sidecar) into one CSV + sidecar. "
      "Refuses shards of different GPUs, grids, protocols or kernels, a shard given twice, a torn "
      "shard and overlapping points. Exit codes: 0 merged, 1 the merged CSV could not be written, 2 invalid "
      "input (nothing written).");
  merge->add_option("shards", options.inputs, "Shard CSVs, e.g. results/h200/full.0.csv results/h200/full.1.csv")
      ->required();
  merge->add_option("--out", options.out_path, "Merged CSV to write (its folder must exist); the sidecar goes beside it")
      ->required();
  return merge;
}

int run_merge_command(const MergeCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (!output_path_usable(options.out_path, "merge", "--out", err) ||
      !output_not_special(tuner::sidecar_path_for(options.out_path), "merge", "--out's sidecar", err))
    return 2;
  if (std::filesystem::exists(options.out_path)) {
    err << "splitkv merge: --out " << options.out_path << " exists; merge into a new file\n";
    return 2;
  }
  try {
    const tuner::MergeSummary summary = tuner::merge_results(options.inputs, options.out_path);
    out << "splitkv merge: " << summary.rows << " rows from " << summary.shards << " shard(s) -> "
        << options.out_path << "\n";
    if (!summary.missing_shards.empty()) {
      out << "splitkv merge: partial: shard(s) not given:";
      for (const std::string& shard : summary.missing_shards) out << " " << shard;
      out << "\n";
    }
    return 0;
  } catch (const tuner::MergeError& error) {
    err << "splitkv merge: " << error.what() << "\n";
  } catch (const tuner::CsvError& error) {
    err << "splitkv merge: " << error.what() << "\n";
  } catch (const tuner::SidecarError& error) {
    err << "splitkv merge: " << error.what() << "\n";
  } catch (const tuner::OutputError& error) {
    err << "splitkv merge: " << error.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace splitkv::cli
