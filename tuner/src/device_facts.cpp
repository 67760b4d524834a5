#include "splitkv/tuner/device_facts.hpp"

#include <cstdlib>
#include <string_view>

namespace splitkv::tuner {

std::optional<std::vector<std::string>> cuda_visible_devices() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return std::nullopt;
  std::vector<std::string> entries;
  std::string_view list(visible);
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view entry = list.substr(0, comma);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    entries.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return entries;
}

std::string visible_device_entry(int ordinal) {
  const auto entries = cuda_visible_devices();
  if (!entries || ordinal < 0 || std::size_t(ordinal) >= entries->size() || (*entries)[std::size_t(ordinal)].empty()) {
    return std::to_string(ordinal);
  }
  return (*entries)[std::size_t(ordinal)];
}

int machine_device_index(int ordinal) {
  const std::string entry = visible_device_entry(ordinal);
  if (entry.empty() || entry.size() > 6 || entry.find_first_not_of("0123456789") != std::string::npos) return ordinal;
  return std::atoi(entry.c_str());
}

}  // namespace splitkv::tuner
