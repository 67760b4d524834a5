#include "splitkv/heuristics/oracle.hpp"

#include <algorithm>
#include <stdexcept>

namespace splitkv::heuristics {

double tie_tolerance(double cv_fastest, double cv_other) {
  return std::max(kMinTieTolerance, 2.0 * std::max(cv_fastest, cv_other));
}

bool tied_with_fastest(const SplitTiming& fastest, const SplitTiming& other) {
  return other.time_us <= fastest.time_us * (1.0 + tie_tolerance(fastest.cv, other.cv));
}

OracleChoice oracle_choice(const MeasuredShape& shape) {
  if (shape.timings.empty()) throw std::logic_error("oracle_choice: shape without timings");
  // Fastest: smallest median; equal medians go to the fewer splits (timings ascend).
  const SplitTiming* fastest = &shape.timings.front();
  for (const SplitTiming& t : shape.timings) {
    if (t.time_us < fastest->time_us) fastest = &t;
  }
  OracleChoice choice;
  choice.fastest_splits = fastest->num_splits;
  choice.fastest_time_us = fastest->time_us;
  choice.tied_counts = 0;
  bool picked = false;
  for (const SplitTiming& t : shape.timings) {  // ascending: the first tie has the fewest splits
    if (!tied_with_fastest(*fastest, t)) continue;
    ++choice.tied_counts;
    if (!picked) {
      choice.num_splits = t.num_splits;
      choice.time_us = t.time_us;
      picked = true;
    }
  }
  return choice;
}

}  // namespace splitkv::heuristics
