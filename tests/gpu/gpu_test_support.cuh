// Shared pieces of the GPU tests: device detection that skips visibly, device buffers,
// and moving a float64 reference problem to and from the GPU in bf16 / fp16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference_attention.hpp"
#include "splitkv/decode_attention.hpp"

namespace splitkv::testing {

// "No GPU" is any failure to find a device: on the CI machine the runtime answers
// cudaErrorInsufficientDriver because no driver is installed at all.
inline std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(error);
  if (count == 0) return "no CUDA device present";
  return "";
}

#define SPLITKV_REQUIRE_GPU()                                        \
  do {                                                               \
    const std::string reason = ::splitkv::testing::gpu_unavailable_reason(); \
    if (!reason.empty()) GTEST_SKIP() << reason;                     \
  } while (0)

#define SPLITKV_CUDA_OK(expression) ASSERT_EQ(cudaSuccess, (expression)) << #expression

template <typename T>
struct DeviceBuffer {
  T* data = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) {
    if (n != 0 && cudaMalloc(&data, n * sizeof(T)) != cudaSuccess) data = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data); }
  std::size_t bytes() const { return count * sizeof(T); }
  cudaError_t upload(const std::vector<T>& host) {
    return cudaMemcpy(data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> host(count);
    cudaMemcpy(host.data(), data, bytes(), cudaMemcpyDeviceToHost);
    return host;
  }
  // 0xFF bytes are NaN in bf16, fp16 and fp32: an element the kernel forgets stays NaN.
  cudaError_t poison() { return cudaMemset(data, 0xFF, bytes()); }
};

inline std::uint16_t to_bits(double x, DType dtype) {
  std::uint16_t bits;
  if (dtype == DType::bf16) {
    const __nv_bfloat16 value = __float2bfloat16_rn(static_cast<float>(x));
    std::memcpy(&bits, &value, 2);
  } else {
    const __half value = __float2half_rn(static_cast<float>(x));
    std::memcpy(&bits, &value, 2);
  }
  return bits;
}

inline double from_bits(std::uint16_t bits, DType dtype) {
  if (dtype == DType::bf16) {
    __nv_bfloat16 value;
    std::memcpy(&value, &bits, 2);
    return static_cast<double>(__bfloat162float(value));
  }
  __half value;
  std::memcpy(&value, &bits, 2);
  return static_cast<double>(__half2float(value));
}

// Rounds the reference inputs to the kernel's dtype in place and returns the bits, so the
// float64 reference sees exactly the values the kernel reads.
inline std::vector<std::uint16_t> round_to_dtype(std::vector<double>& values, DType dtype) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    bits[i] = to_bits(values[i], dtype);
    values[i] = from_bits(bits[i], dtype);
  }
  return bits;
}

struct ErrorSummary {
  double relative = 0.0;  // ||gpu - ref||_2 / ||ref||_2
  double max_abs = 0.0;
  std::size_t unwritten = 0;  // NaN left from the poison
};

inline ErrorSummary compare(const std::vector<double>& gpu, const std::vector<double>& reference) {
  ErrorSummary summary;
  double diff2 = 0.0;
  double ref2 = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    if (std::isnan(gpu[i])) {
      ++summary.unwritten;
      continue;
    }
    const double d = gpu[i] - reference[i];
    diff2 += d * d;
    ref2 += reference[i] * reference[i];
    summary.max_abs = std::max(summary.max_abs, std::abs(d));
  }
  summary.relative = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return summary;
}

}  // namespace splitkv::testing
