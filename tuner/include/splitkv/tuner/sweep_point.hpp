// One configuration the sweep times: a decode-attention shape plus a split count. Its key
// is what the results CSV is resumed by, so the key is built only from CSV columns and
// must never change spelling once results exist.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "splitkv/decode_params.hpp"

namespace splitkv::tuner {

// How real lengths vary across the batch. Only `fixed` (every sequence holds context_len
// tokens) exists today; the name travels through the CSV so skewed batches can be added
// without breaking old files.
enum class LengthDistribution { fixed };

std::string_view to_string(KvLayout layout);
std::string_view to_string(DType dtype);
std::string_view to_string(LengthDistribution distribution);
std::optional<KvLayout> parse_layout(std::string_view text);
std::optional<DType> parse_dtype(std::string_view text);
std::optional<LengthDistribution> parse_length_distribution(std::string_view text);
int bytes_per_element(DType dtype);

struct SweepPoint {
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;  // tokens per page; 0 for contiguous
  DType dtype = DType::bf16;
  int batch = 1;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_dim = 128;
  int context_len = 1;     // real tokens per sequence
  int cache_capacity = 1;  // tokens addressable per sequence (what FA2 calls seqlen_k)
  LengthDistribution length_distribution = LengthDistribution::fixed;
  int num_splits = 1;

  // e.g. "paged16 bf16 b8 h32/8 d128 L8192 C131072 fixed s4". Resume compares these.
  std::string key() const;
  // The key without the split count: every num_splits of one shape shares it.
  std::string shape_key() const;

  int group_size() const { return num_heads / num_kv_heads; }
  int kv_tiles() const;  // 64-token tiles of the real length
  int pages_per_sequence() const;   // paged: pages holding the real length
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
    return std::tie(layout, page_size, dtype, batch, num_heads, num_kv_heads, head_dim,
                    context_len, cache_capacity, length_distribution, num_splits);
  }
  friend bool operator==(const SweepPoint& a, const SweepPoint& b) { return a.fields() == b.fields(); }
  friend bool operator!=(const SweepPoint& a, const SweepPoint& b) { return !(a == b); }
};

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
