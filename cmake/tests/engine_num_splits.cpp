// An engine's use of the header-only heuristic, compiled with nothing but the documented include
// root on the path (heuristics/include, or the include/ of the num_splits component as installed):
// a second root creeping back in (say, the kernels' headers) fails to compile here.
#include "splitkv/num_splits.hpp"

#if !defined(SPLITKV_HAS_GENERATED_TABLE_H200)
#error "num_splits.hpp did not find the generated H200 table beside it"
#endif

namespace {

// An engine without the kernels fills the num_splits = auto table into a type of its own.
struct EngineAutoTable {
  static constexpr int kLengthBuckets = splitkv::kAutoLengthBuckets;
  static constexpr int kBatchClasses = splitkv::kAutoBatchClasses;
  unsigned char splits[kBatchClasses][kLengthBuckets] = {};
};

}  // namespace

int main() {
  const auto policy = splitkv::NumSplitsPolicy::for_device("NVIDIA H200", 132);
  // batch, heads, kv heads, head_dim, max length, capacity: as an engine would pass them.
  const splitkv::NumSplitsShape shape{4, 32, 8, 128, 4096, 8192};
  EngineAutoTable table;
  policy.fill_auto_splits(shape, table);
  return policy(shape) >= 1 && table.splits[0][0] >= 1 && policy.table() != nullptr ? 0 : 1;
}
