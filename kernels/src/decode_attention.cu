// Host side of the decode kernels: argument checks, kernel selection, launch. Nothing here
// synchronises or reads device memory, so a whole call can be captured in a CUDA graph.
#include "splitkv/decode_attention.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "decode_launch.cuh"

namespace splitkv {
namespace detail {

namespace {
thread_local std::string last_message;
}  // namespace

Status fail(Status status, std::string message) {
  last_message = std::move(message);
  return status;
}

cudaError_t launch_combine_for(const DecodeParams& params, const kernels::DecodeKernelArgs& args, bool auto_table,
                               cudaStream_t stream) {
  auto for_head_dim = [&](auto element) {
    using Element = decltype(element);
    switch (params.head_dim) {
      case 64: return auto_table ? launch_combine<Element, 64, true>(params, args, stream)
                                 : launch_combine<Element, 64, false>(params, args, stream);
      case 128: return auto_table ? launch_combine<Element, 128, true>(params, args, stream)
                                  : launch_combine<Element, 128, false>(params, args, stream);
      default: return auto_table ? launch_combine<Element, 256, true>(params, args, stream)
                                 : launch_combine<Element, 256, false>(params, args, stream);
    }
  };
  return params.dtype == DType::bf16 ? for_head_dim(__nv_bfloat16{}) : for_head_dim(__half{});
}

}  // namespace detail

Status validate(const DecodeParams& p, std::string* message) {
  auto reject = [&](Status status, const std::string& text) {
    if (message != nullptr) *message = text;
    return status;
  };
  if (p.batch < 1) return reject(Status::invalid_argument, "batch must be >= 1, got " + std::to_string(p.batch));
  if (p.num_kv_heads < 1)
    return reject(Status::invalid_argument, "num_kv_heads must be >= 1, got " + std::to_string(p.num_kv_heads));
  if (p.num_heads < p.num_kv_heads || p.num_heads % p.num_kv_heads != 0)
    return reject(Status::invalid_argument, "num_heads (" + std::to_string(p.num_heads) +
                                                ") must be a positive multiple of num_kv_heads (" +
                                                std::to_string(p.num_kv_heads) + ")");
  if (p.group_size() > kernels::kMmaRows)
    return reject(Status::unsupported, "query group num_heads/num_kv_heads = " + std::to_string(p.group_size()) + " exceeds 16");
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return reject(Status::unsupported, "head_dim must be 64, 128 or 256, got " + std::to_string(p.head_dim));
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16)
    return reject(Status::unsupported, "dtype must be bf16 or fp16");
  if (p.kv_dtype != KvDtype::same_as_q && p.kv_dtype != KvDtype::fp8_e4m3)
    return reject(Status::unsupported, "kv_dtype must be same_as_q or fp8_e4m3");
  if (p.kv_dtype == KvDtype::fp8_e4m3) {
    if (p.k_descale == nullptr || p.v_descale == nullptr)
      return reject(Status::invalid_argument, std::string(p.k_descale == nullptr ? "k_descale" : "v_descale") +
                                                  " is null; an fp8_e4m3 cache needs k_descale and v_descale "
                                                  "([batch, num_kv_heads] fp32, device memory)");
    if (reinterpret_cast<uintptr_t>(p.k_descale) % 4 != 0 || reinterpret_cast<uintptr_t>(p.v_descale) % 4 != 0)
      return reject(Status::invalid_argument, "k_descale and v_descale must be 4-byte aligned");
  } else if (p.k_descale != nullptr || p.v_descale != nullptr) {
    // A caller that passes descales but forgot kv_dtype would otherwise read fp8 codes as bf16.
    return reject(Status::invalid_argument, "k_descale / v_descale are given but kv_dtype is not fp8_e4m3");
  }
  if (p.num_splits < 1 || p.num_splits > kMaxSplits)
    return reject(Status::invalid_argument, "num_splits must be in [1, " + std::to_string(kMaxSplits) + "], got " +
                                                std::to_string(p.num_splits));
  if (p.per_sequence_splits && p.splits_per_sequence == nullptr) {
    if (p.auto_splits == nullptr)
      return reject(Status::invalid_argument, "auto_splits is null; num_splits = auto (per_sequence_splits) needs "
                                              "the AutoSplitsTable in device memory");
    if (reinterpret_cast<uintptr_t>(p.auto_splits) % 4 != 0)
      return reject(Status::invalid_argument, "auto_splits must be 4-byte aligned");
  }
  if (p.layout == KvLayout::paged) {
    if (!is_power_of_two(p.page_size) || p.page_size > 1024)
      return reject(Status::unsupported,
                    "page_size must be a power of two up to 1024, got " + std::to_string(p.page_size));
    if (p.max_pages_per_seq < 1)
      return reject(Status::invalid_argument, "max_pages_per_seq must be >= 1 for the paged layout");
    if (p.num_pages < 1) return reject(Status::invalid_argument, "num_pages must be >= 1 for the paged layout");
    if (p.block_table == nullptr) return reject(Status::invalid_argument, "block_table is null (paged layout)");
  } else if (p.layout == KvLayout::contiguous) {
    if (p.cache_capacity < 1)
      return reject(Status::invalid_argument, "cache_capacity must be >= 1, got " + std::to_string(p.cache_capacity));
  } else {
    return reject(Status::invalid_argument, "layout must be contiguous or paged");
  }
  const std::pair<const void*, const char*> required[] = {
      {p.q, "q"}, {p.k, "k"}, {p.v, "v"}, {p.out, "out"}, {p.cache_seqlens, "cache_seqlens"}};
  for (const auto& [pointer, name] : required) {
    if (pointer == nullptr) return reject(Status::invalid_argument, std::string(name) + " is null");
  }
  for (const auto& [pointer, name] : {required[0], required[1], required[2], required[3]}) {
    if (!is_aligned_16(pointer))
      return reject(Status::invalid_argument, std::string(name) + " must be 16-byte aligned");
  }
  if (p.num_splits > 1 && p.workspace == nullptr)
    return reject(Status::invalid_argument, "workspace is null but num_splits > 1 needs " +
                                                std::to_string(decode_workspace_bytes(p)) + " bytes");
  if (p.workspace != nullptr && !is_aligned_16(p.workspace))
    return reject(Status::invalid_argument, "workspace must be 16-byte aligned");
  if (p.host_cache_seqlens != nullptr) {
    for (int b = 0; b < p.batch; ++b) {
      const int32_t length = p.host_cache_seqlens[b];
      if (length < 0 || length > p.capacity_tokens())
        return reject(Status::invalid_argument, "cache_seqlens[" + std::to_string(b) + "] = " +
                                                    std::to_string(length) + " is outside [0, capacity " +
                                                    std::to_string(p.capacity_tokens()) + "]");
    }
  }
  if (!(p.softmax_scale >= 0.f) || std::isinf(p.softmax_scale))
    return reject(Status::invalid_argument, "softmax_scale must be finite and >= 0 (0 selects 1/sqrt(head_dim))");
  return Status::ok;
}

std::size_t decode_workspace_bytes(const DecodeParams& p) {
  if (p.num_splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(p.batch) * p.num_heads * p.num_splits;
  return rows * (static_cast<std::size_t>(p.head_dim) + 1) * sizeof(float);
}

Status decode_attention(const DecodeParams& params, cudaStream_t stream) {
  return decode_attention(params, DecodeKernel::packed_gqa, stream);
}

Status decode_attention(const DecodeParams& params, DecodeKernel kernel, cudaStream_t stream) {
  std::string message;
  const Status status = validate(params, &message);
  if (status != Status::ok) return fail(status, message);

  kernels::DecodeKernelArgs args{};
  args.q = params.q;
  args.k = params.k;
  args.v = params.v;
  args.cache_seqlens = params.cache_seqlens;
  args.block_table = params.block_table;
  args.out = params.out;
  args.lse = params.lse;
  args.partial_out = static_cast<float*>(params.workspace);
  args.partial_lse = args.partial_out == nullptr
                         ? nullptr
                         : args.partial_out + static_cast<std::size_t>(params.batch) * params.num_heads *
                                                  params.num_splits * params.head_dim;
  args.num_heads = params.num_heads;
  args.num_kv_heads = params.num_kv_heads;
  args.group_size = params.group_size();
  args.cache_capacity = params.capacity_tokens();
  args.page_shift = params.layout == KvLayout::paged ? log2_exact(params.page_size) : 0;
  args.max_pages_per_seq = params.max_pages_per_seq;
  args.num_splits = params.num_splits;
  args.batch = params.batch;
  args.per_sequence_splits = params.per_sequence_splits ? 1 : 0;
  args.splits_per_sequence = params.splits_per_sequence;
  const float scale = params.softmax_scale > 0.f ? params.softmax_scale : 1.f / std::sqrt(float(params.head_dim));
  args.scale_log2 = scale * 1.4426950408889634f;
  args.k_descale = params.k_descale;
  args.v_descale = params.v_descale;

  if (kernel != DecodeKernel::packed_gqa && kernel != DecodeKernel::unpacked_gqa)
    return fail(Status::invalid_argument, "unknown decode kernel");
  if (params.kv_dtype == KvDtype::fp8_e4m3) return detail::dispatch_fp8_cache(params, args, kernel, stream);
  return params.dtype == DType::bf16 ? dispatch_head_dim<__nv_bfloat16, false>(params, args, kernel, stream)
                                     : dispatch_head_dim<__half, false>(params, args, kernel, stream);
}

const char* last_error_message() { return detail::last_message.c_str(); }

}  // namespace splitkv
