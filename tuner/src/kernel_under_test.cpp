#include "splitkv/tuner/kernel_under_test.hpp"

#include <fmt/format.h>

namespace splitkv::tuner {

void KernelRegistry::add(const std::string& name, std::string description, Factory factory) {
  if (name.empty()) throw std::invalid_argument("kernel registry: empty kernel name");
  if (!factory) throw std::invalid_argument(fmt::format("kernel registry: {}: no factory", name));
  if (!entries_.emplace(name, Entry{std::move(description), std::move(factory)}).second) {
    throw std::invalid_argument(fmt::format("kernel registry: {} is registered twice", name));
  }
}

bool KernelRegistry::contains(const std::string& name) const { return entries_.count(name) > 0; }

std::unique_ptr<KernelUnderTest> KernelRegistry::create(const std::string& name) const {
  const auto entry = entries_.find(name);
  if (entry == entries_.end()) {
    std::string known;
    for (const auto& [known_name, unused] : entries_) known += (known.empty() ? "" : ", ") + known_name;
    throw std::invalid_argument(fmt::format("unknown kernel \"{}\" (registered: {})", name,
                                            known.empty() ? "none" : known));
  }
  return entry->second.factory();
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

const std::string& KernelRegistry::description(const std::string& name) const {
  const auto entry = entries_.find(name);
  if (entry == entries_.end()) throw std::invalid_argument(fmt::format("unknown kernel \"{}\"", name));
  return entry->second.description;
}

}  // namespace splitkv::tuner
