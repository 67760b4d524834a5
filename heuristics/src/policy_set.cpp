#include "splitkv/heuristics/policy_set.hpp"

#include <memory>

#include <fmt/format.h>

#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/heuristics/oracle.hpp"
#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/num_splits.hpp"

namespace splitkv::heuristics {
namespace {

PolicyPick same(int splits) { return {splits, splits}; }

}  // namespace

std::vector<Policy> reference_policies(int num_sms) {
  std::vector<Policy> p;
  p.push_back({"oracle", "fastest measured count, ties (within noise) to fewer splits", false,
               [](const MeasuredShape& s) { return same(oracle_choice(s).num_splits); }});
  p.push_back({"fallback_one_wave",
               "num_splits.hpp fallback: fewest splits giving every SM a CTA, real length", false,
               [num_sms](const MeasuredShape& s) {
                 return same(one_wave_num_splits(s.point.batch, s.point.num_kv_heads, s.point.context_len, num_sms));
               }});
  p.push_back({"fa2_capacity",
               "FlashAttention 2 heuristic on seqlen_k = capacity; timed at the splits that overlap the real length",
               false, [num_sms](const MeasuredShape& s) {
                 const DecodeShape d = decode_shape(s, num_sms);
                 const int splits = fa2_num_splits(d, d.capacity_tokens);
                 // A peer's kernel cuts the real length its own way: its rows at that count time it.
                 if (find_peer_kernel(s.kernel)) return same(splits);
                 return PolicyPick{splits, capacity_chunks_with_work(d.capacity_tokens, d.context_len, splits)};
               }});
  p.push_back({"fa2_real_length", "FlashAttention 2 heuristic on seqlen_k = real length", false,
               [num_sms](const MeasuredShape& s) {
                 const DecodeShape d = decode_shape(s, num_sms);
                 return same(fa2_num_splits(d, d.context_len));
               }});
  p.push_back({"fa3_dynamic", "FlashAttention 3: static bound on capacity, per-sequence rule on real lengths", false,
               [num_sms](const MeasuredShape& s) { return same(fa3_dynamic_num_splits(decode_shape(s, num_sms))); }});
  p.push_back({"flashinfer_one_wave", "FlashInfer: smallest chunk (>= 128 tokens) that fits one resident wave", false,
               [num_sms](const MeasuredShape& s) { return same(flashinfer_num_splits(decode_shape(s, num_sms))); }});
  p.push_back({"vllm_v1_v2", "vLLM PagedAttention: V1 (1 split) or V2 (512-token partitions)", false,
               [num_sms](const MeasuredShape& s) { return same(vllm_num_splits(decode_shape(s, num_sms))); }});
  for (int fixed : {1, 8, 16, 32}) {
    p.push_back({fmt::format("fixed_{}", fixed), fmt::format("always {} split{}", fixed, fixed == 1 ? "" : "s"),
                 false, [fixed](const MeasuredShape&) { return same(fixed); }});
  }
  return p;
}

std::vector<Policy> table_policies(const FittedHeuristic& fit) {
  // Shared ownership: the policies outlive the FittedHeuristic they were built from.
  const auto tables = std::make_shared<FittedHeuristic>(fit);
  std::vector<Policy> p;
  p.push_back({"ours", "fitted table on batch x kv_heads and the real length", true,
               [tables](const MeasuredShape& s) { return same(tables->real_length.lookup(s)); }});
  p.push_back({"ours_capacity_only", "fitted table on batch x kv_heads and the capacity (no real length)", true,
               [tables](const MeasuredShape& s) { return same(tables->capacity_only.lookup(s)); }});
  return p;
}

std::vector<Policy> policy_row_policies(const std::string& kernel) {
  std::vector<Policy> p;
  const PeerKernel* peer = find_peer_kernel(kernel);
  if (peer == nullptr) return p;
  for (const PolicyKernel& row : peer->policy_kernels) {
    Policy policy{row.name, row.description, false, [](const MeasuredShape&) { return same(1); }};
    policy.measured_time = [name = row.name](const MeasuredShape& s) -> std::optional<double> {
      const auto it = s.policy_time_us.find(name);
      if (it == s.policy_time_us.end()) return std::nullopt;
      return it->second;
    };
    p.push_back(std::move(policy));
  }
  return p;
}

std::vector<Policy> all_policies(const FittedHeuristic& fit, int num_sms, const std::string& kernel) {
  return all_policies(table_policies(fit), num_sms, kernel);
}

std::vector<Policy> all_policies(std::vector<Policy> tables, int num_sms, const std::string& kernel) {
  std::vector<Policy> reference = reference_policies(num_sms);
  std::vector<Policy> out;
  out.push_back(reference.front());  // oracle
  for (Policy& p : tables) out.push_back(std::move(p));
  for (Policy& p : policy_row_policies(kernel)) out.push_back(std::move(p));
  for (std::size_t i = 1; i < reference.size(); ++i) out.push_back(std::move(reference[i]));
  return out;
}

}  // namespace splitkv::heuristics
