// One configuration the sweep times: a decode-attention shape plus a split count. Its key
// is what the results CSV is resumed by, so the key is built only from CSV columns and
// must never change spelling once results exist.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "splitkv/decode_params.hpp"

namespace splitkv::tuner {

// How real lengths vary across the batch (tuner/length_distribution.hpp generates them):
// fixed (every sequence holds context_len tokens), uniform, long_tail, or lengths drawn from
// a file the grid names. CSV and key spelling: "fixed", "uniform", "long_tail", "file:<name>".
enum class LengthKind { fixed, uniform, long_tail, file };
struct LengthDistribution {
  LengthKind kind = LengthKind::fixed;
  std::string file;  // kind == file: the name in the grid's "length_files"

  friend bool operator==(const LengthDistribution& a, const LengthDistribution& b) {
    return a.kind == b.kind && a.file == b.file;
  }
  friend bool operator!=(const LengthDistribution& a, const LengthDistribution& b) { return !(a == b); }
  friend bool operator<(const LengthDistribution& a, const LengthDistribution& b) {
    return std::tie(a.kind, a.file) < std::tie(b.kind, b.file);
  }
};

std::string_view to_string(KvLayout layout);
std::string_view to_string(DType dtype);
std::string to_string(const LengthDistribution& distribution);
std::optional<KvLayout> parse_layout(std::string_view text);
std::optional<DType> parse_dtype(std::string_view text);
std::optional<LengthDistribution> parse_length_distribution(std::string_view text);
// A name usable in "file:<name>": 1-64 of [A-Za-z0-9_.-], so keys and CSV fields stay plain.
bool is_length_file_name(std::string_view name);
int bytes_per_element(DType dtype);

// What a grid's `dtypes` entry and the CSV's dtype column name: q/out's type and the cache's.
// "bf16" and "fp16" are caches of that type; "fp8_e4m3" is a bf16 q/out over an e4m3 cache.
struct ElementTypes {
  DType dtype = DType::bf16;
  KvDtype kv_dtype = KvDtype::same_as_q;
  friend bool operator==(const ElementTypes& a, const ElementTypes& b) {
    return a.dtype == b.dtype && a.kv_dtype == b.kv_dtype;
  }
  friend bool operator<(const ElementTypes& a, const ElementTypes& b) {
    return std::tie(a.kv_dtype, a.dtype) < std::tie(b.kv_dtype, b.dtype);
  }
};
std::string to_string(ElementTypes types);
std::optional<ElementTypes> parse_element_types(std::string_view text);

struct SweepPoint {
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;  // tokens per page; 0 for contiguous
  DType dtype = DType::bf16;  // q and out
  KvDtype kv_dtype = KvDtype::same_as_q;
  int batch = 1;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_dim = 128;
  int context_len = 1;     // real tokens per sequence
  int cache_capacity = 1;  // tokens addressable per sequence (what FA2 calls seqlen_k)
  LengthDistribution length_distribution;
  int num_splits = 1;
  // The batch's real lengths, filled by expand_grid from the generator (not part of the key
  // or of equality: the key determines them). Without it, file-free distributions are
  // generated on demand and a file distribution counts every sequence at context_len.
  std::shared_ptr<const std::vector<std::int32_t>> lengths;

  // e.g. "paged16 bf16 b8 h32/8 d128 L8192 C131072 fixed s4". Resume compares these.
  std::string key() const;
  // The key without the split count: every num_splits of one shape shares it.
  std::string shape_key() const;

  int group_size() const { return num_heads / num_kv_heads; }
  ElementTypes element_types() const { return {dtype, kv_dtype}; }
  int kv_element_bytes() const { return kv_dtype == KvDtype::fp8_e4m3 ? 1 : bytes_per_element(dtype); }
  int kv_tiles() const;  // 64-token tiles of the longest real length
  int pages_per_sequence() const;   // paged: pages holding the longest real length
  std::vector<std::int32_t> real_lengths() const;  // see `lengths`
  std::int64_t total_tokens() const;  // sum of the real lengths
  std::int64_t total_pages() const;   // paged: pages the real lengths occupy (the pool size)
  int block_table_width() const;    // paged: pages addressable per sequence (capacity)

  // K+V bytes a decode step must read: the bandwidth floor's numerator.
  std::int64_t kv_bytes() const;
  // Device bytes one set of buffers for this point occupies. Contiguous caches are
  // allocated at capacity (that is what the layout costs an engine); paged pools hold
  // only the pages of the real length, and capacity shows up as block-table width.
  std::int64_t footprint_bytes() const;
  // Bytes one launch touches (KV read, q, out, split workspace): what the rotating buffers
  // must multiply past the L2 size so replays do not hit a warm cache.
  std::int64_t working_set_bytes() const;
  // fp32 partial outputs plus LSEs the combine reads; zero without splitting.
  std::int64_t workspace_bytes() const;

  // Shape fields of the kernels' params; pointers stay null for the caller to fill.
  DecodeParams to_decode_params() const;

  auto fields() const {
    return std::tie(layout, page_size, dtype, kv_dtype, batch, num_heads, num_kv_heads, head_dim,
                    context_len, cache_capacity, length_distribution, num_splits);
  }
  friend bool operator==(const SweepPoint& a, const SweepPoint& b) { return a.fields() == b.fields(); }
  friend bool operator!=(const SweepPoint& a, const SweepPoint& b) { return !(a == b); }
};

// Paged: the page pool in the order an allocator that has run a while hands it out, a fixed
// shuffle of [0, total_pages()). Sequence b holds the next ceil(length_b / page_size) entries, in
// sequence order, so every paged kernel under test reads the same placement of the same batch.
std::vector<std::int32_t> shuffled_page_pool(const SweepPoint& point);

// Rotating buffer sets so one graph replay touches at least l2_multiple x l2_bytes, capped
// by what fits in memory_budget_bytes and by max_copies (graphs with thousands of nodes
// capture slowly and gain nothing). Always at least 1.
// Rotating copies that fit in one contiguous cache allocation: copy c reads tokens
// [c*L, c*L + L) of every sequence's capacity-sized slot, so a short context in a large
// cache rotates through its own unused capacity instead of allocating more caches.
int copies_per_allocation(const SweepPoint& point);

int rotating_copies(const SweepPoint& point, std::int64_t l2_bytes, double l2_multiple,
                    std::int64_t memory_budget_bytes, int max_copies = 1024);

}  // namespace splitkv::tuner
