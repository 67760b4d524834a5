// Joins the outputs of a sharded sweep (`splitkv sweep --shard i/N`, one CSV + sidecar each)
// into one results CSV + sidecar, as if one sweep had run. It refuses what would make the
// merged file lie: shards from different GPUs, grids, protocols or kernels sets, a shard
// given twice, a torn shard (resume it first), or one point measured twice.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace splitkv::tuner {

class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MergeSummary {
  std::int64_t rows = 0;
  int shards = 0;
  std::vector<std::string> missing_shards;  // "i/N" never given: the merge is partial
};

// Reads every input CSV and its sidecar, checks them, and writes `out_csv` and its sidecar
// atomically (nothing is written when a check fails). Rows keep their order: input by input.
MergeSummary merge_results(const std::vector<std::string>& input_csvs, const std::string& out_csv);

}  // namespace splitkv::tuner
