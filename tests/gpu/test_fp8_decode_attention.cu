// GPU correctness of the split-KV kernels on fp8 (e4m3) caches against the float64 reference on the
// dequantized inputs (the exact e4m3 values times per-(sequence, kv head) descales), on fresh random
// inputs, with every output (and every partial of the workspace) poisoned first so an unwritten
// element fails the test.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "splitkv/fp8_e4m3.hpp"
#include "splitkv/split_partition.hpp"

namespace splitkv {
namespace {

using reference::HostProblem;
using reference::ProblemShape;
using testing::DeviceBuffer;

// Values in the cache are e4m3(uniform[-1, 1] * kCodeRange): exponents down to the subnormals.
constexpr double kCodeRange = 8.0;
constexpr double kDescaleLow = 0.25;
constexpr double kDescaleHigh = 4.0;
constexpr double kTolerance = 2e-2;

enum class SplitMode { fixed, automatic, per_sequence };

struct Fp8Case {
  ProblemShape shape;
  DType dtype = DType::bf16;
  int num_splits = 1;  // fixed count, or the grid's bound for the other modes
  SplitMode mode = SplitMode::fixed;
  std::string describe() const {
    const char* modes[] = {"fixed", "auto", "per-sequence"};
    return std::string(shape.layout == KvLayout::paged ? "paged(" + std::to_string(shape.page_size) + ")"
                                                       : "contiguous") +
           (dtype == DType::bf16 ? " bf16" : " fp16") + " kv=fp8_e4m3 B=" + std::to_string(shape.batch) +
           " H=" + std::to_string(shape.num_heads) + "/" + std::to_string(shape.num_kv_heads) +
           " D=" + std::to_string(shape.head_dim) + " cap=" + std::to_string(shape.capacity) + " " +
           modes[static_cast<int>(mode)] + " splits=" + std::to_string(num_splits);
  }
};

// Device copies of one fp8 problem: q in `dtype`, K/V as e4m3 codes, fp32 descales.
class Fp8DeviceProblem {
 public:
  Fp8DeviceProblem(HostProblem& problem, const reference::Fp8Codes& codes, DType dtype, int max_splits)
      : problem_(problem),
        dtype_(dtype),
        q_(problem.q.size()),
        out_(problem.q.size()),
        k_(codes.k.size()),
        v_(codes.v.size()),
        seqlens_(problem.seqlens.size()),
        block_table_(std::max<std::size_t>(problem.block_table.size(), 1)),
        splits_(problem.seqlens.size()),
        lse_(static_cast<std::size_t>(problem.batch) * problem.num_heads),
        k_descale_(problem.k_descale.size()),
        v_descale_(problem.v_descale.size()),
        workspace_(workspace_floats(problem, max_splits)) {
    q_.upload(testing::round_to_dtype(problem.q, dtype));
    k_.upload(codes.k);
    v_.upload(codes.v);
    seqlens_.upload(problem.seqlens);
    if (!problem.block_table.empty()) block_table_.upload(problem.block_table);
    k_descale_.upload(std::vector<float>(problem.k_descale.begin(), problem.k_descale.end()));
    v_descale_.upload(std::vector<float>(problem.v_descale.begin(), problem.v_descale.end()));
  }

  bool allocated() const {
    return q_.data && out_.data && k_.data && v_.data && seqlens_.data && block_table_.data && splits_.data &&
           lse_.data && k_descale_.data && v_descale_.data && (workspace_.count == 0 || workspace_.data);
  }

  void upload_splits(const std::vector<int32_t>& splits) { splits_.upload(splits); }
  const int32_t* splits() const { return splits_.data; }

  DecodeParams params(int num_splits) const {
    DecodeParams p = reference::shape_params(problem_);
    p.dtype = dtype_;
    p.kv_dtype = KvDtype::fp8_e4m3;
    p.num_splits = num_splits;
    p.q = q_.data;
    p.k = k_.data;
    p.v = v_.data;
    p.k_descale = k_descale_.data;
    p.v_descale = v_descale_.data;
    p.out = out_.data;
    p.cache_seqlens = seqlens_.data;
    p.block_table = problem_.layout == KvLayout::paged ? block_table_.data : nullptr;
    p.host_cache_seqlens = problem_.seqlens.data();
    p.lse = lse_.data;
    p.workspace = num_splits > 1 ? workspace_.data : nullptr;
    return p;
  }

  void poison() {
    out_.poison();
    lse_.poison();
    if (workspace_.count) workspace_.poison();
  }

  std::vector<double> out() const {
    const std::vector<std::uint16_t> bits = out_.download();
    std::vector<double> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) values[i] = testing::from_bits(bits[i], dtype_);
    return values;
  }
  std::vector<float> lse() const { return lse_.download(); }

 private:
  static std::size_t workspace_floats(const HostProblem& p, int max_splits) {
    DecodeParams shape = reference::shape_params(p);
    shape.num_splits = max_splits;
    return decode_workspace_bytes(shape) / sizeof(float);
  }

  HostProblem& problem_;
  DType dtype_;
  DeviceBuffer<std::uint16_t> q_, out_;
  DeviceBuffer<std::uint8_t> k_, v_;
  DeviceBuffer<int32_t> seqlens_, block_table_, splits_;
  DeviceBuffer<float> lse_, k_descale_, v_descale_, workspace_;
};

struct DeviceAutoTable {
  AutoSplitsTable* pointer = nullptr;
  explicit DeviceAutoTable(const AutoSplitsTable& host) {
    EXPECT_EQ(cudaSuccess, cudaMalloc(&pointer, sizeof host));
    EXPECT_EQ(cudaSuccess, cudaMemcpy(pointer, &host, sizeof host, cudaMemcpyHostToDevice));
  }
  ~DeviceAutoTable() { cudaFree(pointer); }
  DeviceAutoTable(const DeviceAutoTable&) = delete;
  DeviceAutoTable& operator=(const DeviceAutoTable&) = delete;
};

// Case i: layouts, dtypes, head_dims, group sizes and split modes cycle so every combination
// appears; batch, heads, capacity, page size, lengths and counts are random.
Fp8Case random_fp8_case(int i, std::mt19937_64& rng) {
  const int head_dims[] = {64, 128, 256};
  const int groups[] = {1, 4, 8, 16};
  const int page_sizes[] = {4, 8, 16, 32, 64, 128, 256};
  const int fixed_splits[] = {1, 2, 3, 7, 16, 64, 128, kMaxSplits};
  Fp8Case c;
  c.shape.layout = i % 2 == 0 ? KvLayout::contiguous : KvLayout::paged;
  c.dtype = (i / 2) % 2 == 0 ? DType::bf16 : DType::fp16;
  c.shape.head_dim = head_dims[(i / 4) % 3];
  const int group = groups[(i / 12) % 4];
  c.mode = static_cast<SplitMode>((i / 48) % 3);
  c.shape.num_kv_heads = 1 + static_cast<int>(rng() % 3);
  c.shape.num_heads = group * c.shape.num_kv_heads;
  c.shape.batch = 1 + static_cast<int>(rng() % 5);
  c.shape.page_size = page_sizes[rng() % 7];
  c.shape.capacity = 1 + static_cast<int>(rng() % 2500);
  c.shape.lengths = reference::LengthMode::ragged;
  if (rng() % 8 == 0) {  // uniform lengths: the persistent auto kernel's guess holds
    c.shape.lengths = reference::LengthMode::full;
  }
  c.num_splits = rng() % 2 == 0 ? fixed_splits[rng() % 8] : 1 + static_cast<int>(rng() % 128);
  return c;
}

// Every cache row that holds no token of a sequence (past its length, or a page no sequence
// uses) gets NaN codes: a kernel must never let them reach an output, and 0 x NaN = NaN, so a
// masked probability is not enough where a row is read at all.
void poison_rows_past_lengths(const HostProblem& problem, reference::Fp8Codes& codes) {
  const std::size_t row_bytes = static_cast<std::size_t>(problem.num_kv_heads) * problem.head_dim;
  std::vector<bool> live(codes.k.size() / row_bytes, false);
  for (int b = 0; b < problem.batch; ++b)
    for (int t = 0; t < problem.seqlens[b]; ++t) live[reference::kv_offset(problem, b, t, 0) / row_bytes] = true;
  for (std::size_t row = 0; row < live.size(); ++row)
    if (!live[row]) {
      std::fill_n(codes.k.begin() + row * row_bytes, row_bytes, std::uint8_t{0x7F});
      std::fill_n(codes.v.begin() + row * row_bytes, row_bytes, std::uint8_t{0x7F});
    }
}

// Runs one case on poisoned outputs and checks every output element and LSE; returns the output's
// relative error.
double check_fp8_case(const Fp8Case& c, std::uint64_t seed) {
  HostProblem problem = reference::random_problem(c.shape, seed);
  reference::Fp8Codes codes =
      reference::make_fp8_cache(problem, seed ^ 0x5eed, kCodeRange, kDescaleLow, kDescaleHigh);
  poison_rows_past_lengths(problem, codes);
  Fp8DeviceProblem device(problem, codes, c.dtype, c.num_splits);
  EXPECT_TRUE(device.allocated()) << c.describe();
  if (!device.allocated()) return 1.0;
  DecodeParams params = device.params(c.num_splits);
  std::mt19937_64 rng(seed + 1);
  AutoSplitsTable table;
  for (auto& row : table.splits)
    for (auto& entry : row) entry = static_cast<unsigned char>(1 + rng() % 128);
  const DeviceAutoTable device_table(table);
  if (c.mode == SplitMode::automatic) {
    params.per_sequence_splits = true;
    params.auto_splits = device_table.pointer;
  } else if (c.mode == SplitMode::per_sequence) {
    std::vector<int32_t> splits(problem.batch);
    for (int32_t& s : splits) s = 1 + static_cast<int32_t>(rng() % c.num_splits);
    device.upload_splits(splits);
    params.per_sequence_splits = true;
    params.splits_per_sequence = device.splits();
  }

  std::vector<double> ref_out, ref_lse;
  reference::attention(problem, ref_out, ref_lse);
  device.poison();
  const Status status = decode_attention(params, nullptr);
  EXPECT_EQ(Status::ok, status) << c.describe() << ": " << last_error_message();
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize()) << c.describe();
  const std::vector<double> out = device.out();
  const std::vector<float> lse = device.lse();
  const testing::ErrorSummary error = testing::compare(out, ref_out);
  EXPECT_EQ(0u, error.unwritten) << c.describe() << ": output elements left unwritten";
  EXPECT_LE(error.relative, kTolerance) << c.describe() << " max_abs=" << error.max_abs;
  for (std::size_t r = 0; r < ref_lse.size(); ++r) {
    if (std::isinf(ref_lse[r])) {
      EXPECT_TRUE(std::isinf(lse[r]) && lse[r] < 0) << c.describe() << " lse[" << r << "]";
    } else {
      EXPECT_NEAR(lse[r], ref_lse[r], 2e-3 * (1.0 + std::abs(ref_lse[r]))) << c.describe() << " lse[" << r << "]";
    }
  }
  return error.relative;
}

TEST(Fp8DecodeAttentionGpu, RandomizedAgainstFloat64Reference) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937_64 rng(8);
  constexpr int kCases = 336;  // 7 passes over the 48 (layout, dtype, head_dim, group) combinations
  double worst = 0.0;
  std::string worst_case;
  for (int i = 0; i < kCases; ++i) {
    const Fp8Case c = random_fp8_case(i, rng);
    const double error = check_fp8_case(c, rng());
    if (error > worst) {
      worst = error;
      worst_case = c.describe();
    }
    if (::testing::Test::HasFailure()) break;  // the first failing case says enough
  }
  std::printf("[ fp8 ] %d cases, worst relative error %.3e (%s)\n", kCases, worst, worst_case.c_str());
}

// Every code (0x7F / 0xFF NaN aside) through the kernel's dequantization: one token per code value,
// attended by a query that selects it, so each output is one code's value times its descale.
TEST(Fp8DecodeAttentionGpu, EveryCodeDequantizesExactly) {
  SPLITKV_REQUIRE_GPU();
  for (const DType dtype : {DType::bf16, DType::fp16}) {
    ProblemShape shape;
    shape.batch = 1;
    shape.num_heads = 1;
    shape.num_kv_heads = 1;
    shape.head_dim = 64;
    shape.capacity = 254;
    shape.lengths = reference::LengthMode::full;
    HostProblem problem = reference::random_problem(shape, 9);
    reference::Fp8Codes codes = reference::make_fp8_cache(problem, 10, 1.0, 1.0, 1.0);
    // K all zero codes (uniform softmax); V row t holds code t (skipping the NaNs) in every column.
    int code = 0;
    for (int t = 0; t < shape.capacity; ++t, ++code) {
      if ((code & 0x7F) == 0x7F) ++code;
      for (int i = 0; i < shape.head_dim; ++i) {
        const std::size_t at = reference::kv_offset(problem, 0, t, 0) + i;
        codes.k[at] = 0;
        problem.k[at] = 0.0;
        codes.v[at] = static_cast<std::uint8_t>(code);
        problem.v[at] = e4m3_to_double(static_cast<std::uint8_t>(code));
      }
    }
    Fp8DeviceProblem device(problem, codes, dtype, 1);
    ASSERT_TRUE(device.allocated());
    std::vector<double> ref_out, ref_lse;
    reference::attention(problem, ref_out, ref_lse);
    device.poison();
    ASSERT_EQ(Status::ok, decode_attention(device.params(1), nullptr)) << last_error_message();
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    const testing::ErrorSummary error = testing::compare(device.out(), ref_out);
    EXPECT_EQ(0u, error.unwritten);
    EXPECT_LE(error.relative, 1e-3) << (dtype == DType::bf16 ? "bf16" : "fp16");
  }
}

TEST(Fp8DecodeAttentionArguments, RejectsMissingOrStrayDescales) {
  DecodeParams p;
  p.batch = 2;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.cache_capacity = 64;
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x1000);
  p.out = reinterpret_cast<void*>(0x2000);
  p.cache_seqlens = reinterpret_cast<const int32_t*>(0x3000);
  p.kv_dtype = KvDtype::fp8_e4m3;
  p.k_descale = reinterpret_cast<const float*>(0x4000);
  p.v_descale = reinterpret_cast<const float*>(0x5000);
  std::string message;
  EXPECT_EQ(Status::ok, validate(p, &message)) << message;
  p.v_descale = nullptr;
  EXPECT_EQ(Status::invalid_argument, validate(p, &message));
  EXPECT_NE(std::string::npos, message.find("v_descale is null")) << message;
  p.v_descale = reinterpret_cast<const float*>(0x5002);
  EXPECT_EQ(Status::invalid_argument, validate(p, &message));
  EXPECT_NE(std::string::npos, message.find("4-byte aligned")) << message;
  p.kv_dtype = KvDtype::same_as_q;
  EXPECT_EQ(Status::invalid_argument, validate(p, &message));
  EXPECT_NE(std::string::npos, message.find("kv_dtype is not fp8_e4m3")) << message;
  p.kv_dtype = static_cast<KvDtype>(7);
  EXPECT_EQ(Status::unsupported, validate(p, &message));
  EXPECT_EQ(Status::unsupported, decode_attention(p, DecodeKernel::unpacked_gqa, nullptr));
}

}  // namespace
}  // namespace splitkv
