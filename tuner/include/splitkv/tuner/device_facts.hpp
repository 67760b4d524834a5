// What a sweep records about the GPU it ran on. Filled by the CUDA side (cudaDeviceProp,
// driver and runtime versions); the host side only stores, prints and compares it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace splitkv::tuner {

struct DeviceFacts {
  int index = 0;                   // the GPU's index on its machine: the CUDA ordinal, mapped
                                   // through CUDA_VISIBLE_DEVICES when that lists indices
  std::string name;                // e.g. "NVIDIA H200"; the CSV's gpu column
  std::string uuid;                // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it
  int sm_count = 0;
  std::int64_t l2_bytes = 0;       // sizes the rotating buffers
  std::int64_t memory_bytes = 0;
  int sm_clock_mhz = 0;            // at the start of the sweep; throttling is judged against it
  int mem_clock_mhz = 0;
  std::string driver_version;      // e.g. "13.0"
  std::string cuda_runtime_version;
  std::string compute_capability;  // e.g. "9.0"
};

// The entries of CUDA_VISIBLE_DEVICES, trimmed; nullopt when it is unset.
std::optional<std::vector<std::string>> cuda_visible_devices();

// What CUDA ordinal `ordinal` stands for in CUDA_VISIBLE_DEVICES: its entry there ("3",
// "GPU-...", "MIG-..."), or the ordinal itself where the variable is unset or shorter.
std::string visible_device_entry(int ordinal);

// The GPU's index on its machine: visible_device_entry when that is a number, else the ordinal.
int machine_device_index(int ordinal);

}  // namespace splitkv::tuner
