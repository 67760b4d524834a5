// The peers' own decode kernels whose rows sit in results CSVs beside ours: a kernel timed at
// fixed split counts (what a table is fitted on) and the kernels whose rows time the peer's
// own choice of split count (one row per shape; its num_splits column is the grid's bound, not
// the count the peer chose). A fit on a peer's rows trains on the fixed-split rows alone; the
// evaluation reads the policy rows as that peer's built-in rule, and the generated header adds
// a lookup with the peer's call-site arguments (heuristics/FIT.md, "Peer kernels").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "splitkv/heuristics/kernel_occupancy.hpp"
#include "splitkv/heuristics/kv_dtype_class.hpp"

namespace splitkv::heuristics {

// The drop-in lookup a generated header offers besides determine_num_splits.
enum class CallSite {
  flash_attention,    // num_splits_heuristic_fa: FlashAttention 2's arguments (our own kernel's tables)
  flash_attention_3,  // num_splits_heuristic_fa3: FlashAttention 3's, with the real max length
  flashinfer,         // num_splits_flashinfer: a split count and FlashInfer's kv chunk in pages
};

struct PolicyKernel {
  std::string name;         // the kernel column of its rows, e.g. fa3_heuristic_capacity
  std::string description;  // one line for the report
};

struct PeerKernel {
  std::string name;                         // the fixed-split rows' kernel: fa3, flashinfer
  std::string title;                        // "FlashAttention 3"
  std::vector<PolicyKernel> policy_kernels;  // report order
  // The policy the headline speedup of our table is taken over (in the capacity slice).
  std::string headline_policy;
  CallSite call_site;
  // Its resident CTAs per SM, the unit of the waves its table and guard count.
  KernelOccupancy occupancy;
};

// The peer registered under `kernel`, or null (our own kernel, and any other).
const PeerKernel* find_peer_kernel(std::string_view kernel);

// Our own kernel, splitkv (or no kernel named): the one whose headers carry no kernel in their name.
bool is_own_kernel(std::string_view kernel);

// The generated header's name for a table fitted on `kernel`'s rows of a `kv_dtype` cache: the
// GPU's short name for our own kernel on a 16-bit cache (num_splits_h200.hpp,
// splitkv::generated::h200), preceded by <kernel>_ for a peer's (num_splits_fa3_h200.hpp,
// splitkv::generated::fa3_h200; the kernel folded like a GPU name) and by fp8_ for an e4m3 cache
// (num_splits_fp8_h200.hpp, splitkv::generated::fp8_h200), so that every table of one GPU can sit
// in one translation unit.
std::string table_short_name(std::string_view kernel, const std::string& gpu_short_name,
                             KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit);

// What `splitkv fit` needs besides the CSVs to pick `kernel`'s rows: " --kernel <kernel>", or
// nothing for our own kernel (the default).
std::string kernel_argument(std::string_view kernel);

// The name of the call-site lookup a header of this kernel's rows offers.
std::string call_site_function(std::string_view kernel);

}  // namespace splitkv::heuristics
