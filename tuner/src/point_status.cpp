#include "splitkv/tuner/point_status.hpp"

#include <array>
#include <utility>

namespace splitkv::tuner {
namespace {

constexpr std::array<std::pair<PointStatus, std::string_view>, 6> kNames = {{
    {PointStatus::ok, "ok"},
    {PointStatus::oom, "oom"},
    {PointStatus::launch_failed, "launch_failed"},
    {PointStatus::invalid, "invalid"},
    {PointStatus::skipped, "skipped"},
    {PointStatus::throttled, "throttled"},
}};

}  // namespace

std::string_view to_string(PointStatus status) {
  for (const auto& [value, name] : kNames) {
    if (value == status) return name;
  }
  return "unknown";
}

std::optional<PointStatus> parse_point_status(std::string_view text) {
  for (const auto& [value, name] : kNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

bool is_terminal(PointStatus status) { return status != PointStatus::throttled; }

}  // namespace splitkv::tuner
