// Host arithmetic of the OCP fp8 e4m3 format the fp8 K/V cache stores: 1 sign bit, 4 exponent bits
// of bias 7, 3 mantissa bits, subnormals, no infinity, NaN only at 0x7F / 0xFF. The largest finite
// value is 448, the smallest subnormal 2^-9. No CUDA types: the reference, the tests and the tuner's
// host code share these, and the kernels' hardware conversion must agree with them bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace splitkv {

inline constexpr double kE4m3Max = 448.0;

inline bool e4m3_is_nan(std::uint8_t code) { return (code & 0x7F) == 0x7F; }

// The exact value of a code (NaN, with the code's sign, for 0x7F / 0xFF).
inline double e4m3_to_double(std::uint8_t code) {
  const double sign = (code & 0x80) != 0 ? -1.0 : 1.0;
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::copysign(std::numeric_limits<double>::quiet_NaN(), sign);
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -9);
  return sign * std::ldexp(static_cast<double>(8 + mantissa), exponent - 10);
}

// Round to nearest, ties to even, saturating finite values (and infinities) at +-448; NaN gives
// 0x7F with the input's sign. Serving engines quantize their caches this way (saturating, since
// e4m3 has no infinity to overflow to).
inline std::uint8_t double_to_e4m3(double x) {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<std::uint8_t>(sign | 0x7F);
  const double magnitude = std::fabs(x);
  if (magnitude >= kE4m3Max) return static_cast<std::uint8_t>(sign | 0x7E);
  int exponent = 0;  // magnitude = f * 2^exponent, f in [0.5, 1)
  std::frexp(magnitude, &exponent);
  const int unbiased = exponent - 1;  // magnitude in [2^unbiased, 2^(unbiased + 1))
  if (magnitude == 0.0 || unbiased < -6) {
    // Subnormal range: steps of 2^-9; a quotient of 8 is the smallest normal, code 0x08.
    const double steps = std::nearbyint(std::ldexp(magnitude, 9));  // default mode: ties to even
    return static_cast<std::uint8_t>(sign | static_cast<int>(steps));
  }
  // Normal: 8 steps of 2^(unbiased - 3) per binade; 16 steps carry into the next binade, and below
  // 448 that never passes the largest finite code (448 = 14 steps of 2^5).
  int steps = static_cast<int>(std::nearbyint(std::ldexp(magnitude, 3 - unbiased)));
  int biased = unbiased + 7;
  if (steps == 16) {
    steps = 8;
    ++biased;
  }
  return static_cast<std::uint8_t>(sign | (biased << 3) | (steps - 8));
}

}  // namespace splitkv
