// The seam between the host-only sweep driver and the CUDA side. The CLI calls these; a
// build without CUDA links gpu_sweep_unavailable.cpp, whose versions say so, and a CUDA
// build links tuner/src/gpu_*.cu instead (GPU timer, device queries, kernel adapters).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "splitkv/tuner/device_facts.hpp"
#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"

namespace splitkv::tuner {

inline constexpr const char* kDefaultKernelName = "splitkv";
inline constexpr const char* kNoCudaMessage = "this build has no CUDA support";

struct GpuSweepRequest {
  GridSpec grid;
  SweepPlan plan;  // expanded, pruned and already restricted to `shard`
  ShardSpec shard;
  ShardBy shard_by = ShardBy::index;
  std::string out_csv;
  bool resume = false;
  int device = 0;
  SearchMode search = SearchMode::exhaustive;
  std::vector<std::string> kernel_names{kDefaultKernelName};
  const std::atomic<bool>* stop_requested = nullptr;
  // Kernels from layers above the tuner (heuristics' device-side policies), added to the
  // registry after register_gpu_kernels; may be empty.
  std::function<void(KernelRegistry&)> register_more_kernels;
};

// The runner's options for a sweep of `request` on `device`, progress lines to `progress`:
// what the CUDA sweep and the fake GPU (fake_gpu.hpp) both run with.
inline SweepRunOptions sweep_run_options(const GpuSweepRequest& request, const DeviceFacts& device,
                                         std::ostream* progress) {
  SweepRunOptions options;
  options.device = device;
  options.out_csv = request.out_csv;
  options.resume = request.resume;
  options.search = request.search;
  options.shard = request.shard;
  options.shard_by = request.shard_by;
  options.stop_requested = request.stop_requested;
  options.progress = progress;
  return options;
}

struct GpuSweepResult {
  bool started = false;  // false: nothing was timed; `error` says why (no CUDA, no device)
  std::string error;
  SweepSummary summary;  // when started
};

// The CUDA implementation is expected to: select request.device and fill DeviceFacts;
// create request.kernel_names from a registry filled by register_gpu_kernels(); take
// sweep_run_options(request, device, &std::cerr); and return SweepRunner(options).run(grid, plan,
// kernels, gpu_timer). It may throw what SweepRunner::run throws before timing
// (SweepError, CsvError, SidecarError); the CLI reports those as invalid input.
GpuSweepResult run_gpu_sweep(const GpuSweepRequest& request);

struct DeviceListing {
  bool ok = false;
  std::string error;
  std::vector<DeviceFacts> devices;
};

DeviceListing list_gpu_devices();

// Adds every kernel this build can time to `registry`; none without CUDA.
void register_gpu_kernels(KernelRegistry& registry);

// Adds the test-only "fault_injection" kernel when SPLITKV_ENABLE_FAULT_KERNEL=1
// (tuner/include/splitkv/tuner/fault_kernel.hpp); register_gpu_kernels calls it.
void register_fault_kernel_if_enabled(KernelRegistry& registry);

bool built_with_cuda();

}  // namespace splitkv::tuner
