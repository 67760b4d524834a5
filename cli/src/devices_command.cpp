#include "devices_command.hpp"

#include <ostream>

#include <fmt/format.h>

#include "splitkv/tuner/fake_gpu.hpp"
#include "splitkv/tuner/gpu_sweep.hpp"
#include "splitkv/tuner/plan_report.hpp"

namespace splitkv::cli {

int run_devices_command(std::ostream& out, std::ostream& err) {
  const tuner::DeviceListing listing = tuner::list_sweep_devices();
  if (!listing.ok) {
    err << "splitkv devices: " << listing.error << "\n";
    return 1;
  }
  for (const tuner::DeviceFacts& d : listing.devices) {
    out << fmt::format(
        "device {}: {}\n  {}\n  compute capability {}, {} SMs, SM clock {} MHz, memory clock {} MHz\n"
        "  memory {}, L2 {}\n  driver {}, CUDA runtime {}\n",
        d.index, d.name, d.uuid, d.compute_capability, d.sm_count, d.sm_clock_mhz, d.mem_clock_mhz,
        tuner::format_bytes(d.memory_bytes), tuner::format_bytes(d.l2_bytes), d.driver_version,
        d.cuda_runtime_version);
  }
  return 0;
}

}  // namespace splitkv::cli
