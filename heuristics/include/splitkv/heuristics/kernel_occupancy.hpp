// Resident CTAs per SM of the kernel a table is fitted for: the unit of the waves that its fit
// and its wave guard count (heuristics/FIT.md, "Wave guard").
#pragma once

namespace splitkv::heuristics {

// Up to head_dim 128 and above. The defaults are our decode kernel's (kernels/DESIGN.md: 2 CTAs
// per SM up to head_dim 128, 1 at 256); a peer's comes with it (peer_kernels.hpp).
struct KernelOccupancy {
  int up_to_head_dim_128 = 2;
  int above_head_dim_128 = 1;

  int at(int head_dim) const { return head_dim <= 128 ? up_to_head_dim_128 : above_head_dim_128; }
  bool operator==(const KernelOccupancy& o) const {
    return up_to_head_dim_128 == o.up_to_head_dim_128 && above_head_dim_128 == o.above_head_dim_128;
  }
  bool operator!=(const KernelOccupancy& o) const { return !(*this == o); }
};

// Our kernel on an fp8_e4m3 cache (kernels/include/splitkv/kernels/decode_split_kv.cuh,
// fp8_decode_shared_bytes): the lanes convert the e4m3 ring's codes in registers, so a CTA holds
// 52 KB at head_dim 128 (4 per SM, its __launch_bounds__) and 104 KB at 256 (2). Head_dim 64
// (38 KB) counts as 128, as the bf16 kernel's 3 CTAs there count as its 2.
inline constexpr KernelOccupancy kFp8KernelOccupancy{4, 2};

}  // namespace splitkv::heuristics
