// CUDA side of the sweep: device facts, the Google Benchmark timing engine over CUDA-graph
// replays, the SM-clock watch, and run_gpu_sweep, which hands these to the host-only runner.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/graph_timer.hpp"
#include "splitkv/tuner/sample_stats.hpp"

namespace splitkv::tuner {
namespace {

// NVML through dlopen: the driver ships libnvidia-ml, the toolkit only a stub, and the CI
// machine has neither, so linking it would stop the binaries from starting there.
class Nvml {
 public:
  Nvml() {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library_) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(library_, "nvmlInit_v2"));
    handle_by_index_ = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(library_, "nvmlDeviceGetHandleByIndex_v2"));
    handle_by_uuid_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(library_, "nvmlDeviceGetHandleByUUID"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(library_, "nvmlDeviceGetClockInfo"));
    reasons_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
        dlsym(library_, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons_)
      reasons_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
          dlsym(library_, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    ready_ = init && handle_by_index_ && clock_ && init() == 0;
  }
  ~Nvml() {
    if (library_) dlclose(library_);
  }
  // NVML numbers devices by PCI order and ignores CUDA_VISIBLE_DEVICES, so a GPU is found by
  // its UUID; by its index on the machine only where that lookup is missing or fails.
  void* device(const std::string& uuid, int index) const {
    void* handle = nullptr;
    if (!ready_) return nullptr;
    if (handle_by_uuid_ && !uuid.empty() && handle_by_uuid_(uuid.c_str(), &handle) == 0) return handle;
    return handle_by_index_(static_cast<unsigned>(index), &handle) == 0 ? handle : nullptr;
  }
  int clock_mhz(void* device, int which /*0 graphics, 1 sm, 2 mem*/) const {
    unsigned mhz = 0;
    return device && clock_(device, which, &mhz) == 0 ? static_cast<int>(mhz) : 0;
  }
  // Slowdowns that make a sample unrepresentative: hardware slowdown, thermal (software and
  // hardware) and power brake. The software power cap is how the card normally runs under
  // load, so it does not count.
  bool slowed_down(void* device) const {
    unsigned long long reasons = 0;
    if (!device || !reasons_ || reasons_(device, &reasons) != 0) return false;
    constexpr unsigned long long kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40, kPowerBrake = 0x80;
    return (reasons & (kHwSlowdown | kSwThermal | kHwThermal | kPowerBrake)) != 0;
  }

 private:
  void* library_ = nullptr;
  bool ready_ = false;
  int (*handle_by_index_)(unsigned, void**) = nullptr;
  int (*handle_by_uuid_)(const char*, void**) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*reasons_)(void*, unsigned long long*) = nullptr;
};

const Nvml& nvml() {
  static Nvml instance;
  return instance;
}

// The UUID as nvidia-smi -L prints it: GPU-8-4-4-4-12 hex digits.
std::string uuid_string(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

std::string version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

bool query_device(int index, DeviceFacts* facts, std::string* error) {
  cudaDeviceProp properties{};
  cudaError_t status = cudaGetDeviceProperties(&properties, index);
  if (status != cudaSuccess) {
    *error = "device " + std::to_string(index) + ": " + describe_cuda_error(status);
    return false;
  }
  facts->index = machine_device_index(index);
  facts->name = properties.name;
  facts->uuid = uuid_string(properties.uuid);
  facts->sm_count = properties.multiProcessorCount;
  facts->l2_bytes = properties.l2CacheSize;
  facts->memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
  facts->compute_capability = std::to_string(properties.major) + "." + std::to_string(properties.minor);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  facts->driver_version = version_string(driver);
  facts->cuda_runtime_version = version_string(runtime);
  void* device = nvml().device(facts->uuid, facts->index);
  facts->sm_clock_mhz = nvml().clock_mhz(device, 1);
  facts->mem_clock_mhz = nvml().clock_mhz(device, 2);
  if (facts->sm_clock_mhz == 0) {
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) == cudaSuccess) facts->sm_clock_mhz = khz / 1000;
  }
  return true;
}

// Collects the per-repetition manual times of the benchmark it runs; aggregates are ours.
class RepetitionCollector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs)
      if (run.run_type == Run::RT_Iteration) per_call_us.push_back(run.GetAdjustedRealTime());
  }
  std::vector<double> per_call_us;
};

// Errors that poison the CUDA context: nothing after them can be measured, so the sweep must
// stop (keeping its rows) instead of recording every later point as failed.
bool is_sticky(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

void stop_if_sticky() {
  const cudaError_t error = cudaDeviceSynchronize();
  if (is_sticky(error))
    throw std::runtime_error("unrecoverable CUDA error, the context is lost: " + describe_cuda_error(error));
  cudaGetLastError();  // clear a non-sticky error so the next point starts clean
}

// One point: capture back-to-back calls in a graph, warm up, then let Google Benchmark run
// `repetitions` repetitions of timed replays (manual time from CUDA events, per call).
TimingResult time_point_with_benchmark(KernelUnderTest& kernel, const SweepPoint& point, int copies,
                                       const MeasurementProtocol& protocol, void* nvml_device, cudaStream_t stream) {
  // Enough calls per graph that one replay lasts ~300 µs, so the graph launch itself stays
  // under ~2% of the sample; estimated from the bytes at 4 TB/s plus a launch's latency.
  const double estimated_call_us = 5.0 + static_cast<double>(point.kv_bytes()) / 4.0e6;
  const int min_calls = std::clamp(static_cast<int>(std::ceil(300.0 / estimated_call_us)), 2, 64);
  GraphReplayTimer timer;
  std::string failure = timer.capture(
      [&](int copy, cudaStream_t s) {
        const KernelOutcome outcome = kernel.launch(copy, point.num_splits, s);
        return outcome.ok() ? std::string() : outcome.message;
      },
      copies, min_calls, stream);
  for (int i = 0; i < protocol.warmup_replays && failure.empty(); ++i) failure = timer.replay();
  if (!failure.empty()) {
    stop_if_sticky();
    return TimingResult::failure(PointStatus::launch_failed, failure);
  }

  // Replays per repetition: enough that one repetition lasts at least min_time_s (a probe replay
  // measures one; with min_time_s = 0 every repetition is a single replay and no probe is spent).
  int replays = 1;
  if (protocol.min_time_s > 0) {
    double probe_us = 0;
    if (!(failure = timer.timed_replay(&probe_us)).empty()) {
      stop_if_sticky();
      return TimingResult::failure(PointStatus::launch_failed, failure);
    }
    const double replay_s = probe_us * timer.calls() * 1e-6;
    replays = std::max(1, static_cast<int>(std::ceil(protocol.min_time_s / std::max(replay_s, 1e-9))));
  }

  bool slowed = false;
  benchmark::RegisterBenchmark(point.key().c_str(), [&](benchmark::State& state) {
    for (auto _ : state) {
      double total_us = 0;
      for (int r = 0; r < replays && failure.empty(); ++r) {
        double us = 0;
        failure = timer.timed_replay(&us);
        total_us += us;
      }
      if (!failure.empty()) {
        state.SkipWithError(failure.c_str());
        break;
      }
      state.SetIterationTime(total_us / replays * 1e-6);
      slowed = slowed || nvml().slowed_down(nvml_device);
    }
  })
      ->UseManualTime()
      ->Iterations(1)
      ->Repetitions(protocol.repetitions)
      ->ReportAggregatesOnly(false)
      ->Unit(benchmark::kMicrosecond);
  RepetitionCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  benchmark::ClearRegisteredBenchmarks();
  if (!failure.empty()) {
    stop_if_sticky();
    return TimingResult::failure(PointStatus::launch_failed, failure);
  }

  const SampleStats stats = summarize(collector.per_call_us);
  TimingResult result;
  result.time_us_median = stats.median;
  result.time_us_p10 = stats.p10;
  result.time_us_p90 = stats.p90;
  result.cv = stats.cv;
  result.repetitions = stats.count;
  if (slowed) {
    result.status = PointStatus::throttled;
    result.message = "NVML reported a thermal/hardware clock slowdown while timing";
  }
  return result;
}

}  // namespace

bool built_with_cuda() { return true; }

DeviceListing list_gpu_devices() {
  DeviceListing listing;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    listing.error = "no usable CUDA device: " + describe_cuda_error(error);
    return listing;
  }
  for (int i = 0; i < count; ++i) {
    DeviceFacts facts;
    if (!query_device(i, &facts, &listing.error)) return listing;
    listing.devices.push_back(facts);
  }
  listing.ok = true;
  if (count == 0) {
    listing.ok = false;
    listing.error = "no CUDA device present";
  }
  return listing;
}

GpuSweepResult run_gpu_sweep(const GpuSweepRequest& request) {
  GpuSweepResult result;
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    result.error = error != cudaSuccess ? "no usable CUDA device: " + describe_cuda_error(error) : "no CUDA device present";
    return result;
  }
  if (request.device < 0 || request.device >= count) {
    result.error = "--device " + std::to_string(request.device) + " does not exist (" + std::to_string(count) +
                   " device(s) present)";
    return result;
  }
  if ((error = cudaSetDevice(request.device)) != cudaSuccess) {
    result.error = "cudaSetDevice: " + describe_cuda_error(error);
    return result;
  }
  SweepRunOptions options;
  if (!query_device(request.device, &options.device, &result.error)) return result;

  KernelRegistry registry;
  register_gpu_kernels(registry);
  if (request.register_more_kernels) request.register_more_kernels(registry);
  std::vector<std::unique_ptr<KernelUnderTest>> owned;
  std::vector<KernelUnderTest*> kernels;
  for (const std::string& name : request.kernel_names) {
    try {
      owned.push_back(registry.create(name));
    } catch (const std::invalid_argument& e) {
      result.error = e.what();
      return result;
    }
    kernels.push_back(owned.back().get());
  }

  cudaStream_t stream = nullptr;
  if ((error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {
    result.error = "cudaStreamCreate: " + describe_cuda_error(error);
    return result;
  }
  options = sweep_run_options(request, options.device, &std::cerr);
  const MeasurementProtocol protocol = request.grid.protocol;
  void* const nvml_device = nvml().device(options.device.uuid, options.device.index);
  SweepRunner runner(options);
  result.started = true;
  result.summary = runner.run(request.grid, request.plan, kernels,
                              [&](KernelUnderTest& kernel, const SweepPoint& point, int copies) {
                                return time_point_with_benchmark(kernel, point, copies, protocol, nvml_device,
                                                                 stream);
                              });
  cudaStreamDestroy(stream);
  return result;
}

}  // namespace splitkv::tuner
