#include "splitkv/tuner/sample_stats.hpp"

#include <algorithm>
#include <cmath>

namespace splitkv::tuner {
namespace {

double percentile_sorted(const std::vector<double>& sorted, double fraction) {
  const double position = fraction * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(below);
  return sorted[below] * (1.0 - weight) + sorted[above] * weight;
}

}  // namespace

SampleStats summarize(std::vector<double> samples) {
  SampleStats stats;
  stats.count = static_cast<int>(samples.size());
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  stats.median = percentile_sorted(samples, 0.5);
  stats.p10 = percentile_sorted(samples, 0.1);
  stats.p90 = percentile_sorted(samples, 0.9);
  double sum = 0.0;
  for (double x : samples) sum += x;
  stats.mean = sum / static_cast<double>(samples.size());
  double squares = 0.0;
  for (double x : samples) squares += (x - stats.mean) * (x - stats.mean);
  const double deviation = samples.size() > 1 ? std::sqrt(squares / static_cast<double>(samples.size() - 1)) : 0.0;
  stats.cv = stats.mean > 0.0 ? deviation / stats.mean : 0.0;
  return stats;
}

}  // namespace splitkv::tuner
