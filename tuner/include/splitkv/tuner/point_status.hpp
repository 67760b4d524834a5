// Outcome of one sweep point: the `status` column of the results CSV, and what kernels
// and timers report back to the runner. One vocabulary for both, so a failure travels
// from the kernel to the CSV without translation.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace splitkv::tuner {

enum class PointStatus {
  ok,             // timed; the time columns hold the measurement
  oom,            // buffers for the point did not fit on the device
  launch_failed,  // the kernel or the graph replay returned an error that was not sticky
  invalid,        // the kernel rejected the shape (validate() said no)
  skipped,        // the kernel under test does not support the shape
  throttled,      // the SM clock dropped while timing even after retries; re-measured on resume
};

std::string_view to_string(PointStatus status);
std::optional<PointStatus> parse_point_status(std::string_view text);

// Terminal outcomes are final for a point: a resumed sweep does not measure it again.
// Throttled samples are not terminal, because a later run may get a clean measurement.
bool is_terminal(PointStatus status);

// What a kernel under test reports from prepare/launch.
struct KernelOutcome {
  PointStatus status = PointStatus::ok;
  std::string message;

  bool ok() const { return status == PointStatus::ok; }
  static KernelOutcome success() { return {}; }
  static KernelOutcome failure(PointStatus status, std::string message) {
    return {status, std::move(message)};
  }
};

}  // namespace splitkv::tuner
