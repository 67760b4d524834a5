// The measured time of a shape at a split count a policy asked for. Policies pick counts
// the sweep may not have timed (FA2 likes 28, the grid has 24 and 32), so the evaluation
// needs one fixed rule for which measurement stands in, and it reports which rule applied.
// Rule (heuristics/FIT.md, "Split counts the sweep did not time"):
//   1. exact:          the count itself was timed;
//   2. same_partition: our kernel cuts the real length into ceil(tiles / ceil(tiles / s))
//                      non-empty splits (split_partition.hpp); when that count was timed it
//                      does the same work (the extra CTAs exit at once);
//   3. nearest:        else the timed count nearest in log2 distance to that partition
//                      count, ties to fewer splits; counts outside the timed range clamp
//                      to its ends.
// A peer kernel's rows (peer_kernels.hpp) skip rule 2: the peer partitions its own way, so the
// nearest count is taken to the requested one. policy_row is no rule of this function: a peer's
// own choice timed as a row of its own (regret_report.cpp).
#pragma once

#include <string_view>

#include "splitkv/heuristics/measurements.hpp"

namespace splitkv::heuristics {

enum class SplitMatch { exact, same_partition, nearest, policy_row };
std::string_view to_string(SplitMatch match);

struct MeasuredTime {
  int requested = 1;  // what the policy asked for (at least 1)
  int timed = 1;      // the count whose measurement is used
  SplitMatch match = SplitMatch::exact;
  double time_us = 0;
  double cv = 0;
};

MeasuredTime time_at_splits(const MeasuredShape& shape, int requested_splits);

// Non-empty splits of our kernel for `context_len` tokens and `num_splits` splits.
int splits_with_work(int context_len, int num_splits);

}  // namespace splitkv::heuristics
