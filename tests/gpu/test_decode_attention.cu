// GPU correctness of the split-KV decode kernels against the float64 reference, on fresh random
// inputs, with every output poisoned first so an unwritten element fails the test.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_support.cuh"
#include "splitkv/kernels/mma_sm80.cuh"
#include "splitkv/split_partition.hpp"

namespace splitkv {
namespace {

using reference::HostProblem;
using reference::ProblemShape;
using testing::DeviceBuffer;

struct GpuRun {
  std::vector<double> out;
  std::vector<double> lse;
};

// Device copies of one problem; inputs are rounded to `dtype` in the host problem so the
// reference computes on exactly the values the kernel reads.
class DeviceProblem {
 public:
  DeviceProblem(HostProblem& problem, DType dtype, int max_splits)
      : problem_(problem),
        dtype_(dtype),
        q_(problem.q.size()),
        k_(problem.k.size()),
        v_(problem.v.size()),
        out_(problem.q.size()),
        seqlens_(problem.seqlens.size()),
        block_table_(std::max<std::size_t>(problem.block_table.size(), 1)),
        lse_(static_cast<std::size_t>(problem.batch) * problem.num_heads),
        workspace_(workspace_floats(problem, max_splits)) {
    q_.upload(testing::round_to_dtype(problem.q, dtype));
    k_.upload(testing::round_to_dtype(problem.k, dtype));
    v_.upload(testing::round_to_dtype(problem.v, dtype));
    upload_lengths();
    if (!problem.block_table.empty()) block_table_.upload(problem.block_table);
  }

  bool allocated() const {
    return q_.data && k_.data && v_.data && out_.data && seqlens_.data && block_table_.data && lse_.data &&
           (workspace_.count == 0 || workspace_.data);
  }

  void upload_lengths() { seqlens_.upload(problem_.seqlens); }

  DecodeParams params(int num_splits, bool with_lse) const {
    DecodeParams p = reference::shape_params(problem_);
    p.dtype = dtype_;
    p.num_splits = num_splits;
    p.q = q_.data;
    p.k = k_.data;
    p.v = v_.data;
    p.out = out_.data;
    p.cache_seqlens = seqlens_.data;
    p.block_table = problem_.layout == KvLayout::paged ? block_table_.data : nullptr;
    p.host_cache_seqlens = problem_.seqlens.data();
    p.lse = with_lse ? lse_.data : nullptr;
    p.workspace = num_splits > 1 ? workspace_.data : nullptr;
    return p;
  }

  void poison() {
    out_.poison();
    lse_.poison();
    if (workspace_.count) workspace_.poison();
  }

  GpuRun results() const {
    GpuRun run;
    const std::vector<std::uint16_t> bits = out_.download();
    run.out.resize(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) run.out[i] = testing::from_bits(bits[i], dtype_);
    const std::vector<float> lse = lse_.download();
    run.lse.assign(lse.begin(), lse.end());
    return run;
  }

 private:
  static std::size_t workspace_floats(const HostProblem& p, int max_splits) {
    DecodeParams shape = reference::shape_params(p);
    shape.num_splits = max_splits;
    return decode_workspace_bytes(shape) / sizeof(float);
  }

  HostProblem& problem_;
  DType dtype_;
  DeviceBuffer<std::uint16_t> q_, k_, v_, out_;
  DeviceBuffer<int32_t> seqlens_, block_table_;
  DeviceBuffer<float> lse_, workspace_;
};

struct Case {
  ProblemShape shape;
  DType dtype = DType::bf16;
  int num_splits = 1;
  std::string describe() const {
    return std::string(shape.layout == KvLayout::paged ? "paged(" + std::to_string(shape.page_size) + ")"
                                                       : "contiguous") +
           (dtype == DType::bf16 ? " bf16" : " fp16") + " B=" + std::to_string(shape.batch) +
           " H=" + std::to_string(shape.num_heads) + "/" + std::to_string(shape.num_kv_heads) +
           " D=" + std::to_string(shape.head_dim) + " cap=" + std::to_string(shape.capacity) +
           " splits=" + std::to_string(num_splits);
  }
};

// Runs one call on poisoned outputs and checks every output element and LSE against the float64
// reference (an empty row's LSE must be -inf); returns the output's relative error.
double expect_matches_reference(const HostProblem& problem, DeviceProblem& device, const DecodeParams& params,
                                const std::string& what, DecodeKernel kernel = DecodeKernel::packed_gqa) {
  std::vector<double> ref_out, ref_lse;
  reference::attention(problem, ref_out, ref_lse);

  device.poison();
  const Status status = decode_attention(params, kernel, nullptr);
  EXPECT_EQ(Status::ok, status) << what << ": " << last_error_message();
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize()) << what;
  const GpuRun run = device.results();

  const testing::ErrorSummary out_error = testing::compare(run.out, ref_out);
  EXPECT_EQ(0u, out_error.unwritten) << what << ": output elements left unwritten";
  EXPECT_LE(out_error.relative, 1e-2) << what << " max_abs=" << out_error.max_abs;
  for (std::size_t i = 0; i < ref_lse.size(); ++i) {
    if (std::isinf(ref_lse[i])) {
      EXPECT_TRUE(std::isinf(run.lse[i]) && run.lse[i] < 0) << what << " lse[" << i << "]";
    } else {
      EXPECT_NEAR(run.lse[i], ref_lse[i], 1e-3 * (1.0 + std::abs(ref_lse[i]))) << what << " lse[" << i << "]";
    }
  }
  return out_error.relative;
}

// Checks one case end to end and returns the relative error, so callers can report the worst.
double check_case(const Case& c, std::uint64_t seed, DecodeKernel kernel = DecodeKernel::packed_gqa) {
  HostProblem problem = reference::random_problem(c.shape, seed);
  DeviceProblem device(problem, c.dtype, c.num_splits);
  EXPECT_TRUE(device.allocated()) << c.describe();
  if (!device.allocated()) return 1.0;
  return expect_matches_reference(problem, device, device.params(c.num_splits, true), c.describe(), kernel);
}

// Draws case i of a randomized sweep: layouts, dtypes, head_dims and group sizes cycle so every
// combination appears; batch, heads, capacity, page size, lengths and splits are random.
Case random_case(int i, std::mt19937_64& rng) {
  const int head_dims[] = {64, 128, 256};
  const int groups[] = {1, 4, 8, 16};
  const int page_sizes[] = {16, 32, 64, 128, 256};
  const int fixed_splits[] = {1, 2, 3, 7, 16, 64, 128, kMaxSplits};
  Case c;
  c.shape.layout = i % 2 == 0 ? KvLayout::contiguous : KvLayout::paged;
  c.dtype = (i / 2) % 2 == 0 ? DType::bf16 : DType::fp16;
  c.shape.head_dim = head_dims[(i / 4) % 3];
  const int group = groups[(i / 12) % 4];
  c.shape.num_kv_heads = 1 + static_cast<int>(rng() % 3);
  c.shape.num_heads = group * c.shape.num_kv_heads;
  c.shape.batch = 1 + static_cast<int>(rng() % 5);
  c.shape.page_size = page_sizes[rng() % 5];
  c.shape.capacity = 1 + static_cast<int>(rng() % 2500);
  c.shape.lengths = reference::LengthMode::ragged;
  c.num_splits = rng() % 2 == 0 ? fixed_splits[rng() % 8] : 1 + static_cast<int>(rng() % 128);
  return c;
}

// A num_splits = auto table in device memory, for as long as the test uses it.
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

TEST(DecodeAttentionGpu, UnpackedGqaKernelAgainstFloat64Reference) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937_64 rng(77);
  for (int i = 0; i < 48 && !::testing::Test::HasFailure(); ++i)
    check_case(random_case(i, rng), rng(), DecodeKernel::unpacked_gqa);
}

TEST(DecodeAttentionGpu, RandomizedAgainstFloat64Reference) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937_64 rng(20261129);
  constexpr int kCases = 320;
  double worst = 0.0;
  std::string worst_case;
  for (int i = 0; i < kCases; ++i) {
    const Case c = random_case(i, rng);
    const double error = check_case(c, rng());
    if (error > worst) {
      worst = error;
      worst_case = c.describe();
    }
    if (::testing::Test::HasFailure()) break;  // the first failing case says enough
  }
  std::printf("[ randomized ] %d cases, worst relative error %.3e (%s)\n", kCases, worst, worst_case.c_str());
}

// A few shapes per kernel instantiation; small enough to run under compute-sanitizer.
TEST(DecodeAttentionGpu, SanitizerSubset) {
  SPLITKV_REQUIRE_GPU();
  std::uint64_t seed = 7;
  for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged})
    for (DType dtype : {DType::bf16, DType::fp16})
      for (int head_dim : {64, 128, 256})
        for (int splits : {1, 5, 128}) {
          Case c;
          c.shape.layout = layout;
          c.dtype = dtype;
          c.shape.head_dim = head_dim;
          c.shape.batch = 2;
          c.shape.num_kv_heads = 2;
          c.shape.num_heads = splits == 5 ? 32 : 2;  // group 16 and group 1
          c.shape.capacity = 700;
          c.shape.page_size = 32;
          c.num_splits = splits;
          check_case(c, ++seed);
        }
}

TEST(DecodeAttentionGpu, EdgeLengths) {
  SPLITKV_REQUIRE_GPU();
  // Length 0, length 1, shorter than the split count, exactly one tile, one past a tile.
  for (int splits : {1, 4, 128}) {
    Case c;
    c.shape.batch = 6;
    c.shape.num_heads = 16;
    c.shape.num_kv_heads = 1;
    c.shape.head_dim = 128;
    c.shape.capacity = 200;
    c.shape.lengths = reference::LengthMode::explicit_;
    c.shape.seqlens = {0, 1, 3, 64, 65, 200};
    c.num_splits = splits;
    check_case(c, 100 + splits);
    c.shape.layout = KvLayout::paged;
    c.shape.page_size = 16;
    check_case(c, 200 + splits);
  }
}

// One graph captured at a fixed split count serves new lengths without re-capture: the lengths
// live on the device and nothing in the call depends on them on the host.
// Captures one decode step into a CUDA graph (global capture mode: any host synchronisation in
// the launch path fails the capture), then replays it once per entry of `length_sets`, each
// written to the device's cache_seqlens first, and checks every output against the float64
// reference with poisoned outputs.
void expect_one_graph_serves_all_lengths(HostProblem& problem, DeviceProblem& device, DecodeParams params,
                                         const std::vector<std::vector<int32_t>>& length_sets) {
  cudaStream_t stream;
  SPLITKV_CUDA_OK(cudaStreamCreate(&stream));
  params.host_cache_seqlens = nullptr;  // the graph must not depend on host-side lengths
  ASSERT_EQ(Status::ok, decode_attention(params, stream)) << last_error_message();  // one-time setup
  SPLITKV_CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  SPLITKV_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  ASSERT_EQ(Status::ok, decode_attention(params, stream)) << last_error_message();
  SPLITKV_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  SPLITKV_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<int32_t>& lengths : length_sets) {
    problem.seqlens = lengths;
    device.upload_lengths();
    device.poison();
    SPLITKV_CUDA_OK(cudaGraphLaunch(exec, stream));
    SPLITKV_CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<double> ref_out, ref_lse;
    reference::attention(problem, ref_out, ref_lse);
    const testing::ErrorSummary error = testing::compare(device.results().out, ref_out);
    EXPECT_EQ(0u, error.unwritten);
    EXPECT_LE(error.relative, 1e-2);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(DecodeAttentionGpu, CudaGraphReplayWithChangedLengths) {
  SPLITKV_REQUIRE_GPU();
  ProblemShape shape;
  shape.batch = 4;
  shape.num_heads = 32;
  shape.num_kv_heads = 8;
  shape.head_dim = 128;
  shape.capacity = 4096;
  shape.lengths = reference::LengthMode::explicit_;
  shape.seqlens = {4096, 17, 1000, 2500};
  HostProblem problem = reference::random_problem(shape, 42);
  DeviceProblem device(problem, DType::bf16, 32);
  ASSERT_TRUE(device.allocated());
  expect_one_graph_serves_all_lengths(problem, device, device.params(32, true),
                                      {{4096, 17, 1000, 2500}, {1, 4000, 64, 0}});
}

// num_splits = auto under a CUDA graph, both layouts: the graph is captured once with the grid
// bound from the per-length table and the capacity, then replayed while cache_seqlens change
// on the device. Capture runs in cudaStreamCaptureModeGlobal, where any host synchronisation
// in the launch path (a cudaMemcpy of lengths, a cudaStreamSynchronize) fails the capture:
// a successful capture is the proof that `auto` needs no sync.
TEST(DecodeAttentionGpu, CudaGraphWithAutoSplitsServesChangingLengths) {
  SPLITKV_REQUIRE_GPU();
  for (const KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
    SCOPED_TRACE(layout == KvLayout::paged ? "paged16" : "contiguous");
    ProblemShape shape;
    shape.layout = layout;
    shape.page_size = 16;
    shape.batch = 5;
    shape.num_heads = 32;
    shape.num_kv_heads = 8;
    shape.head_dim = 128;
    shape.capacity = 8192;
    shape.lengths = reference::LengthMode::explicit_;
    shape.seqlens = {8192, 17, 1000, 2500, 64};
    HostProblem problem = reference::random_problem(shape, 7);
    // A table that splits long batches more and big batches less, as fitted tables do: 1 split
    // up to ~256 tokens, then doubling per length doubling up to 32, divided by the batch class.
    AutoSplitsTable table;
    for (int r = 0; r < AutoSplitsTable::kBatchClasses; ++r)
      for (int i = 0; i < AutoSplitsTable::kLengthBuckets; ++i)
        table.splits[r][i] = static_cast<unsigned char>(std::max(1, (i <= 8 ? 1 : std::min(32, 1 << (i - 8))) >> r));
    const int bound = auto_grid_bound(table, shape.batch, shape.capacity);
    ASSERT_EQ(bound, 32);
    DeviceProblem device(problem, DType::bf16, bound);
    ASSERT_TRUE(device.allocated());
    DecodeParams params = device.params(bound, true);
    params.per_sequence_splits = true;
    const DeviceAutoTable device_table(table);
    params.auto_splits = device_table.pointer;
    expect_one_graph_serves_all_lengths(problem, device, params,
                                        {{8192, 17, 1000, 2500, 64}, {1, 8000, 300, 0, 4096}, {5000, 5000, 5000, 5000, 5000}});
  }
}

// The persistent schedule's work-item offsets: more sequences than threads (each thread scans a
// run of them); past kMaxPersistentBatch the CTA-per-item grid, for auto and explicit counts.
// Ragged lengths with empty sequences.
TEST(DecodeAttentionGpu, PerSequenceSplitsAcrossManySequences) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  for (const int batch : {300, kMaxPersistentBatch + 40}) {
    for (const bool explicit_counts : {false, true}) {
      SCOPED_TRACE("batch " + std::to_string(batch) + (explicit_counts ? " explicit" : " auto"));
      ProblemShape shape;
      shape.layout = batch % 2 == 0 ? KvLayout::contiguous : KvLayout::paged;
      shape.batch = batch;
      shape.num_heads = 4;
      shape.num_kv_heads = 2;
      shape.head_dim = 64;
      shape.capacity = 300;
      shape.lengths = reference::LengthMode::explicit_;
      for (int b = 0; b < batch; ++b) shape.seqlens.push_back(b % 7 == 0 ? 0 : static_cast<int32_t>(rng() % 301));
      HostProblem problem = reference::random_problem(shape, rng());
      const int bound = 5;
      DeviceProblem device(problem, DType::bf16, bound);
      ASSERT_TRUE(device.allocated());
      DecodeParams params = device.params(bound, true);
      params.per_sequence_splits = true;
      AutoSplitsTable table;
      for (auto& row : table.splits)
        for (auto& entry : row) entry = static_cast<unsigned char>(1 + rng() % 8);
      const DeviceAutoTable device_table(table);
      params.auto_splits = device_table.pointer;
      int32_t* counts = nullptr;
      if (explicit_counts) {
        std::vector<int32_t> host_counts(batch);
        for (auto& count : host_counts) count = static_cast<int32_t>(rng() % 7);  // 0 and > bound get clamped
        ASSERT_EQ(cudaSuccess, cudaMalloc(&counts, batch * sizeof(int32_t)));
        ASSERT_EQ(cudaSuccess, cudaMemcpy(counts, host_counts.data(), batch * sizeof(int32_t), cudaMemcpyHostToDevice));
        params.splits_per_sequence = counts;
      }
      std::vector<double> ref_out, ref_lse;
      reference::attention(problem, ref_out, ref_lse);
      device.poison();
      ASSERT_EQ(Status::ok, decode_attention(params, nullptr)) << last_error_message();
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
      cudaFree(counts);
      const GpuRun run = device.results();
      const testing::ErrorSummary error = testing::compare(run.out, ref_out);
      EXPECT_EQ(0u, error.unwritten);
      EXPECT_LE(error.relative, 1e-2);
    }
  }
}

// num_splits = auto: the device picks the batch's split count from a random table by effective
// batch and max length; ragged lengths then give each sequence its own live splits (and the
// persistent schedule its own work items), and the combine must follow.
TEST(DecodeAttentionGpu, PerSequenceSplitsOnTheDevice) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937_64 rng(5);
  for (int i = 0; i < 40 && !::testing::Test::HasFailure(); ++i) {
    Case c = random_case(i, rng);
    c.shape.batch = 2 + static_cast<int>(rng() % 6);
    c.num_splits = 1 + static_cast<int>(rng() % 96);  // the grid's bound
    HostProblem problem = reference::random_problem(c.shape, rng());
    DeviceProblem device(problem, c.dtype, c.num_splits);
    ASSERT_TRUE(device.allocated());
    DecodeParams params = device.params(c.num_splits, true);
    params.per_sequence_splits = true;
    AutoSplitsTable table;
    for (auto& row : table.splits)
      for (auto& entry : row) entry = static_cast<unsigned char>(1 + rng() % 128);
    const DeviceAutoTable device_table(table);
    params.auto_splits = device_table.pointer;
    std::vector<double> ref_out, ref_lse;
    reference::attention(problem, ref_out, ref_lse);
    device.poison();
    ASSERT_EQ(Status::ok, decode_attention(params, nullptr)) << last_error_message();
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    const GpuRun run = device.results();
    const testing::ErrorSummary error = testing::compare(run.out, ref_out);
    EXPECT_EQ(0u, error.unwritten) << c.describe();
    EXPECT_LE(error.relative, 1e-2) << c.describe();
    for (std::size_t r = 0; r < ref_lse.size(); ++r)
      if (!std::isinf(ref_lse[r])) EXPECT_NEAR(run.lse[r], ref_lse[r], 1e-3 * (1.0 + std::abs(ref_lse[r])));
  }
}

// Head sizes the auto test covers: all three, or the one SPLITKV_TEST_AUTO_HEAD_DIM names, so that
// compute-sanitizer's racecheck (~20x slower) can take one per call within its time limit.
std::vector<int> auto_test_head_dims() {
  const char* only = std::getenv("SPLITKV_TEST_AUTO_HEAD_DIM");
  if (only != nullptr && *only != '\0') return {std::atoi(only)};
  return {64, 128, 256};
}

// num_splits = auto on uniform batches and on batches one length away from uniform. The persistent
// schedule guesses (contiguous, head_dim <= 128) that every sequence has cache_seqlens[0]'s length
// and starts its first item before the lengths are checked; uniform batches keep the guess and then walk
// items without the scan, the others drain it and redo the item. Both must write every output
// element exactly as the reference, with many items per CTA (300 sequences) and few.
TEST(DecodeAttentionGpu, AutoSplitsOnUniformAndNearlyUniformBatches) {
  SPLITKV_REQUIRE_GPU();
  std::mt19937_64 rng(23);
  struct Pattern {
    const char* name;
    int batch;
    std::function<int32_t(int)> length_of;
  };
  const std::vector<Pattern> patterns = {
      {"uniform", 3, [](int) { return 700; }},
      {"uniform, many sequences", 300, [](int) { return 200; }},
      {"uniform, empty", 4, [](int) { return 0; }},
      {"last shorter", 5, [](int b) { return b == 4 ? 100 : 650; }},
      {"first longer", 5, [](int b) { return b == 0 ? 720 : 300; }},
      {"last longer, many sequences", 300, [](int b) { return b == 299 ? 250 : 199; }},
      // First and last equal: the kernel guesses, and the guess fails on the middle sequence.
      {"middle shorter", 5, [](int b) { return b == 2 ? 100 : 650; }},
      {"middle longer, many sequences", 300, [](int b) { return b == 150 ? 700 : 199; }},
  };
  for (const int head_dim : auto_test_head_dims()) {
    for (const KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
      for (const Pattern& pattern : patterns) {
        SCOPED_TRACE(std::string(pattern.name) + " d" + std::to_string(head_dim) +
                     (layout == KvLayout::paged ? " paged32" : " contiguous"));
        ProblemShape shape;
        shape.layout = layout;
        shape.page_size = 32;
        shape.batch = pattern.batch;
        shape.num_kv_heads = 2;
        shape.num_heads = 8;
        shape.head_dim = head_dim;
        shape.capacity = 768;
        shape.lengths = reference::LengthMode::explicit_;
        for (int b = 0; b < pattern.batch; ++b) shape.seqlens.push_back(pattern.length_of(b));
        HostProblem problem = reference::random_problem(shape, rng());
        const int bound = 1 + static_cast<int>(rng() % 12);
        DeviceProblem device(problem, DType::bf16, bound);
        ASSERT_TRUE(device.allocated());
        DecodeParams params = device.params(bound, true);
        params.per_sequence_splits = true;
        AutoSplitsTable table;
        for (auto& row : table.splits)
          for (auto& entry : row) entry = static_cast<unsigned char>(1 + rng() % 12);
        const DeviceAutoTable device_table(table);
        params.auto_splits = device_table.pointer;
        expect_matches_reference(problem, device, params, pattern.name);
      }
    }
  }
}

// The previous kernel in the stream lets the decode call launch early (programmatic dependent
// launch), then holds for a while and only then writes new lengths, as an engine's length update
// would if it ran just before the decode step. The persistent `auto` kernel reads cache_seqlens
// before its grid dependency wait to guess the batch's count, so its guess is made on the old
// lengths; the call must still compute attention over the new ones. Covers each way the guess can
// be wrong: a uniform batch whose length moved, uniform to ragged and ragged to uniform.
__global__ void write_lengths_after_releasing_dependents(int32_t* lengths, const int32_t* new_lengths, int batch,
                                                         unsigned long long hold_ns) {
  splitkv::kernels::allow_dependent_grids_to_launch();
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < hold_ns);
  for (int b = threadIdx.x; b < batch; b += blockDim.x) lengths[b] = new_lengths[b];
}

TEST(DecodeAttentionGpu, AutoAndFixedSplitsWhenThePreviousKernelChangesTheLengths) {
  SPLITKV_REQUIRE_GPU();
  struct Change {
    const char* name;
    std::vector<int32_t> before, after;
  };
  const std::vector<Change> changes = {
      {"uniform, shorter", {700, 700, 700, 700}, {300, 300, 300, 300}},
      {"uniform, longer", {120, 120, 120, 120}, {740, 740, 740, 740}},
      {"uniform to ragged", {500, 500, 500, 500}, {500, 90, 650, 500}},
      {"ragged to uniform", {500, 90, 650, 500}, {610, 610, 610, 610}},
  };
  cudaStream_t stream;
  SPLITKV_CUDA_OK(cudaStreamCreate(&stream));
  // `auto` (the persistent kernel's guess), then a fixed count of 3 (the CTA-per-item grid's first
  // wave places its item at the length read before the wait). Head dims 64 and 128: those whose
  // persistent `auto` kernel guesses.
  const std::pair<bool, int> modes[] = {{true, 64}, {true, 128}, {false, 64}, {false, 128}};
  for (const auto& [automatic, head_dim] : modes) {
    for (const Change& change : changes) {
      SCOPED_TRACE(std::string(change.name) + " d" + std::to_string(head_dim) +
                   (automatic ? " auto" : " fixed 3"));
      ProblemShape shape;
      shape.batch = static_cast<int>(change.before.size());
      shape.num_kv_heads = 2;
      shape.num_heads = 8;
      shape.head_dim = head_dim;
      shape.capacity = 768;
      shape.lengths = reference::LengthMode::explicit_;
      shape.seqlens = change.before;
      HostProblem problem = reference::random_problem(shape, 101);
      const int bound = 12;
      DeviceProblem device(problem, DType::bf16, bound);
      ASSERT_TRUE(device.allocated());
      DecodeParams params = device.params(bound, true);
      params.per_sequence_splits = true;
      params.host_cache_seqlens = nullptr;  // the host knows only the old lengths
      // Every length bucket a different count, so a guess made on the old length picks another one.
      AutoSplitsTable table;
      for (auto& row : table.splits)
        for (int i = 0; i < AutoSplitsTable::kLengthBuckets; ++i)
          row[i] = static_cast<unsigned char>(1 + (i * 5) % bound);
      const DeviceAutoTable device_table(table);
      params.auto_splits = device_table.pointer;
      if (!automatic) {
        params.per_sequence_splits = false;
        params.auto_splits = nullptr;
        params.num_splits = 3;
      }
      DeviceBuffer<int32_t> new_lengths(change.after.size());
      new_lengths.upload(change.after);
      problem.seqlens = change.after;
      std::vector<double> ref_out, ref_lse;
      reference::attention(problem, ref_out, ref_lse);

      device.poison();
      write_lengths_after_releasing_dependents<<<1, 32, 0, stream>>>(const_cast<int32_t*>(params.cache_seqlens),
                                                                     new_lengths.data, shape.batch, 20000);
      SPLITKV_CUDA_OK(cudaGetLastError());
      ASSERT_EQ(Status::ok, decode_attention(params, stream)) << last_error_message();
      SPLITKV_CUDA_OK(cudaStreamSynchronize(stream));
      const testing::ErrorSummary error = testing::compare(device.results().out, ref_out);
      EXPECT_EQ(0u, error.unwritten);
      EXPECT_LE(error.relative, 1e-2) << "max_abs=" << error.max_abs;
    }
  }
  cudaStreamDestroy(stream);
}

// --- Argument checks: host-only, so they run in CI without a GPU. ---

DecodeParams valid_params() {
  static const int32_t lengths[2] = {10, 20};
  DecodeParams p;
  p.batch = 2;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.cache_capacity = 64;
  p.num_splits = 1;
  // Aligned dummy addresses: validate() never dereferences device pointers.
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x1000);
  p.out = reinterpret_cast<void*>(0x2000);
  p.cache_seqlens = reinterpret_cast<const int32_t*>(0x3000);
  p.host_cache_seqlens = lengths;
  return p;
}

void expect_rejected(const DecodeParams& p, Status expected, const std::string& fragment) {
  std::string message;
  EXPECT_EQ(expected, validate(p, &message)) << message;
  EXPECT_NE(std::string::npos, message.find(fragment)) << "message was: " << message;
  EXPECT_EQ(expected, decode_attention(p, nullptr));
  EXPECT_NE(std::string::npos, std::string(last_error_message()).find(fragment));
}

TEST(DecodeAttentionArguments, ValidParamsPass) {
  std::string message;
  EXPECT_EQ(Status::ok, validate(valid_params(), &message)) << message;
}

TEST(DecodeAttentionArguments, RejectsBadArgumentsWithClearMessages) {
  DecodeParams p = valid_params();
  p.head_dim = 96;
  expect_rejected(p, Status::unsupported, "head_dim");
  p = valid_params();
  p.num_splits = 0;
  expect_rejected(p, Status::invalid_argument, "num_splits");
  p.num_splits = kMaxSplits + 1;
  expect_rejected(p, Status::invalid_argument, "num_splits");
  p = valid_params();
  p.num_splits = 4;
  expect_rejected(p, Status::invalid_argument, "workspace");
  p = valid_params();
  p.layout = KvLayout::paged;
  p.page_size = 24;
  p.max_pages_per_seq = 4;
  p.num_pages = 8;
  p.block_table = reinterpret_cast<const int32_t*>(0x4000);
  expect_rejected(p, Status::unsupported, "page_size");
  p.page_size = 16;
  p.block_table = nullptr;
  expect_rejected(p, Status::invalid_argument, "block_table");
  p = valid_params();
  p.q = nullptr;
  expect_rejected(p, Status::invalid_argument, "q is null");
  p = valid_params();
  p.k = reinterpret_cast<const void*>(0x1002);
  expect_rejected(p, Status::invalid_argument, "aligned");
  p = valid_params();
  p.num_heads = 7;
  expect_rejected(p, Status::invalid_argument, "multiple");
  p = valid_params();
  p.num_heads = 34;
  p.num_kv_heads = 2;
  expect_rejected(p, Status::unsupported, "exceeds 16");
  p = valid_params();
  p = valid_params();
  p.per_sequence_splits = true;
  expect_rejected(p, Status::invalid_argument, "auto_splits is null");
  p.auto_splits = reinterpret_cast<const AutoSplitsTable*>(0x1002);
  expect_rejected(p, Status::invalid_argument, "4-byte aligned");
  p = valid_params();
  static const int32_t too_long[2] = {10, 65};
  p.host_cache_seqlens = too_long;
  expect_rejected(p, Status::invalid_argument, "cache_seqlens[1] = 65");
}

}  // namespace
}  // namespace splitkv
