// What a sweep records about the GPU it ran on. Filled by the CUDA side (cudaDeviceProp,
// driver and runtime versions); the host side only stores, prints and compares it.
#pragma once

#include <cstdint>
#include <string>

namespace splitkv::tuner {

struct DeviceFacts {
  int index = 0;                   // CUDA device ordinal the sweep used
  std::string name;                // e.g. "NVIDIA H200"; the CSV's gpu column
  int sm_count = 0;
  std::int64_t l2_bytes = 0;       // sizes the rotating buffers
  std::int64_t memory_bytes = 0;
  int sm_clock_mhz = 0;            // at the start of the sweep; throttling is judged against it
  int mem_clock_mhz = 0;
  std::string driver_version;      // e.g. "13.0"
  std::string cuda_runtime_version;
  std::string compute_capability;  // e.g. "9.0"
};

}  // namespace splitkv::tuner
