// FlashInfer's batch decode behind the tuner's adapters (tuner/flashinfer_kernel.hpp) against the
// float64 reference: both kernels under test, `flashinfer` at several split counts and
// `flashinfer_heuristic` on FlashInfer's own plan, on ragged paged batches whose inputs the test
// writes into the adapter's own buffers (its page table, its rotating copies), with the output
// poisoned before every call so an element FlashInfer leaves unwritten fails. Skips with the
// configure's reason in a build without the FlashInfer headers.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "splitkv/heuristics/baseline_policies.hpp"
#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/flashinfer_kernel.hpp"
#include "splitkv/tuner/graph_timer.hpp"

namespace splitkv {
namespace {

using reference::HostProblem;
using tuner::FlashinferDecodeKernel;
using tuner::SweepPoint;

#define SPLITKV_REQUIRE_FLASHINFER()                                              \
  do {                                                                           \
    const std::string reason = tuner::flashinfer_unavailable_reason();           \
    if (!reason.empty()) GTEST_SKIP() << reason;                                  \
  } while (0)

// One test configuration: a ragged paged bf16 batch and the split counts to run it at.
struct Config {
  int batch = 1;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_dim = 128;
  int page_size = 16;
  std::vector<std::int32_t> lengths;
  std::vector<int> split_counts;  // ascending; the last is the prepared shape's num_splits

  SweepPoint point() const {
    SweepPoint p;
    p.layout = KvLayout::paged;
    p.page_size = page_size;
    p.dtype = DType::bf16;
    p.batch = batch;
    p.num_heads = num_heads;
    p.num_kv_heads = num_kv_heads;
    p.head_dim = head_dim;
    p.context_len = *std::max_element(lengths.begin(), lengths.end());
    p.cache_capacity = p.context_len;
    p.length_distribution = {tuner::LengthKind::uniform, {}};
    p.num_splits = split_counts.back();
    p.lengths = std::make_shared<const std::vector<std::int32_t>>(lengths);
    return p;
  }

  std::string describe() const {
    std::string text = "paged" + std::to_string(page_size) + " B=" + std::to_string(batch) + " H=" +
                       std::to_string(num_heads) + "/" + std::to_string(num_kv_heads) + " D=" +
                       std::to_string(head_dim) + " lengths=";
    for (std::size_t b = 0; b < lengths.size(); ++b) text += (b ? "," : "") + std::to_string(lengths[b]);
    return text;
  }
};

int max_pages_of(const tuner::FlashinferPageTable& table) {
  int pages = 1;
  for (std::size_t b = 0; b + 1 < table.indptr.size(); ++b) pages = std::max(pages, table.indptr[b + 1] - table.indptr[b]);
  return pages;
}

// The reference problem on the adapter's own page table: its pool size, and a block table whose
// row b lists the CSR pages of sequence b. Inputs are drawn here, uniform in [-1, 1] (never zero
// filled), and rounded to bf16 so the reference sees exactly what the kernel reads.
struct ReferenceRun {
  HostProblem problem;
  std::vector<std::uint16_t> q_bits, k_bits, v_bits;
  std::vector<double> out, lse;
};

ReferenceRun reference_on(const Config& c, const tuner::FlashinferPageTable& table, std::uint64_t seed) {
  ReferenceRun run;
  HostProblem& p = run.problem;
  p.layout = KvLayout::paged;
  p.batch = c.batch;
  p.num_heads = c.num_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.page_size = c.page_size;
  p.max_pages_per_seq = max_pages_of(table);
  p.num_pages = table.num_pages;
  p.seqlens = c.lengths;
  p.block_table.assign(static_cast<std::size_t>(c.batch) * p.max_pages_per_seq, 0);
  for (int b = 0; b < c.batch; ++b) {
    for (int j = table.indptr[b]; j < table.indptr[b + 1]; ++j) {
      p.block_table[static_cast<std::size_t>(b) * p.max_pages_per_seq + (j - table.indptr[b])] = table.indices[j];
    }
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto fill = [&](std::vector<double>& values, std::size_t count) {
    values.resize(count);
    for (double& x : values) x = uniform(rng);
  };
  const std::size_t pool = static_cast<std::size_t>(p.num_pages) * p.page_size * p.num_kv_heads * p.head_dim;
  fill(p.q, static_cast<std::size_t>(p.batch) * p.num_heads * p.head_dim);
  fill(p.k, pool);
  fill(p.v, pool);
  reference::validate(p);
  run.q_bits = testing::round_to_dtype(p.q, DType::bf16);
  run.k_bits = testing::round_to_dtype(p.k, DType::bf16);
  run.v_bits = testing::round_to_dtype(p.v, DType::bf16);
  reference::attention(p, run.out, run.lse);
  return run;
}

void upload(const FlashinferDecodeKernel& kernel, int copy, const ReferenceRun& run) {
  const FlashinferDecodeKernel::CopyBuffers buffers = kernel.buffers(copy);
  ASSERT_NE(buffers.k_pages, nullptr);
  SPLITKV_CUDA_OK(cudaMemcpy(buffers.q, run.q_bits.data(), run.q_bits.size() * 2, cudaMemcpyHostToDevice));
  SPLITKV_CUDA_OK(cudaMemcpy(buffers.k_pages, run.k_bits.data(), run.k_bits.size() * 2, cudaMemcpyHostToDevice));
  SPLITKV_CUDA_OK(cudaMemcpy(buffers.v_pages, run.v_bits.data(), run.v_bits.size() * 2, cudaMemcpyHostToDevice));
}

void poison_output(const FlashinferDecodeKernel& kernel, const ReferenceRun& run) {
  SPLITKV_CUDA_OK(cudaMemset(kernel.buffers(0).out, 0xFF, run.out.size() * 2));  // bf16 NaN
}

// The output of the last call against the reference; returns the relative error.
double expect_output_matches(const FlashinferDecodeKernel& kernel, const ReferenceRun& run, const std::string& what) {
  std::vector<std::uint16_t> bits(run.out.size());
  EXPECT_EQ(cudaSuccess, cudaMemcpy(bits.data(), kernel.buffers(0).out, bits.size() * 2, cudaMemcpyDeviceToHost))
      << what;
  std::vector<double> gpu(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) gpu[i] = testing::from_bits(bits[i], DType::bf16);
  const testing::ErrorSummary error = testing::compare(gpu, run.out);
  EXPECT_EQ(0u, error.unwritten) << what << ": output elements left unwritten";
  // FlashInfer keeps its partial outputs in bf16, so a split call rounds twice.
  EXPECT_LE(error.relative, 1e-2) << what << " max_abs=" << error.max_abs;
  return error.relative;
}

// One call on `copy`, with the output poisoned first, checked against the reference.
double run_and_check(FlashinferDecodeKernel& kernel, int copy, int num_splits, const ReferenceRun& run,
                     cudaStream_t stream, const std::string& what) {
  poison_output(kernel, run);
  const tuner::KernelOutcome outcome = kernel.launch(copy, num_splits, stream);
  EXPECT_TRUE(outcome.ok()) << what << ": " << outcome.message;
  EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(stream)) << what;
  return expect_output_matches(kernel, run, what);
}

// What each schedule must be, from the definitions in flashinfer_kernel.hpp; the heuristic's
// chunk is the one the heuristics' host copy of FlashInfer's binary search finds on the same
// resident-CTA budget.
void expect_schedule(const FlashinferDecodeKernel& kernel, const Config& c, int num_splits, bool own_plan,
                     const std::string& what) {
  const tuner::FlashinferPageTable& table = kernel.page_table();
  const int max_pages = max_pages_of(table);
  const tuner::FlashinferSchedule s = kernel.schedule(num_splits);
  EXPECT_GE(s.chunk_pages, 1) << what;
  EXPECT_EQ(s.chunks_of_longest, ceil_div(max_pages, std::max(1, s.chunk_pages))) << what;
  int items = 0;
  for (int b = 0; b < c.batch; ++b) items += ceil_div(std::max(1, table.indptr[b + 1] - table.indptr[b]), s.chunk_pages);
  EXPECT_EQ(s.work_items, items) << what;
  if (!own_plan) {
    EXPECT_EQ(s.chunk_pages, ceil_div(max_pages, num_splits)) << what;
    EXPECT_EQ(s.partitioned, num_splits > 1) << what;
    EXPECT_EQ(s.grid_x, s.work_items) << what;
    EXPECT_LE(s.chunks_of_longest, num_splits) << what;
    return;
  }
  ASSERT_GT(s.max_grid_size, 0) << what;
  if (c.batch * c.num_kv_heads >= s.max_grid_size) {
    EXPECT_FALSE(s.partitioned) << what << ": a batch that fills the GPU is not split";
    EXPECT_EQ(s.chunks_of_longest, 1) << what;
    return;
  }
  std::vector<int> pages;
  for (int b = 0; b < c.batch; ++b) pages.push_back(table.indptr[b + 1] - table.indptr[b]);
  const int min_pages = std::max(128 / c.page_size, 1);
  EXPECT_EQ(s.chunk_pages, heuristics::flashinfer_chunk_pages(s.max_grid_size, c.num_kv_heads, pages, min_pages).first)
      << what;
  EXPECT_TRUE(s.partitioned) << what << ": CUDA-graph mode always splits a batch that leaves CTAs idle";
  EXPECT_EQ(s.grid_x, s.max_grid_size / c.num_kv_heads) << what << ": the grid is padded to the budget";
}

// Runs both kernels on the config: `flashinfer` at each split count on copy `copy`, and
// `flashinfer_heuristic`; returns the worst relative error.
double check_config(const Config& c, std::uint64_t seed, cudaStream_t stream) {
  const SweepPoint point = c.point();
  double worst = 0.0;
  std::vector<int32_t> first_indices;
  ReferenceRun run;
  for (bool own_plan : {false, true}) {
    std::unique_ptr<FlashinferDecodeKernel> kernel = tuner::make_flashinfer_kernel(own_plan);
    const std::string name = kernel->name();
    const std::string where = name + " " + c.describe();
    std::string reason;
    EXPECT_TRUE(kernel->supports(point, &reason)) << where << ": " << reason;
    const tuner::KernelOutcome prepared = kernel->prepare(point, 2);
    EXPECT_TRUE(prepared.ok()) << where << ": " << prepared.message;
    if (!prepared.ok()) return 1.0;
    if (!own_plan) {
      run = reference_on(c, kernel->page_table(), seed);
      first_indices = kernel->page_table().indices;
    } else {
      // Both kernels place the batch on the same pages (tuner::shuffled_page_pool).
      EXPECT_EQ(kernel->page_table().indices, first_indices) << where;
    }
    // The other copy keeps the adapter's own random fill: a call on the wrong copy fails.
    const int copy = static_cast<int>(seed % 2);
    upload(*kernel, copy, run);
    const std::vector<int> counts = own_plan ? std::vector<int>{point.num_splits} : c.split_counts;
    for (int splits : counts) {
      const std::string what = where + " splits=" + std::to_string(splits) + " copy=" + std::to_string(copy);
      expect_schedule(*kernel, c, splits, own_plan, what);
      worst = std::max(worst, run_and_check(*kernel, copy, splits, run, stream, what));
    }
    kernel->release();
  }
  return worst;
}

// Config i of the randomized sweep: head_dim, query group and page size cycle so every
// combination appears; batch, kv heads, lengths and split counts are random. Every few configs
// hold edge lengths (one token, exactly one page, one past a page).
Config random_config(int i, std::mt19937_64& rng) {
  const int head_dims[] = {64, 128, 256};
  const int groups[] = {1, 4, 8};
  const int page_sizes[] = {1, 16, 64};
  Config c;
  c.head_dim = head_dims[i % 3];
  const int group = groups[(i / 3) % 3];
  c.page_size = page_sizes[(i / 9) % 3];
  c.num_kv_heads = 1 + static_cast<int>(rng() % 3);
  c.num_heads = group * c.num_kv_heads;
  c.batch = 1 + static_cast<int>(rng() % 6);
  const int longest = 1 + static_cast<int>(rng() % (c.page_size == 1 ? 1200 : 3000));
  c.lengths.resize(static_cast<std::size_t>(c.batch));
  for (std::int32_t& length : c.lengths) length = 1 + static_cast<int>(rng() % longest);
  c.lengths[0] = longest;
  if (i % 4 == 0 && c.batch > 1) c.lengths.back() = 1;
  if (i % 4 == 1 && c.batch > 1) c.lengths.back() = std::min(longest, c.page_size);
  if (i % 4 == 2 && c.batch > 1) c.lengths.back() = std::min(longest, c.page_size + 1);
  const int widest = 2 + static_cast<int>(rng() % 96);
  c.split_counts = {1, 2, 3, 1 + static_cast<int>(rng() % widest), widest};
  std::sort(c.split_counts.begin(), c.split_counts.end());
  c.split_counts.erase(std::unique(c.split_counts.begin(), c.split_counts.end()), c.split_counts.end());
  return c;
}

TEST(FlashinferDecodeGpu, SupportsOnlyThePagedBf16ShapesItInstantiates) {
  SPLITKV_REQUIRE_FLASHINFER();  // host-only: runs without a GPU
  Config c;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.lengths = {100};
  c.split_counts = {1};
  for (bool own_plan : {false, true}) {
    std::unique_ptr<FlashinferDecodeKernel> kernel = tuner::make_flashinfer_kernel(own_plan);
    ASSERT_NE(kernel, nullptr);
    EXPECT_EQ(kernel->picks_own_split_count(), own_plan);
    std::string reason;
    EXPECT_TRUE(kernel->supports(c.point(), &reason)) << reason;
    SweepPoint contiguous = c.point();
    contiguous.layout = KvLayout::contiguous;
    contiguous.page_size = 0;
    EXPECT_FALSE(kernel->supports(contiguous, &reason));
    EXPECT_NE(reason.find("paged"), std::string::npos) << reason;
    SweepPoint fp16 = c.point();
    fp16.dtype = DType::fp16;
    EXPECT_FALSE(kernel->supports(fp16, &reason));
    SweepPoint group5 = c.point();
    group5.num_heads = 40;
    EXPECT_FALSE(kernel->supports(group5, &reason));
    EXPECT_NE(reason.find("40/8"), std::string::npos) << reason;
    SweepPoint wide = c.point();
    wide.head_dim = 96;
    EXPECT_FALSE(kernel->supports(wide, &reason));
  }
  tuner::KernelRegistry registry;
  tuner::register_flashinfer_kernels(registry);
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"flashinfer", "flashinfer_heuristic"}));
}

TEST(FlashinferDecodeGpu, RandomizedAgainstFloat64Reference) {
  SPLITKV_REQUIRE_FLASHINFER();
  SPLITKV_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  SPLITKV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 rng(20261202);
  constexpr int kConfigs = 54;  // 27 head_dim x group x page-size combinations, twice
  double worst = 0.0;
  std::string worst_config;
  for (int i = 0; i < kConfigs; ++i) {
    const Config c = random_config(i, rng);
    const double error = check_config(c, rng(), stream);
    if (error > worst) {
      worst = error;
      worst_config = c.describe();
    }
    if (::testing::Test::HasFailure()) break;  // the first failing config says enough
  }
  std::printf("[ flashinfer ] %d configs, worst relative error %.3e (%s)\n", kConfigs, worst, worst_config.c_str());
  cudaStreamDestroy(stream);
}

// A few configs per head_dim, small enough for compute-sanitizer: both group paths of the kernel
// (one query head per row of threads, and a group), split and unsplit, and the heuristic.
TEST(FlashinferDecodeGpu, SanitizerSubset) {
  SPLITKV_REQUIRE_FLASHINFER();
  SPLITKV_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  SPLITKV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::uint64_t seed = 11;
  for (int head_dim : {64, 128, 256}) {
    for (int group : {1, 8}) {
      Config c;
      c.head_dim = head_dim;
      c.num_kv_heads = 2;
      c.num_heads = 2 * group;
      c.batch = 3;
      c.page_size = 16;
      c.lengths = {700, 1, 33};
      c.split_counts = {1, 3, 16};
      check_config(c, ++seed, stream);
    }
  }
  cudaStreamDestroy(stream);
}

// scripts/bench_peers.py times FlashInfer through `splitkv sweep` and cannot check its output
// there, so its shapes are checked here, on its grid's 16-token pages and fixed lengths, at
// FlashInfer's own plan and at one fixed split count. Kept: the shapes of its shapes() (groups
// anchors, head_dim, batch_sweep, context_sweep, capacity) whose K holds at most 2^26 elements
// (batch x kv heads x context x head_dim: K + V are <= 256 MiB in bf16, 1 GiB as the host
// reference's doubles), 29 of its 46 distinct shapes. A paged table has no capacity, so a shape
// of the capacity group is its capacity = length twin. Left out as too large for the host
// reference (17): B1 32/32 L32768, B1 L131072, B4 L32768, B8 L16384/32768/65536/131072,
// B16 L8192/16384, B16 32/32 L4096, B16 d256 L8192, B32 L4096, B64 L4096, B64 32/32 L2048,
// B128 L2048/4096, B256 L4096 (32/8 heads and head_dim 128 unless named).
TEST(FlashinferDecodeGpu, BenchPeersShapesAgainstFloat64Reference) {
  SPLITKV_REQUIRE_FLASHINFER();
  SPLITKV_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  SPLITKV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct PeerShape {
    int batch, num_heads, num_kv_heads, head_dim, context_len;
  };
  const PeerShape shapes[] = {
      // anchors
      {1, 32, 8, 128, 1024}, {1, 32, 8, 128, 4096}, {1, 32, 8, 128, 16384}, {1, 32, 8, 128, 65536},
      {1, 32, 32, 128, 4096}, {4, 32, 8, 128, 2048}, {4, 32, 8, 128, 8192}, {8, 32, 8, 128, 8192},
      {16, 32, 8, 128, 1024}, {16, 32, 8, 128, 4096}, {32, 32, 8, 128, 2048}, {64, 32, 8, 128, 1024},
      // head_dim
      {1, 32, 8, 64, 8192}, {16, 32, 8, 64, 8192}, {1, 32, 8, 256, 8192},
      // batch_sweep, beyond the anchors
      {2, 32, 8, 128, 4096}, {4, 32, 8, 128, 4096}, {8, 32, 8, 128, 4096},
      // context_sweep, beyond the anchors
      {1, 32, 8, 128, 512}, {1, 32, 8, 128, 2048}, {1, 32, 8, 128, 8192}, {1, 32, 8, 128, 32768},
      {8, 32, 8, 128, 512}, {8, 32, 8, 128, 1024}, {8, 32, 8, 128, 2048},
      // capacity, at their real lengths, beyond the above
      {4, 32, 8, 128, 512}, {4, 32, 8, 128, 16384}, {16, 32, 8, 128, 512}, {16, 32, 8, 128, 2048},
  };
  std::uint64_t seed = 2000;
  int checked = 0;
  double worst = 0.0;
  for (const PeerShape& shape : shapes) {
    ASSERT_LE(static_cast<long long>(shape.batch) * shape.num_kv_heads * shape.context_len * shape.head_dim,
              1LL << 26);
    Config c;
    c.batch = shape.batch;
    c.num_heads = shape.num_heads;
    c.num_kv_heads = shape.num_kv_heads;
    c.head_dim = shape.head_dim;
    c.page_size = 16;
    c.lengths.assign(static_cast<std::size_t>(shape.batch), shape.context_len);
    // 12 leaves an uneven last chunk on most lengths; the sweep plans no count past the 64-token tiles.
    c.split_counts = {std::min(12, ceil_div(shape.context_len, 64))};
    worst = std::max(worst, check_config(c, ++seed, stream));
    ++checked;
    if (::testing::Test::HasFailure()) break;  // the first failing shape says enough
  }
  std::printf("[ flashinfer ] %d bench_peers shapes, worst relative error %.3e\n", checked, worst);
  cudaStreamDestroy(stream);
}

// The sweep captures back-to-back calls in one CUDA graph (tuner::GraphReplayTimer, the harness's
// own): a capture that succeeds is the proof that launch() enqueues without a host sync, an
// allocation or a host-to-device copy; its replays must still give the reference's output.
TEST(FlashinferDecodeGpu, CallsCapturedInTheSweepsCudaGraph) {
  SPLITKV_REQUIRE_FLASHINFER();
  SPLITKV_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  SPLITKV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Config c;
  c.batch = 4;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.page_size = 16;
  c.lengths = {4096, 17, 1000, 2500};
  c.split_counts = {1, 5, 32};
  for (bool own_plan : {false, true}) {
    std::unique_ptr<FlashinferDecodeKernel> kernel = tuner::make_flashinfer_kernel(own_plan);
    const tuner::KernelOutcome prepared = kernel->prepare(c.point(), 2);
    ASSERT_TRUE(prepared.ok()) << prepared.message;
    const ReferenceRun run = reference_on(c, kernel->page_table(), 99);
    upload(*kernel, 0, run);
    upload(*kernel, 1, run);  // both copies hold the problem, so every call's output is checkable
    for (int splits : own_plan ? std::vector<int>{32} : c.split_counts) {
      const std::string what = kernel->name() + " splits=" + std::to_string(splits);
      tuner::GraphReplayTimer timer;
      const std::string captured = timer.capture(
          [&](int copy, cudaStream_t s) {
            const tuner::KernelOutcome outcome = kernel->launch(copy, splits, s);
            return outcome.ok() ? std::string() : outcome.message;
          },
          2, 4, stream);
      ASSERT_EQ(captured, "") << what;
      poison_output(*kernel, run);
      ASSERT_EQ(timer.replay(), "") << what;
      SPLITKV_CUDA_OK(cudaStreamSynchronize(stream));
      expect_output_matches(*kernel, run, what + " (graph replay)");
      double per_call_us = 0;
      ASSERT_EQ(timer.timed_replay(&per_call_us), "") << what;
      EXPECT_GT(per_call_us, 0.0) << what;
    }
    kernel->release();
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace splitkv
