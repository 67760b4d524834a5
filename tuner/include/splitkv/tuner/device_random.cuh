// Random K/V/Q contents generated on the device: gigabytes of host-generated data would cost
// the sweep more time than timing it. Values are uniform in [-1, 1] from a counter-based hash,
// so every launch sees realistic, non-zero data and a seed reproduces it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "splitkv/decode_params.hpp"

namespace splitkv::tuner {

__device__ __forceinline__ float uniform_from_counter(std::uint64_t counter, std::uint64_t seed) {
  std::uint64_t x = (counter + 1) * 0x9E3779B97F4A7C15ull ^ seed;  // splitmix64 finaliser
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 2.f - 1.f;
}

template <typename Element>
__global__ void fill_uniform_kernel(Element* data, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    data[i] = Element(uniform_from_counter(i, seed));
  }
}

// Fills `count` 16-bit elements of `dtype`; returns the launch error.
inline cudaError_t fill_uniform(void* data, std::size_t count, DType dtype, std::uint64_t seed, cudaStream_t stream) {
  if (dtype == DType::bf16) {
    fill_uniform_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
  } else {
    fill_uniform_kernel<<<1024, 256, 0, stream>>>(static_cast<__half*>(data), count, seed);
  }
  return cudaGetLastError();
}

// Random e4m3 codes (uniform over the 254 finite ones: 0x7F / 0xFF NaN are skipped), so a sweep
// reads fp8 caches whose every exponent occurs.
__global__ inline void fill_e4m3_codes_kernel(std::uint8_t* data, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float u = uniform_from_counter(i, seed) * 0.5f + 0.5f;  // [0, 1)
    int code = min(static_cast<int>(u * 254.f), 253);
    code += code >= 0x7F ? 1 : 0;  // skip 0x7F
    data[i] = static_cast<std::uint8_t>(code);
  }
}

inline cudaError_t fill_e4m3_codes(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  fill_e4m3_codes_kernel<<<1024, 256, 0, stream>>>(static_cast<std::uint8_t*>(data), count, seed);
  return cudaGetLastError();
}

// Random fp32 values uniform in [low, high): per-(sequence, kv head) descales.
__global__ inline void fill_range_kernel(float* data, std::size_t count, float low, float high, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    data[i] = low + (uniform_from_counter(i, seed) * 0.5f + 0.5f) * (high - low);
  }
}

inline cudaError_t fill_range(float* data, std::size_t count, float low, float high, std::uint64_t seed,
                              cudaStream_t stream) {
  fill_range_kernel<<<64, 256, 0, stream>>>(data, count, low, high, seed);
  return cudaGetLastError();
}

}  // namespace splitkv::tuner
