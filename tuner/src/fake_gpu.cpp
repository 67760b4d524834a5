#include "splitkv/tuner/fake_gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "splitkv/split_partition.hpp"

namespace splitkv::tuner {
namespace {

std::vector<std::string> fake_models() {
  std::vector<std::string> names;
  const char* list = std::getenv("SPLITKV_FAKE_GPUS");
  if (list == nullptr) return names;
  std::string_view text(list);
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view name = text.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    if (!name.empty()) names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return names;
}

DeviceFacts fake_facts(int index, const std::string& name) {
  DeviceFacts facts;
  facts.index = index;
  facts.name = name;
  facts.uuid = fmt::format("GPU-fa4e0000-0000-4000-8000-{:012x}", index);
  facts.sm_count = 132;
  facts.l2_bytes = 1 << 20;  // small: few rotating copies per shape
  facts.memory_bytes = 150110011392;
  facts.sm_clock_mhz = 1980;
  facts.mem_clock_mhz = 3201;
  facts.driver_version = "fake";
  facts.cuda_runtime_version = "fake";
  facts.compute_capability = "9.0";
  return facts;
}

class FakeModelKernel : public KernelUnderTest {
 public:
  explicit FakeModelKernel(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  bool supports(const SweepPoint&, std::string*) const override { return true; }
  KernelOutcome prepare(const SweepPoint&, int) override { return KernelOutcome::success(); }
  KernelOutcome launch(int, int, void*) override { return KernelOutcome::success(); }
  void release() override {}

 private:
  std::string name_;
};

}  // namespace

bool fake_gpus_requested() { return std::getenv("SPLITKV_FAKE_GPUS") != nullptr; }

double fake_gpu_time_us(const SweepPoint& p) {
  constexpr double kSms = 132;
  constexpr double kBandwidth = 4e12;
  const int active = active_splits(p.context_len, p.num_splits);
  const double ctas = double(p.batch) * p.num_kv_heads * active;
  const double utilisation = std::min(1.0, ctas / kSms);
  const double read_us = double(p.kv_bytes()) / (kBandwidth * utilisation) * 1e6;
  const double combine_us =
      p.num_splits > 1 ? 1.0 + 0.05 * p.num_splits + double(p.workspace_bytes()) / kBandwidth * 1e6 : 0;
  return 4.0 + read_us + combine_us;
}

TimingResult fake_gpu_timing(const SweepPoint& point) {
  const double t = fake_gpu_time_us(point);
  TimingResult timing;
  timing.time_us_median = t;
  timing.time_us_p10 = t * 0.98;
  timing.time_us_p90 = t * 1.03;
  timing.cv = 0.01;
  timing.repetitions = 5;
  return timing;
}

DeviceListing list_fake_gpu_devices() {
  const std::vector<std::string> models = fake_models();
  std::vector<DeviceFacts> all;
  for (std::size_t i = 0; i < models.size(); ++i) all.push_back(fake_facts(int(i), models[i]));
  DeviceListing listing;
  const auto visible = cuda_visible_devices();
  if (!visible) {
    listing.devices = all;
  } else {
    // As CUDA does: the listed devices in the listed order, up to the first that does not exist.
    for (const std::string& entry : *visible) {
      const auto found = std::find_if(all.begin(), all.end(), [&](const DeviceFacts& d) {
        return d.uuid == entry || std::to_string(d.index) == entry;
      });
      if (found == all.end()) break;
      listing.devices.push_back(*found);
    }
  }
  listing.ok = !listing.devices.empty();
  if (!listing.ok) listing.error = "no CUDA device present (SPLITKV_FAKE_GPUS)";
  return listing;
}

GpuSweepResult run_fake_gpu_sweep(const GpuSweepRequest& request) {
  GpuSweepResult result;
  const DeviceListing listing = list_fake_gpu_devices();
  if (!listing.ok) {
    result.error = listing.error;
    return result;
  }
  const int count = int(listing.devices.size());
  if (request.device < 0 || request.device >= count) {
    result.error = fmt::format("--device {} does not exist ({} device(s) present)", request.device, count);
    return result;
  }
  std::vector<std::unique_ptr<KernelUnderTest>> owned;
  std::vector<KernelUnderTest*> kernels;
  for (const std::string& name : request.kernel_names) {
    owned.push_back(std::make_unique<FakeModelKernel>(name));
    kernels.push_back(owned.back().get());
  }
  const SweepRunOptions options = sweep_run_options(request, listing.devices[std::size_t(request.device)], &std::cerr);
  const char* point_us_text = std::getenv("SPLITKV_FAKE_POINT_US");
  const long point_us = point_us_text != nullptr ? std::max(0L, std::atol(point_us_text)) : 0L;
  SweepRunner runner(options);
  result.started = true;
  result.summary = runner.run(request.grid, request.plan, kernels, [point_us](KernelUnderTest&, const SweepPoint& point, int) {
    if (point_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(point_us));
    return fake_gpu_timing(point);
  });
  return result;
}

DeviceListing list_sweep_devices() { return fake_gpus_requested() ? list_fake_gpu_devices() : list_gpu_devices(); }

GpuSweepResult run_sweep_on_device(const GpuSweepRequest& request) {
  return fake_gpus_requested() ? run_fake_gpu_sweep(request) : run_gpu_sweep(request);
}

}  // namespace splitkv::tuner
