// Thin wrappers over the PTX the decode kernel is built from: asynchronous 16-byte copies
// into shared memory, ldmatrix, and the m16n8k16 tensor-core MMA (sm_80 and newer).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace splitkv::kernels {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// A false `valid` copies zero bytes and fills the 16 destination bytes with zeros: rows past a
// sequence's end must hold zeros, not stale data, because P (= 0 there) times NaN is NaN.
__device__ __forceinline__ void copy_async_16(uint32_t destination, const void* source, bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(destination),
               "l"(source), "r"(source_bytes));
}

__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kGroupsStillPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kGroupsStillPending));
}

__device__ __forceinline__ void load_matrix_x4(uint32_t (&fragment)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address));
}

__device__ __forceinline__ void load_matrix_x4_transposed(uint32_t (&fragment)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(fragment[0]), "=r"(fragment[1]), "=r"(fragment[2]), "=r"(fragment[3])
               : "r"(address));
}

// Programmatic dependent launch (sm_90): the next kernel in the stream may be scheduled while
// this one still runs, and waits in `wait_for_prerequisite_grids` until the previous grid has
// finished and its writes are visible. It hides the launch gap between split and combine and
// between back-to-back decode calls. Both are no-ops before sm_90 or without the launch attribute.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependent_grids_to_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

// A load that allocates in L2 only, never in the SM's L1: a value read before
// wait_for_prerequisite_grids may be stale, and must not be what a load after the wait finds.
__device__ __forceinline__ int load_l2_only(const int32_t* address) {
  int value;
  asm volatile("ld.global.cg.s32 %0, [%1];\n" : "=r"(value) : "l"(address));
  return value;
}

// Asks L2 for the line holding `address`; nothing is returned and nothing can go wrong if the
// line changes later: L2 is where every SM's writes meet.
__device__ __forceinline__ void prefetch_to_l2(const void* address) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(address));
}

template <typename Element>
struct TensorCore;

template <>
struct TensorCore<__nv_bfloat16> {
  // accumulator += A (16x16, row-major) * B (16x8, column-major)
  __device__ __forceinline__ static void mma(float (&accumulator)[4], const uint32_t (&a)[4],
                                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(accumulator[0]), "+f"(accumulator[1]), "+f"(accumulator[2]), "+f"(accumulator[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    __nv_bfloat162 packed = __floats2bfloat162_rn(low, high);
    return *reinterpret_cast<uint32_t*>(&packed);
  }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

template <>
struct TensorCore<__half> {
  __device__ __forceinline__ static void mma(float (&accumulator)[4], const uint32_t (&a)[4],
                                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(accumulator[0]), "+f"(accumulator[1]), "+f"(accumulator[2]), "+f"(accumulator[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    __half2 packed = __floats2half2_rn(low, high);
    return *reinterpret_cast<uint32_t*>(&packed);
  }
  __device__ __forceinline__ static __half from_float(float x) { return __float2half_rn(x); }
};

}  // namespace splitkv::kernels
