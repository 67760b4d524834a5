// An engine's use of the header-only heuristic, compiled with nothing but the documented include
// root on the path (heuristics/include, or the include/ of the num_splits component as installed):
// a second root creeping back in (say, the kernels' headers) fails to compile here.
#include "splitkv/num_splits.hpp"

#if !defined(SPLITKV_HAS_GENERATED_TABLE_H200)
#error "num_splits.hpp did not find the generated H200 table beside it"
#endif
#if !defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200)
#error "num_splits.hpp did not find the generated H200 fp8 table beside it"
#endif

#include <cstring>

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
  // An engine with an e4m3 cache names it, and gets the table fitted on that cache.
  const auto fp8 = splitkv::NumSplitsPolicy::for_device("NVIDIA H200", 132, splitkv::NumSplitsKvDtype::fp8_e4m3);
  const bool fp8_table = fp8.table() != nullptr && std::strcmp(fp8.table()->kv_dtype, "fp8_e4m3") == 0;
  return policy(shape) >= 1 && table.splits[0][0] >= 1 && policy.table() != nullptr && fp8_table && fp8(shape) >= 1
             ? 0
             : 1;
}
