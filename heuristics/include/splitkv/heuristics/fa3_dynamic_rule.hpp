// FlashAttention 3's dynamic split rule, under the heuristics' names. The rule itself is the
// tuner's (splitkv/tuner/fa3_dynamic_rule.hpp): its device prepare kernel runs it, and the host
// baseline must run the very same code.
#pragma once

#include "splitkv/tuner/fa3_dynamic_rule.hpp"

namespace splitkv::heuristics {
using tuner::fa3_blocks_per_sm;
using tuner::fa3_sequence_splits;
using tuner::Fa3DynamicInputs;
}  // namespace splitkv::heuristics
