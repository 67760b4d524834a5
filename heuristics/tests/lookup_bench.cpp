// Cost of one num_splits lookup on the host: the generated header's entry points (on the
// synthetic fixture table: the same code as any fitted GPU's header) and the runtime
// dispatch (splitkv/num_splits.hpp), table and fallback. Run:
//   build/heuristics/heuristics_lookup_bench --benchmark_min_time=0.2 Each
// iteration looks up one of 1024 varied shapes so the branch predictor and the compiler
// cannot specialise on a constant. Target: well under 20 ns per call.
#include <array>
#include <cstdint>

#include <benchmark/benchmark.h>

#include "num_splits_synthetic.hpp"
#include "splitkv/num_splits.hpp"

namespace {

namespace table = splitkv::generated::synthetic;

std::array<table::ShapeInfo, 1024> make_shapes() {
  std::array<table::ShapeInfo, 1024> shapes{};
  std::uint32_t state = 12345;
  const auto next = [&state](std::uint32_t bound) {
    state = state * 1664525u + 1013904223u;
    return int((state >> 8) % bound);
  };
  const int head_dims[] = {64, 128, 256};
  const int pages[] = {0, 16, 64};
  for (auto& s : shapes) {
    s.batch = 1 + next(256);
    s.num_kv_heads = 1 << next(6);
    s.num_heads = s.num_kv_heads * 4;
    s.head_dim = head_dims[next(3)];
    s.cache_capacity = 128 << next(11);
    s.max_seqlen = next(4) == 0 ? 0 : 1 + next(std::uint32_t(s.cache_capacity));
    s.page_size = pages[next(3)];
  }
  return shapes;
}

const std::array<table::ShapeInfo, 1024> kShapes = make_shapes();

void BM_determine_num_splits(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    int splits = table::determine_num_splits(kShapes[i++ & 1023]);
    benchmark::DoNotOptimize(splits);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_determine_num_splits);

void BM_determine_num_splits_capacity_only(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    int splits = table::determine_num_splits_capacity_only(kShapes[i++ & 1023]);
    benchmark::DoNotOptimize(splits);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_determine_num_splits_capacity_only);

void BM_num_splits_heuristic_fa(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    const table::ShapeInfo& s = kShapes[i++ & 1023];
    int splits = table::num_splits_heuristic_fa(s.batch, s.num_heads, s.num_kv_heads, s.head_dim, 1,
                                                s.cache_capacity, 132);
    benchmark::DoNotOptimize(splits);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_num_splits_heuristic_fa);

void BM_runtime_dispatch_table(benchmark::State& state) {
  static const splitkv::GeneratedTable tables[] = {{"synthetic", table::kGpuName, table::kSmCount,
                                                    &table::determine_num_splits_real_length,
                                                    &table::determine_num_splits_capacity_only}};
  const auto policy = splitkv::NumSplitsPolicy::for_device(table::kGpuName, table::kSmCount, {tables, 1});
  std::size_t i = 0;
  for (auto _ : state) {
    const table::ShapeInfo& s = kShapes[i++ & 1023];
    int splits = policy({s.batch, s.num_heads, s.num_kv_heads, s.head_dim, s.max_seqlen, s.cache_capacity, s.page_size});
    benchmark::DoNotOptimize(splits);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_runtime_dispatch_table);

// The tables compiled into this build (heuristics/generated/), H200 when present.
void BM_runtime_dispatch_compiled_in_h200(benchmark::State& state) {
  const auto policy = splitkv::NumSplitsPolicy::for_device("NVIDIA H200", 132);
  state.SetLabel(policy.table() != nullptr ? policy.table()->name : "no table: fallback");
  std::size_t i = 0;
  for (auto _ : state) {
    const table::ShapeInfo& s = kShapes[i++ & 1023];
    int splits = policy({s.batch, s.num_heads, s.num_kv_heads, s.head_dim, s.max_seqlen, s.cache_capacity, s.page_size});
    benchmark::DoNotOptimize(splits);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_runtime_dispatch_compiled_in_h200);

void BM_runtime_dispatch_fallback(benchmark::State& state) {
  const auto policy = splitkv::NumSplitsPolicy::for_device("no such GPU", 132);
  std::size_t i = 0;
  for (auto _ : state) {
    const table::ShapeInfo& s = kShapes[i++ & 1023];
    int splits = policy({s.batch, s.num_heads, s.num_kv_heads, s.head_dim, s.max_seqlen, s.cache_capacity, s.page_size});
    benchmark::DoNotOptimize(splits);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_runtime_dispatch_fallback);

}  // namespace

BENCHMARK_MAIN();
