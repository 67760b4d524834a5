// bf16 on the host for the bench drivers: widening to double, and the relative L2 difference
// two kernel outputs are compared by.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace splitkv::bench {

inline double bf16_to_double(std::uint16_t bits) {
  const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, 4);
  return value;
}

// ||a - b|| / ||b|| over all elements; a NaN anywhere makes it infinite.
inline double relative_l2_difference(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  double difference = 0, reference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = bf16_to_double(a[i]) - bf16_to_double(b[i]);
    difference += std::isnan(d) ? INFINITY : d * d;
    reference += bf16_to_double(b[i]) * bf16_to_double(b[i]);
  }
  return std::sqrt(difference / reference);
}

}  // namespace splitkv::bench
