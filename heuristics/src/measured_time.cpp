#include "splitkv/heuristics/measured_time.hpp"

#include <algorithm>
#include <cstdint>

#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/split_partition.hpp"

namespace splitkv::heuristics {
namespace {

// log2 distance between a and b as the ratio max/min, compared exactly by cross
// multiplication: is a1/b1 < a2/b2 (all positive)?
bool ratio_less(std::int64_t a1, std::int64_t b1, std::int64_t a2, std::int64_t b2) {
  return a1 * b2 < a2 * b1;
}

const SplitTiming& nearest_in_log2(const MeasuredShape& shape, int target) {
  const SplitTiming* best = &shape.timings.front();
  for (const SplitTiming& t : shape.timings) {  // ascending, so ties keep the fewer splits
    const std::int64_t hi = std::max(t.num_splits, target), lo = std::min(t.num_splits, target);
    const std::int64_t best_hi = std::max(best->num_splits, target);
    const std::int64_t best_lo = std::min(best->num_splits, target);
    if (ratio_less(hi, lo, best_hi, best_lo)) best = &t;
  }
  return *best;
}

}  // namespace

std::string_view to_string(SplitMatch match) {
  switch (match) {
    case SplitMatch::exact: return "exact";
    case SplitMatch::same_partition: return "same_partition";
    case SplitMatch::nearest: return "nearest";
    case SplitMatch::policy_row: return "policy_row";
  }
  return "?";
}

int splits_with_work(int context_len, int num_splits) {
  return std::max(1, active_splits(context_len, std::max(1, num_splits)));
}

MeasuredTime time_at_splits(const MeasuredShape& shape, int requested_splits) {
  MeasuredTime out;
  out.requested = std::max(1, requested_splits);
  const auto use = [&](const SplitTiming& t, SplitMatch match) {
    out.timed = t.num_splits;
    out.match = match;
    out.time_us = t.time_us;
    out.cv = t.cv;
    return out;
  };
  if (const SplitTiming* t = shape.find(out.requested)) return use(*t, SplitMatch::exact);
  const int partition =
      find_peer_kernel(shape.kernel) ? out.requested : splits_with_work(shape.point.context_len, out.requested);
  if (partition != out.requested) {
    if (const SplitTiming* t = shape.find(partition)) return use(*t, SplitMatch::same_partition);
  }
  return use(nearest_in_log2(shape, partition), SplitMatch::nearest);
}

}  // namespace splitkv::heuristics
