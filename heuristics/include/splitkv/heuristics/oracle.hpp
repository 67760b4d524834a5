// The oracle: for one measured shape, the split count a perfect policy would pick.
// Rule (heuristics/FIT.md, "Oracle"): the fastest median wins, but a count whose median
// is within the measured noise of the fastest counts as tied, and among ties the fewest
// splits win, because fewer splits need less workspace and combine traffic for the same
// speed.
#pragma once

#include "splitkv/heuristics/measurements.hpp"

namespace splitkv::heuristics {

// Noise band for comparing two medians: 1% at least, else twice the larger coefficient of
// variation of the two (a median moves by about cv/sqrt(reps) but runs on different
// machines move by more; DESIGN/kernels NOTES saw up to 2%).
inline constexpr double kMinTieTolerance = 0.01;
double tie_tolerance(double cv_fastest, double cv_other);

// True when `other` is tied with `fastest`: other.time <= fastest.time * (1 + tolerance).
bool tied_with_fastest(const SplitTiming& fastest, const SplitTiming& other);

struct OracleChoice {
  int num_splits = 1;         // fewest splits among the ties
  double time_us = 0;         // the median of that count
  int fastest_splits = 1;     // the count with the smallest median
  double fastest_time_us = 0; // the denominator of every regret: regret >= 1 always
  int tied_counts = 1;        // how many counts tie with the fastest (itself included)
};

// Requires at least one timing (MeasuredShape guarantees it).
OracleChoice oracle_choice(const MeasuredShape& shape);

}  // namespace splitkv::heuristics
