// A stand-in GPU for machines without one, so that multi-process and cluster runs of
// `splitkv sweep` can be tested on any CPU. Test hook, like SPLITKV_ENABLE_FAULT_KERNEL:
//
//   SPLITKV_FAKE_GPUS="NVIDIA H200,NVIDIA H200"  the devices a process sees, by model name
//   SPLITKV_FAKE_POINT_US=2000                  how long each point takes (a sleep; default 0)
//
// CUDA_VISIBLE_DEVICES selects and renumbers them as it does real ones (indices or the fake
// UUIDs). Every registered --kernel name is accepted and timed by a deterministic model of
// the split-KV curve (fake_gpu_time_us); nothing runs on a device.
#pragma once

#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

bool fake_gpus_requested();

// Microseconds: launch overhead, the KV read at a bandwidth that grows with the CTAs that
// hold work until 132 SMs are full, and a combine that grows with the split count.
double fake_gpu_time_us(const SweepPoint& point);
// That time as a timed point: p10 and p90 2% below and 3% above it, cv 0.01, 5 repetitions.
TimingResult fake_gpu_timing(const SweepPoint& point);

DeviceListing list_fake_gpu_devices();
GpuSweepResult run_fake_gpu_sweep(const GpuSweepRequest& request);

// The fake devices when SPLITKV_FAKE_GPUS is set, else the real ones (list_gpu_devices,
// run_gpu_sweep): what the CLI calls.
DeviceListing list_sweep_devices();
GpuSweepResult run_sweep_on_device(const GpuSweepRequest& request);

}  // namespace splitkv::tuner
