#include "splitkv/tuner/sweep_point.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/length_distribution.hpp"

namespace splitkv::tuner {

std::string_view to_string(KvLayout layout) {
  return layout == KvLayout::paged ? "paged" : "contiguous";
}

std::string_view to_string(DType dtype) { return dtype == DType::fp16 ? "fp16" : "bf16"; }

std::string to_string(const LengthDistribution& distribution) {
  switch (distribution.kind) {
    case LengthKind::uniform: return "uniform";
    case LengthKind::long_tail: return "long_tail";
    case LengthKind::file: return "file:" + distribution.file;
    case LengthKind::fixed: break;
  }
  return "fixed";
}

std::optional<KvLayout> parse_layout(std::string_view text) {
  if (text == "contiguous") return KvLayout::contiguous;
  if (text == "paged") return KvLayout::paged;
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view text) {
  if (text == "bf16") return DType::bf16;
  if (text == "fp16") return DType::fp16;
  return std::nullopt;
}

std::string to_string(ElementTypes types) {
  if (types.kv_dtype == KvDtype::fp8_e4m3) return types.dtype == DType::bf16 ? "fp8_e4m3" : "fp16+fp8_e4m3";
  return std::string(to_string(types.dtype));
}

std::optional<ElementTypes> parse_element_types(std::string_view text) {
  if (text == "fp8_e4m3") return ElementTypes{DType::bf16, KvDtype::fp8_e4m3};
  if (const auto dtype = parse_dtype(text)) return ElementTypes{*dtype, KvDtype::same_as_q};
  return std::nullopt;
}

std::optional<LengthDistribution> parse_length_distribution(std::string_view text) {
  if (text == "fixed") return LengthDistribution{LengthKind::fixed, {}};
  if (text == "uniform") return LengthDistribution{LengthKind::uniform, {}};
  if (text == "long_tail") return LengthDistribution{LengthKind::long_tail, {}};
  constexpr std::string_view kFile = "file:";
  if (text.substr(0, kFile.size()) == kFile && is_length_file_name(text.substr(kFile.size()))) {
    return LengthDistribution{LengthKind::file, std::string(text.substr(kFile.size()))};
  }
  return std::nullopt;
}

bool is_length_file_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

int bytes_per_element(DType) { return 2; }  // both bf16 and fp16

std::string SweepPoint::shape_key() const {
  const std::string layout_token =
      layout == KvLayout::paged ? fmt::format("paged{}", page_size) : std::string("contiguous");
  return fmt::format("{} {} b{} h{}/{} d{} L{} C{} {}", layout_token, to_string(element_types()), batch,
                     num_heads, num_kv_heads, head_dim, context_len, cache_capacity,
                     to_string(length_distribution));
}

std::string SweepPoint::key() const { return fmt::format("{} s{}", shape_key(), num_splits); }

int SweepPoint::kv_tiles() const { return ceil_div(context_len, kTokensPerTile); }

int SweepPoint::pages_per_sequence() const {
  return layout == KvLayout::paged && page_size > 0 ? ceil_div(context_len, page_size) : 0;
}

int SweepPoint::block_table_width() const {
  return layout == KvLayout::paged && page_size > 0 ? ceil_div(cache_capacity, page_size) : 0;
}

std::vector<std::int32_t> SweepPoint::real_lengths() const {
  if (lengths) return *lengths;
  std::vector<std::int32_t> generated;
  if (file_free_lengths(*this, &generated)) return generated;
  return std::vector<std::int32_t>(std::max(batch, 0), context_len);
}

std::int64_t SweepPoint::total_tokens() const {
  if (length_distribution.kind == LengthKind::fixed && !lengths) return std::int64_t(batch) * context_len;
  std::int64_t sum = 0;
  for (std::int32_t length : real_lengths()) sum += length;
  return sum;
}

std::int64_t SweepPoint::total_pages() const {
  if (layout != KvLayout::paged || page_size <= 0) return 0;
  if (length_distribution.kind == LengthKind::fixed && !lengths) return std::int64_t(batch) * pages_per_sequence();
  std::int64_t sum = 0;
  for (std::int32_t length : real_lengths()) sum += ceil_div(length, page_size);
  return sum;
}

std::int64_t SweepPoint::kv_bytes() const {
  return 2 * total_tokens() * num_kv_heads * head_dim * kv_element_bytes();
}

std::int64_t SweepPoint::workspace_bytes() const {
  if (num_splits <= 1) return 0;
  return std::int64_t(batch) * num_heads * num_splits * (head_dim + 1) * 4;
}

namespace {

std::int64_t query_output_bytes(const SweepPoint& p) {
  const std::int64_t q_or_out = std::int64_t(p.batch) * p.num_heads * p.head_dim *
                                bytes_per_element(p.dtype);
  const std::int64_t lse = std::int64_t(p.batch) * p.num_heads * 4;
  const std::int64_t seqlens = std::int64_t(p.batch) * 4;
  return 2 * q_or_out + lse + seqlens;
}

}  // namespace

std::int64_t SweepPoint::footprint_bytes() const {
  const std::int64_t token_bytes =
      2 * std::int64_t(num_kv_heads) * head_dim * kv_element_bytes();  // K and V
  std::int64_t cache = 0;
  if (layout == KvLayout::paged) {
    const std::int64_t pages = total_pages();
    const std::int64_t block_table = std::int64_t(batch) * block_table_width() * 4;
    cache = pages * page_size * token_bytes + block_table;
  } else {
    cache = std::int64_t(batch) * cache_capacity * token_bytes;
  }
  return cache + query_output_bytes(*this) + workspace_bytes();
}

std::int64_t SweepPoint::working_set_bytes() const {
  const std::int64_t block_table_reads =
      layout == KvLayout::paged ? total_pages() * 4 : 0;
  return kv_bytes() + query_output_bytes(*this) + workspace_bytes() + block_table_reads;
}

DecodeParams SweepPoint::to_decode_params() const {
  DecodeParams params;
  params.layout = layout;
  params.dtype = dtype;
  params.kv_dtype = kv_dtype;
  params.batch = batch;
  params.num_heads = num_heads;
  params.num_kv_heads = num_kv_heads;
  params.head_dim = head_dim;
  params.num_splits = num_splits;
  if (layout == KvLayout::paged) {
    params.page_size = page_size;
    params.max_pages_per_seq = block_table_width();
    params.num_pages = static_cast<int>(total_pages());
  } else {
    params.cache_capacity = cache_capacity;
  }
  return params;
}

std::vector<std::int32_t> shuffled_page_pool(const SweepPoint& point) {
  std::vector<std::int32_t> pool(static_cast<std::size_t>(point.total_pages()));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(12345));
  return pool;
}

int copies_per_allocation(const SweepPoint& point) {
  if (point.layout != KvLayout::contiguous || point.context_len < 1) return 1;
  return std::max(1, point.cache_capacity / point.context_len);
}

int rotating_copies(const SweepPoint& point, std::int64_t l2_bytes, double l2_multiple,
                    std::int64_t memory_budget_bytes, int max_copies) {
  const std::int64_t per_launch = std::max<std::int64_t>(1, point.working_set_bytes());
  const double wanted = std::ceil(double(l2_bytes) * l2_multiple / double(per_launch));
  std::int64_t copies = std::max<std::int64_t>(1, std::int64_t(wanted));
  const std::int64_t footprint = std::max<std::int64_t>(1, point.footprint_bytes());
  const std::int64_t allocations = std::max<std::int64_t>(1, memory_budget_bytes / footprint);
  copies = std::min<std::int64_t>(copies, allocations * copies_per_allocation(point));
  copies = std::min<std::int64_t>(copies, std::max(1, max_copies));
  return int(copies);
}

}  // namespace splitkv::tuner
