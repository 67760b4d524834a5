// Writes the fitted tables as a standalone C++ header (heuristics/generated/
// num_splits_<gpu>.hpp) that engines commit and include. The text is a pure function of
// the fit and the provenance: no clock, no host name, no floating-point text, everything
// in a fixed order, so the same CSV bytes give the same header bytes and `splitkv fit
// --check` can compare byte for byte.
#pragma once

#include <string>
#include <string_view>

#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/table_fit.hpp"

namespace splitkv::heuristics {

struct HeaderProvenance {
  std::string gpu_name;      // the CSV's gpu column, e.g. "NVIDIA H200"
  std::string short_name;    // C++ identifier for the namespace and file, e.g. "h200"
  int sm_count = 0;
  std::string sm_count_source;
  std::string input_path;    // as recorded: display_path() of the CSV ("a.csv + b.csv" for several)
  std::string input_arguments;  // the same as `splitkv fit` arguments (command_line_inputs)
  std::string input_sha256;
  std::string measured_at;   // the sidecar's date; empty when there is none
  std::string kernel;
  KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit;
  std::string kv_dtype_argument;  // kv_dtype_argument(): part of the regenerate command
  std::string tool_version;
  std::string output_path;   // where the header is meant to live, for the regenerate hint
  RowCounts counts;
};

HeaderProvenance provenance_of(const Measurements& measurements, const std::string& short_name,
                               const std::string& output_path, const std::string& tool_version);

// "NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100_80gb_hbm3": lower case, the
// vendor prefix dropped, anything else than [a-z0-9] folded into single underscores.
std::string short_gpu_name(std::string_view gpu_name);
// Throws InputError unless `name` is a usable C++ identifier part ([a-z_][a-z0-9_]*).
void check_short_name(const std::string& name);
// heuristics/generated/num_splits_<short>.hpp
std::string default_header_path(const std::string& short_name);

std::string emit_num_splits_header(const FittedHeuristic& fit, const HeaderProvenance& provenance);

// For --check: where two texts first differ. line 0 means they are equal.
struct TextDifference {
  int line = 0;              // 1-based
  std::string expected;      // that line in `expected` (or "<end of file>")
  std::string actual;
};
TextDifference first_difference(std::string_view expected, std::string_view actual);

}  // namespace splitkv::heuristics
