#include "splitkv/heuristics/peer_kernels.hpp"

#include "splitkv/heuristics/header_emitter.hpp"

namespace splitkv::heuristics {

const PeerKernel* find_peer_kernel(std::string_view kernel) {
  static const std::vector<PeerKernel> peers = {
      {"fa3",
       "FlashAttention 3",
       {{"fa3_heuristic_capacity", "FA3's own count (num_splits=0) with max_seqlen_k = the cache capacity, "
                                   "flash_attn_with_kvcache's default; measured row"},
        {"fa3_heuristic_maxlen", "FA3's own count (num_splits=0) with max_seqlen_k = the batch's real max length; "
                                 "measured row"}},
       "fa3_heuristic_capacity",
       CallSite::flash_attention_3,
       // FA3's Hopper forward kernel fills an SM's shared memory with one CTA (kernels/DECISIONS.md:
       // fitted with one, its off-grid regret is 1.0284 against 1.0336 with our kernel's two).
       {1, 1}},
      {"flashinfer",
       "FlashInfer",
       {{"flashinfer_heuristic", "FlashInfer's own plan (its kv chunk size from the page counts); measured row"}},
       "flashinfer_heuristic",
       CallSite::flashinfer,
       // FlashInfer's plan budgets 8 CTAs per SM, but counting waves of 8 moved its cross-validated
       // regret by under 0.002, so its table keeps our kernel's waves.
       {}},
  };
  for (const PeerKernel& peer : peers) {
    if (peer.name == kernel) return &peer;
  }
  return nullptr;
}

bool is_own_kernel(std::string_view kernel) { return kernel.empty() || kernel == "splitkv"; }

std::string table_short_name(std::string_view kernel, const std::string& gpu_short_name, KvDtypeClass kv_dtype) {
  const std::string cache = kv_dtype == KvDtypeClass::fp8_e4m3 ? "fp8_" : "";
  if (is_own_kernel(kernel)) return cache + gpu_short_name;
  return short_gpu_name(kernel) + "_" + cache + gpu_short_name;
}

std::string kernel_argument(std::string_view kernel) {
  if (is_own_kernel(kernel)) return "";
  return " --kernel " + std::string(kernel);
}

std::string call_site_function(std::string_view kernel) {
  const PeerKernel* peer = find_peer_kernel(kernel);
  switch (peer ? peer->call_site : CallSite::flash_attention) {
    case CallSite::flash_attention_3: return "num_splits_heuristic_fa3";
    case CallSite::flashinfer: return "num_splits_flashinfer";
    case CallSite::flash_attention: break;
  }
  return "num_splits_heuristic_fa";
}

}  // namespace splitkv::heuristics
