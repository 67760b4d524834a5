// Order statistics of repeated timings: what every row of a sweep reports.
#pragma once

#include <vector>

namespace splitkv::tuner {

struct SampleStats {
  double median = 0.0;
  double p10 = 0.0;
  double p90 = 0.0;
  double mean = 0.0;
  double cv = 0.0;  // standard deviation / mean: the run-to-run noise the oracle treats as ties
  int count = 0;
};

// Percentiles interpolate linearly between order statistics (numpy's default), so the numbers
// match what a user recomputes from raw samples with pandas.
SampleStats summarize(std::vector<double> samples);

}  // namespace splitkv::tuner
