// A num_splits table given to `splitkv evaluate --table` instead of one fitted from the
// training CSV: read back from a header `splitkv fit` emitted (heuristics/generated/), or
// one compiled into this build (splitkv/num_splits.hpp). Also the reader `fit --check` uses
// to tell a malformed, foreign or hand-edited header from a stale one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/heuristics/kernel_occupancy.hpp"
#include "splitkv/heuristics/kv_dtype_class.hpp"

namespace splitkv::heuristics {

// One table of a generated header, as its lookup function computes it
// (header_emitter.cpp: real_length_lookup / capacity_lookup).
struct ParsedSplitTable {
  int cta_buckets_per_octave = 1;  // kCtaBucketsPerOctave
  int cta_bucket_min = 0;
  int cta_buckets = 1;
  int length_log2_min = 0;
  int length_buckets = 1;
  int max_splits = 1;
  int head_dim_classes = 1;
  int layout_classes = 1;
  std::vector<int> head_dim_thresholds;   // head_dim >= t[k] -> one class up
  std::vector<int> page_size_thresholds;  // page_size >= t[k] -> one paged class up
  std::vector<std::vector<int>> rows;     // kRows
  std::vector<int> row_of;                // kRowOf, [head_dim class][layout class][length bucket]
  // The wave guard (kWaveGuardMarginPercent, kSmCount, kMeasuredCtas; heuristics/FIT.md).
  int wave_guard_margin_percent = -1;
  int sm_count = 0;
  std::vector<std::vector<std::int64_t>> measured_ctas;  // per plane, ascending
  KernelOccupancy occupancy;                             // from guard_unmeasured's slots

  int lookup(int batch, int num_kv_heads, int head_dim, int tokens, int page_size) const;
};

struct GeneratedHeader {
  std::string path;
  std::string short_name;    // namespace splitkv::generated::<short_name>
  std::string gpu_name;      // kGpuName
  int sm_count = 0;          // kSmCount
  std::string input_sha256;  // kInputSha256: the results CSV it was fitted on
  std::string kernel;        // kKernel: the kernel whose rows were fitted; splitkv when absent
  KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit;  // kKvDtype: the KV cache it is for; 16bit when absent
  ParsedSplitTable real_length;
  ParsedSplitTable capacity;
  // 1-based line ranges of the table literals (kRows and kRowOf of both tables).
  std::vector<std::pair<int, int>> table_lines;

  bool is_table_line(int line) const;
};

// Parses a header emitted by `splitkv fit`. Throws InputError naming the file, the line or
// constant and the reason: missing file, not a generated header, truncated, a constant
// missing, arrays whose sizes or values do not fit the declared axes.
GeneratedHeader read_generated_header(const std::string& path);

using SplitLookup = std::function<int(int batch, int num_kv_heads, int head_dim, int tokens, int page_size)>;

// The table `evaluate --table` evaluates as `ours` / `ours_capacity_only`.
struct GivenTable {
  std::string source;  // the header path, or "compiled-in table <name>"
  std::string gpu_name;
  int sm_count = 0;
  KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit;  // the header's kKvDtype, or the compiled-in table's
  SplitLookup real_length;
  SplitLookup capacity_only;
  // Named by its GPU name, which stands for that GPU's compiled-in tables of every KV cache, so
  // the rows it is scored on may pick another of them (given_table_for_rows).
  bool by_gpu_name = false;
};

// `spec` is a path to a generated header when such a file exists or it ends in .hpp/.h;
// otherwise a short name ("h200", "fp8_h200") of a compiled-in table, or a GPU name ("NVIDIA H200"),
// which gives that GPU's compiled-in table for `kv_dtype`, else its 16-bit one (as NumSplitsPolicy
// picks them). Throws InputError (unknown GPU: the message, which names `flag`, lists the
// compiled-in tables).
GivenTable load_given_table(const std::string& spec, const std::string& flag = "--table",
                            KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit);

// The table to score on rows of `kv_dtype`: for one named by its GPU name, that GPU's compiled-in
// table for those rows (load_given_table); any other, `table` itself.
GivenTable given_table_for_rows(const GivenTable& table, KvDtypeClass kv_dtype);

}  // namespace splitkv::heuristics
