// Builders shared by the heuristics CPU tests: results rows and CSV text with chosen
// timings, and measured shapes made directly from (num_splits, time) pairs.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/regret_report.hpp"
#include "splitkv/tuner/results_csv.hpp"

namespace splitkv::heuristics::testing {

inline tuner::SweepPoint decode_point(int batch = 1, int context_len = 8192, int cache_capacity = 0,
                                      int num_kv_heads = 8, int head_dim = 128, int page_size = 0) {
  tuner::SweepPoint p;
  p.layout = page_size > 0 ? KvLayout::paged : KvLayout::contiguous;
  p.page_size = page_size;
  p.batch = batch;
  p.num_heads = num_kv_heads * 4;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.context_len = context_len;
  p.cache_capacity = cache_capacity > 0 ? cache_capacity : context_len;
  p.num_splits = 1;
  return p;
}

inline tuner::ResultRow timed_row(tuner::SweepPoint point, int num_splits, double median, double cv = 0.005,
                                  const std::string& gpu = "NVIDIA H200") {
  tuner::ResultRow row;
  row.gpu = gpu;
  row.kernel = "splitkv";
  point.num_splits = num_splits;
  row.point = point;
  row.time_us_median = median;
  row.time_us_p10 = median * 0.99;
  row.time_us_p90 = median * 1.01;
  row.cv = cv;
  row.repetitions = 10;
  row.kv_bytes = point.kv_bytes();
  row.tbps = tuner::achieved_tbps(row.kv_bytes, median);
  return row;
}

inline std::string csv_text(const std::vector<tuner::ResultRow>& rows) {
  std::string text = tuner::format_results_header();
  for (const auto& row : rows) text += tuner::format_results_row(row);
  return text;
}

// A shape timed at the given (num_splits, median) pairs, all with coefficient of variation `cv`.
inline MeasuredShape shape_with(const std::vector<std::pair<int, double>>& timings, double cv = 0.002,
                                tuner::SweepPoint point = decode_point()) {
  MeasuredShape shape;
  shape.kernel = "splitkv";
  point.num_splits = 0;
  shape.point = point;
  for (const auto& [splits, time] : timings) shape.timings.push_back({splits, time, cv, 0});
  return shape;
}

// The message of the InputError `f` throws; empty when it throws none.
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The summary row of one subset and policy (the rows of one dataset); throws when there is none.
inline const RegretSummaryRow& row_for(const std::vector<RegretSummaryRow>& rows, const std::string& subset,
                                       const std::string& policy) {
  for (const auto& r : rows) {
    if (r.subset == subset && r.policy == policy) return r;
  }
  throw std::runtime_error("no row " + subset + " " + policy);
}

}  // namespace splitkv::heuristics::testing
