// Runtime choice of num_splits for split-KV decode: the table `splitkv fit` generated for
// the running GPU and KV cache when one is compiled in, else a documented analytic rule.
//
// Header-only and CUDA-free: the caller passes the device name and SM count (from
// cudaGetDeviceProperties, once), so host planning code can use it without the runtime.
//
//   auto policy = splitkv::NumSplitsPolicy::for_device(prop.name, prop.multiProcessorCount);
//   int splits = policy({batch, num_heads, num_kv_heads, head_dim, max_seqlen, capacity, page_size});
//
// An fp8 (e4m3) KV cache reads half the bytes per split, so its best split counts differ and
// it has a table of its own; name the cache when picking the policy:
//
//   auto fp8 = splitkv::NumSplitsPolicy::for_device(prop.name, prop.multiProcessorCount,
//                                                   splitkv::NumSplitsKvDtype::fp8_e4m3);
//
// A table matches when its GPU name equals the device name exactly and its SM count equals
// the device's: a MIG slice or a part with fewer SMs has other waves, and gets the fallback.
// An fp8 cache on a GPU with no fp8 table gets that GPU's 16-bit table (for_device says why).
//
// Adding a GPU: run `splitkv fit` on its sweep (it writes heuristics/generated/
// num_splits_<gpu>.hpp, and num_splits_fp8_<gpu>.hpp from its fp8 rows) and add one
// __has_include block and one kTables line below per header.
#pragma once

#include <cstddef>
#include <string_view>

// The only splitkv header this one needs, and it sits in the same include root: an engine adds
// that root (heuristics/include, or the package's include/) and nothing else.
#include "splitkv/auto_splits_layout.hpp"

// Where the kernels' headers are on the include path as well (the build tree, the whole package),
// their table type and device lookup (AutoSplitsTable, auto_split_count), which fill_auto_splits'
// callers use, come along; where they are not, this header stands alone.
#if defined(__has_include)
#if __has_include("splitkv/split_partition.hpp")
#include "splitkv/split_partition.hpp"
#endif
#endif

// Source tree: heuristics/generated/ beside include/; installed: include/splitkv/generated/.
#if defined(__has_include)
#if __has_include("../../generated/num_splits_h200.hpp")
#include "../../generated/num_splits_h200.hpp"
#define SPLITKV_HAS_GENERATED_TABLE_H200 1
#elif __has_include("generated/num_splits_h200.hpp")
#include "generated/num_splits_h200.hpp"
#define SPLITKV_HAS_GENERATED_TABLE_H200 1
#endif
#if __has_include("../../generated/num_splits_fp8_h200.hpp")
#include "../../generated/num_splits_fp8_h200.hpp"
#define SPLITKV_HAS_GENERATED_TABLE_FP8_H200 1
#elif __has_include("generated/num_splits_fp8_h200.hpp")
#include "generated/num_splits_fp8_h200.hpp"
#define SPLITKV_HAS_GENERATED_TABLE_FP8_H200 1
#endif
#endif

namespace splitkv {

// What the host knows about one decode step (the generated ShapeInfo, field for field).
struct NumSplitsShape {
  int batch = 1;
  int num_heads = 1;       // query heads
  int num_kv_heads = 1;
  int head_dim = 128;
  int max_seqlen = 0;      // longest real length of the batch; 0 = unknown: use the capacity
  int cache_capacity = 0;  // tokens addressable per sequence (FlashAttention's seqlen_k)
  int page_size = 0;       // tokens per page; 0 = contiguous
  // Sum of the real lengths of the batch; 0 = unknown. With max_seqlen, a ragged batch is
  // looked up as the batch of max-length sequences doing the same work (effective_batch).
  long long total_seqlen = 0;
};

// The batch the tables are asked about. They were fitted on batches whose sequences all hold
// max_seqlen tokens; a ragged batch does the work of total_seqlen / max_seqlen such sequences
// (rounded to nearest, at least 1, at most batch), and that work, not the number of sequences,
// is what fills the SMs. On the H200's 108 ragged shapes (results/h200/report/ragged.md,
// `ours_host_total`) this cut the regret from 1.47 to 1.05 (geomean); rounding beat ceiling there
// (1.05 against 1.08), the one choice made on that data.
// The device's num_splits = auto rounds the same way (auto_splits_layout.hpp).
inline int effective_batch(const NumSplitsShape& s) {
  if (s.total_seqlen <= 0 || s.max_seqlen <= 0) return s.batch;
  return rounded_effective_batch(s.total_seqlen, s.max_seqlen, s.batch);
}

// Most splits the fallback asks for: what the sweeps measure and the combine is built for.
inline constexpr int kFallbackMaxSplits = 128;

// The fallback rule: the fewest splits that give every SM a CTA, i.e. the smallest s with
// batch * num_kv_heads * s >= SMs, capped by the 64-token tiles of `tokens` (more splits hold
// no work) and by kFallbackMaxSplits. `tokens` is the real max length when known, else the
// capacity. One CTA per SM, not one per resident slot: on the H200 measurements our kernel
// reaches full bandwidth near one CTA per SM, and filling two per SM (264 CTAs) cost more
// (in-sample geomean regret 1.053 against 1.078; heuristics/FIT.md).
constexpr int one_wave_num_splits(int batch, int num_kv_heads, int tokens, int sm_count) {
  const long long ctas = (long long)(batch > 1 ? batch : 1) * (num_kv_heads > 1 ? num_kv_heads : 1);
  const long long sms = sm_count > 1 ? sm_count : 1;
  long long splits = (sms + ctas - 1) / ctas;
  const long long tiles = tokens <= 0 ? 1 : (tokens + 63) / 64;
  if (splits > tiles) splits = tiles;
  if (splits > kFallbackMaxSplits) splits = kFallbackMaxSplits;
  return splits < 1 ? 1 : (int)splits;
}

// The KV cache's element type, as far as the choice of table goes: bf16 and fp16 caches share
// one table; an e4m3 cache (q and out 16-bit) has its own. The values are the kernels' C enum's
// (SPLITKV_KV_DTYPE_SAME_AS_Q, SPLITKV_KV_DTYPE_FP8_E4M3), which the C ABI passes through.
enum class NumSplitsKvDtype : int { sixteen_bit = 0, fp8_e4m3 = 1 };

// How a generated header's kKvDtype spells the cache; a 16-bit header has none.
constexpr const char* table_kv_dtype(NumSplitsKvDtype kv_dtype) {
  return kv_dtype == NumSplitsKvDtype::fp8_e4m3 ? "fp8_e4m3" : "";
}

// A generated table, as plain function pointers (batch, num_kv_heads, head_dim, tokens, page_size).
using NumSplitsLookup = int (*)(int, int, int, int, int);
struct GeneratedTable {
  const char* name;        // e.g. "h200": the generated namespace
  const char* gpu_name;    // e.g. "NVIDIA H200"
  int sm_count;
  NumSplitsLookup real_length;
  NumSplitsLookup capacity_only;
  const char* kv_dtype = "";  // the header's kKvDtype: "" for a bf16/fp16 cache, "fp8_e4m3"
};

struct GeneratedTableList {
  const GeneratedTable* data = nullptr;
  std::size_t size = 0;
};

// The tables compiled into this build.
inline GeneratedTableList compiled_in_tables() {
  static const GeneratedTable kTables[] = {
#if defined(SPLITKV_HAS_GENERATED_TABLE_H200)
      {"h200", generated::h200::kGpuName, generated::h200::kSmCount,
       &generated::h200::determine_num_splits_real_length, &generated::h200::determine_num_splits_capacity_only},
#endif
#if defined(SPLITKV_HAS_GENERATED_TABLE_FP8_H200)
      {"fp8_h200", generated::fp8_h200::kGpuName, generated::fp8_h200::kSmCount,
       &generated::fp8_h200::determine_num_splits_real_length,
       &generated::fp8_h200::determine_num_splits_capacity_only, generated::fp8_h200::kKvDtype},
#endif
      {nullptr, nullptr, 0, nullptr, nullptr, nullptr},  // end marker; keeps the array non-empty
  };
  return {kTables, sizeof(kTables) / sizeof(kTables[0]) - 1};
}

// Matches a table of any SM count in find_generated_table (a table named by its GPU alone).
inline constexpr int kAnySmCount = -1;

// The table for this GPU (and SM count, unless kAnySmCount) and a cache of `kv_dtype`: the one
// fitted for that cache, else the GPU's 16-bit table; null when the GPU has neither.
inline const GeneratedTable* find_generated_table(GeneratedTableList tables, std::string_view gpu_name, int sm_count,
                                                  NumSplitsKvDtype kv_dtype) {
  const std::string_view wanted = table_kv_dtype(kv_dtype);
  const GeneratedTable* sixteen_bit = nullptr;
  for (std::size_t i = 0; i < tables.size; ++i) {
    const GeneratedTable& t = tables.data[i];
    if ((sm_count != kAnySmCount && t.sm_count != sm_count) || gpu_name != std::string_view(t.gpu_name)) continue;
    const std::string_view cache = t.kv_dtype != nullptr ? t.kv_dtype : "";
    if (cache == wanted) return &t;
    if (cache.empty() && sixteen_bit == nullptr) sixteen_bit = &t;
  }
  return sixteen_bit;
}

enum class NumSplitsSource { real_length_table, capacity_table, one_wave_fallback };

constexpr const char* to_string(NumSplitsSource source) {
  return source == NumSplitsSource::real_length_table ? "real_length_table"
         : source == NumSplitsSource::capacity_table  ? "capacity_table"
                                                      : "one_wave_fallback";
}

struct NumSplitsChoice {
  int num_splits = 1;
  NumSplitsSource source = NumSplitsSource::one_wave_fallback;
};

class NumSplitsPolicy {
 public:
  // Picks the table for this device and a bf16/fp16 KV cache once; choose() is then one indirect
  // call and a lookup. Never an fp8 table: its counts are fitted to a cache of half the bytes.
  static NumSplitsPolicy for_device(std::string_view device_name, int sm_count,
                                    GeneratedTableList tables = compiled_in_tables()) {
    return for_device(device_name, sm_count, NumSplitsKvDtype::sixteen_bit, tables);
  }

  // The same for a cache of `kv_dtype`: the table of this GPU, SM count and cache. An fp8 cache on
  // a GPU without an fp8 table gets the GPU's 16-bit table, the next best thing: on the H200's
  // fp8 validation shapes it costs a geomean regret of 1.0593 against the fp8 table's 1.0221,
  // where the one-wave rule costs 1.2176 (results/h200/report/fp8_regret.md).
  static NumSplitsPolicy for_device(std::string_view device_name, int sm_count, NumSplitsKvDtype kv_dtype,
                                    GeneratedTableList tables = compiled_in_tables()) {
    NumSplitsPolicy policy;
    policy.sm_count_ = sm_count;
    policy.table_ = find_generated_table(tables, device_name, sm_count, kv_dtype);
    return policy;
  }

  NumSplitsChoice choose(const NumSplitsShape& s) const {
    if (table_ != nullptr) {
      if (s.max_seqlen > 0) {
        return {table_->real_length(effective_batch(s), s.num_kv_heads, s.head_dim, s.max_seqlen, s.page_size),
                NumSplitsSource::real_length_table};
      }
      return {table_->capacity_only(s.batch, s.num_kv_heads, s.head_dim, s.cache_capacity, s.page_size),
              NumSplitsSource::capacity_table};
    }
    const int tokens = s.max_seqlen > 0 ? s.max_seqlen : s.cache_capacity;
    return {one_wave_num_splits(effective_batch(s), s.num_kv_heads, tokens, sm_count_),
            NumSplitsSource::one_wave_fallback};
  }

  int operator()(const NumSplitsShape& shape) const { return choose(shape).num_splits; }

  // One per-length row of num_splits = auto (a row of DecodeParams::auto_splits): bucket i asks
  // this policy for its representative length 2^i (as max length and capacity), so the
  // device lookup (length_bucket) returns what the host would choose for that length.
  // `shape` gives batch, heads, head_dim and page size; entries are clamped to [1, 255].
  void fill_splits_by_length(const NumSplitsShape& shape, unsigned char* splits, int buckets) const {
    for (int i = 0; i < buckets; ++i) {
      NumSplitsShape at = shape;
      at.max_seqlen = at.cache_capacity = i < 30 ? (1 << i) : (1 << 30);
      const int chosen = (*this)(at);
      splits[i] = static_cast<unsigned char>(chosen > 255 ? 255 : (chosen < 1 ? 1 : chosen));
    }
  }

  // The table of num_splits = auto (DecodeParams::auto_splits): row r is the per-length row of a
  // batch of auto_batch_class_batch(r) max-length sequences, so the device's lookup by effective
  // batch and max length returns what the host would choose for a batch doing that work.
  // `shape` gives heads, head_dim and page size; its batch and lengths are not used.
  // `Table` is the kernels' AutoSplitsTable (decode_params.hpp); a template so that this header
  // needs no kernel header, and an engine without the kernels can fill a table of its own.
  template <class Table>
  void fill_auto_splits(const NumSplitsShape& shape, Table& table) const {
    static_assert(Table::kBatchClasses == kAutoBatchClasses && Table::kLengthBuckets == kAutoLengthBuckets,
                  "a num_splits = auto table has the extent of auto_splits_layout.hpp");
    for (int r = 0; r < kAutoBatchClasses; ++r) {
      NumSplitsShape row = shape;
      row.batch = auto_batch_class_batch(r);
      row.total_seqlen = 0;
      fill_splits_by_length(row, table.splits[r], kAutoLengthBuckets);
    }
  }

  // null: the fallback rule. Its kv_dtype tells an fp8 request served by its own table from
  // one served by the GPU's 16-bit table.
  const GeneratedTable* table() const { return table_; }
  int sm_count() const { return sm_count_; }

 private:
  const GeneratedTable* table_ = nullptr;
  int sm_count_ = 0;
};

}  // namespace splitkv
