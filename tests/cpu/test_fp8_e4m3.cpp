// The host e4m3 arithmetic the fp8 reference and tests rest on: every code decodes to the value the
// format defines, and quantizing rounds to nearest even and saturates like serving engines do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "reference_attention.hpp"
#include "splitkv/fp8_e4m3.hpp"

namespace splitkv {
namespace {

TEST(Fp8E4m3, EveryCodeRoundTrips) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const double value = e4m3_to_double(code);
    if (std::isnan(value)) {
      ++nans;
      EXPECT_TRUE(e4m3_is_nan(code)) << c;
      EXPECT_EQ(code, double_to_e4m3(value)) << c;  // NaN keeps its sign
      continue;
    }
    EXPECT_FALSE(e4m3_is_nan(code)) << c;
    EXPECT_EQ(code, double_to_e4m3(value)) << c << " = " << value;
  }
  EXPECT_EQ(2, nans);  // 0x7F and 0xFF only: no infinities
}

TEST(Fp8E4m3, KnownValues) {
  EXPECT_EQ(448.0, e4m3_to_double(0x7E));
  EXPECT_EQ(-448.0, e4m3_to_double(0xFE));
  EXPECT_EQ(std::ldexp(1.0, -9), e4m3_to_double(0x01));   // smallest subnormal
  EXPECT_EQ(7 * std::ldexp(1.0, -9), e4m3_to_double(0x07));  // largest subnormal
  EXPECT_EQ(std::ldexp(1.0, -6), e4m3_to_double(0x08));   // smallest normal
  EXPECT_EQ(1.0, e4m3_to_double(0x38));
  EXPECT_EQ(1.125, e4m3_to_double(0x39));
  EXPECT_EQ(-2.0, e4m3_to_double(0xC0));
  EXPECT_EQ(0.0, e4m3_to_double(0x00));
  EXPECT_TRUE(std::signbit(e4m3_to_double(0x80)));
  EXPECT_TRUE(std::isnan(e4m3_to_double(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_double(0xFF)));
}

TEST(Fp8E4m3, QuantizeRoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(0x7E, double_to_e4m3(448.0));
  EXPECT_EQ(0x7E, double_to_e4m3(460.0));  // past the largest finite value: saturate, no NaN
  EXPECT_EQ(0x7E, double_to_e4m3(1e30));
  EXPECT_EQ(0x7E, double_to_e4m3(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(0xFE, double_to_e4m3(-1e30));
  EXPECT_EQ(0x7F, double_to_e4m3(std::numeric_limits<double>::quiet_NaN()));
  // Ties between 1 and 1.125 go to the even mantissa (1), between 1.125 and 1.25 to 1.25.
  EXPECT_EQ(0x38, double_to_e4m3(1.0625));
  EXPECT_EQ(0x3A, double_to_e4m3(1.1875));
  EXPECT_EQ(0x39, double_to_e4m3(1.07));
  // Subnormal ties: half the smallest subnormal rounds to zero (even), 1.5 of it to 2.
  EXPECT_EQ(0x00, double_to_e4m3(std::ldexp(1.0, -10)));
  EXPECT_EQ(0x02, double_to_e4m3(1.5 * std::ldexp(1.0, -9)));
  EXPECT_EQ(0x01, double_to_e4m3(0.6 * std::ldexp(1.0, -9)));
  // The largest subnormal's neighbour above is the smallest normal.
  EXPECT_EQ(0x08, double_to_e4m3(7.6 * std::ldexp(1.0, -9)));
  // Carry from mantissa 7 into the next binade: 1.9375 lies halfway between 1.875 and 2.
  EXPECT_EQ(0x40, double_to_e4m3(1.9375));
  EXPECT_EQ(0x80, double_to_e4m3(-0.0));
}

TEST(Fp8E4m3, QuantizeIsNearestOverRandomValues) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> exponent(-12.0, 9.5);
  for (int i = 0; i < 20000; ++i) {
    const double x = (rng() % 2 ? -1.0 : 1.0) * std::exp2(exponent(rng));
    const std::uint8_t code = double_to_e4m3(x);
    const double chosen = e4m3_to_double(code);
    const double error = std::fabs(chosen - std::min(std::fabs(x), kE4m3Max) * (x < 0 ? -1.0 : 1.0));
    for (int c = 0; c < 256; ++c) {
      const double other = e4m3_to_double(static_cast<std::uint8_t>(c));
      if (std::isnan(other) || std::fabs(x) >= kE4m3Max) continue;
      ASSERT_LE(error, std::fabs(other - x)) << x << " -> " << chosen << ", but " << other << " is nearer";
    }
  }
}

TEST(Fp8E4m3, ReferenceAppliesDescalesPerSequenceAndKvHead) {
  reference::ProblemShape shape;
  shape.batch = 2;
  shape.num_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 64;
  shape.capacity = 100;
  reference::HostProblem fp8 = reference::random_problem(shape, 3);
  const reference::Fp8Codes codes = reference::make_fp8_cache(fp8, 4, 4.0, 0.25, 4.0);
  ASSERT_EQ(fp8.k.size(), codes.k.size());
  for (std::size_t i = 0; i < codes.k.size(); ++i) {
    ASSERT_EQ(fp8.k[i], e4m3_to_double(codes.k[i]));
    ASSERT_EQ(fp8.v[i], e4m3_to_double(codes.v[i]));
  }
  // The same problem with the descales multiplied into plain K/V values must give the same answer.
  reference::HostProblem plain = fp8;
  plain.kv_dtype = KvDtype::same_as_q;
  for (int b = 0; b < plain.batch; ++b)
    for (int t = 0; t < plain.capacity_tokens(); ++t)
      for (int h = 0; h < plain.num_kv_heads; ++h) {
        const std::size_t at = reference::kv_offset(plain, b, t, h);
        for (int i = 0; i < plain.head_dim; ++i) {
          plain.k[at + i] *= fp8.k_descale[b * plain.num_kv_heads + h];
          plain.v[at + i] *= fp8.v_descale[b * plain.num_kv_heads + h];
        }
      }
  std::vector<double> out_fp8, lse_fp8, out_plain, lse_plain;
  reference::attention(fp8, out_fp8, lse_fp8);
  reference::attention(plain, out_plain, lse_plain);
  for (std::size_t i = 0; i < out_fp8.size(); ++i) EXPECT_NEAR(out_fp8[i], out_plain[i], 1e-12);
  for (std::size_t i = 0; i < lse_fp8.size(); ++i) EXPECT_NEAR(lse_fp8[i], lse_plain[i], 1e-12);
  // And the descales matter: a different K descale changes the output.
  reference::HostProblem rescaled = fp8;
  rescaled.k_descale[0] *= 2.0;
  std::vector<double> out_rescaled, lse_rescaled;
  reference::attention(rescaled, out_rescaled, lse_rescaled);
  EXPECT_NE(out_fp8[0], out_rescaled[0]);
}

TEST(Fp8E4m3, ReferenceRejectsMissingDescales) {
  reference::ProblemShape shape;
  reference::HostProblem p = reference::random_problem(shape, 1);
  p.kv_dtype = KvDtype::fp8_e4m3;
  EXPECT_THROW(reference::validate(p), std::invalid_argument);
}

}  // namespace
}  // namespace splitkv
