// Validate-then-benchmark driver for the decode kernels (in the spirit of llm.c's dev/ drivers).
// For each shape: fill K/V with random values on the device, check the kernel against the
// float64 reference on sequence 0 and every split count against split count 1 on all
// sequences, then time each split count as CUDA-graph replays over rotating K/V copies.
//
//   decode_kernel_bench ANCHORS_CSV [--out results.csv] [--splits 1,2,4,...] [--layouts contiguous,paged16]
//                       [--kv-dtypes bf16,fp8_e4m3] [--calls-per-graph N]
//
// --calls-per-graph (default 16) is how many back-to-back calls one timed replay holds: 1 times
// a call after an idle gap, as a profiler does, 16 a call in a steady stream of them.
//
// fp8_e4m3: the cache holds random e4m3 codes with random descales per (sequence, kv head) in
// [0.25, 4], q/out stay bf16; TB/s counts the cache's real bytes (one per element).
//
// Prints one line per (shape, layout) at its best split count: time, achieved TB/s of the real
// K/V bytes, the HBM floor, and cuDNN's time from the anchors file.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bf16_host.hpp"
#include "reference_attention.hpp"
#include "splitkv/decode_attention.hpp"
#include "splitkv/fp8_e4m3.hpp"
#include "splitkv/tuner/device_random.cuh"
#include "splitkv/tuner/graph_timer.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace {

using splitkv::DecodeParams;
using splitkv::KvLayout;

constexpr double kDatasheetTbps = 4.8;

struct AnchorShape {
  int batch, num_heads, num_kv_heads, context_len;
  double fa2_us, cudnn_us;
};

std::vector<AnchorShape> read_anchors(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "error: cannot open anchors file %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<AnchorShape> shapes;
  std::string line;
  bool header_seen = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!header_seen) {
      header_seen = true;
      continue;
    }
    AnchorShape s{};
    double tbps = 0;
    if (std::sscanf(line.c_str(), "%d,%d,%d,%d,%lf,%lf,%lf", &s.batch, &s.num_heads, &s.num_kv_heads,
                    &s.context_len, &s.fa2_us, &s.cudnn_us, &tbps) != 7) {
      std::fprintf(stderr, "error: %s: malformed row: %s\n", path.c_str(), line.c_str());
      std::exit(2);
    }
    shapes.push_back(s);
  }
  return shapes;
}

#define CHECK_CUDA(expression)                                                                      \
  do {                                                                                              \
    const cudaError_t error_ = (expression);                                                        \
    if (error_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(error_), __FILE__, __LINE__, \
                   #expression);                                                                    \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

struct Layout {
  KvLayout layout;
  int page_size;
  std::string name() const {
    return layout == KvLayout::paged ? "paged" + std::to_string(page_size) : "contiguous";
  }
};

struct BenchShape {
  int batch, num_heads, num_kv_heads, head_dim, context_len;
  double cudnn_us;  // 0 when the anchors do not cover it
};

// All device buffers of one shape: `copies` independent K/V caches sharing q, out, lengths and
// the block table (those are tiny and would sit in L2 in a real step too).
struct ShapeBuffers {
  std::vector<void*> k, v;
  bool fp8 = false;
  float* descales = nullptr;  // fp8: k_descale [batch, kv heads], then v_descale
  __nv_bfloat16* q = nullptr;
  __nv_bfloat16* out = nullptr;
  int32_t* seqlens = nullptr;
  int32_t* block_table = nullptr;
  void* workspace = nullptr;
  std::size_t kv_elements = 0;
  int max_pages = 0, num_pages = 0;

  ~ShapeBuffers() {
    for (auto* p : k) cudaFree(p);
    for (auto* p : v) cudaFree(p);
    cudaFree(q);
    cudaFree(out);
    cudaFree(seqlens);
    cudaFree(block_table);
    cudaFree(workspace);
    cudaFree(descales);
  }
};

DecodeParams make_params(const BenchShape& s, const Layout& layout, const ShapeBuffers& b, int copy, int splits) {
  DecodeParams p;
  p.layout = layout.layout;
  p.batch = s.batch;
  p.num_heads = s.num_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.head_dim = s.head_dim;
  p.cache_capacity = s.context_len;
  p.page_size = layout.page_size;
  p.max_pages_per_seq = b.max_pages;
  p.num_pages = b.num_pages;
  p.num_splits = splits;
  p.q = b.q;
  p.k = b.k[copy];
  p.v = b.v[copy];
  p.out = b.out;
  p.cache_seqlens = b.seqlens;
  p.block_table = b.block_table;
  p.workspace = b.workspace;
  if (b.fp8) {
    p.kv_dtype = splitkv::KvDtype::fp8_e4m3;
    p.k_descale = b.descales;
    p.v_descale = b.descales + static_cast<std::size_t>(s.batch) * s.num_kv_heads;
  }
  return p;
}

template <typename T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  CHECK_CUDA(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Relative L2 error of sequence 0's output against the float64 reference.
double reference_error_sequence0(const BenchShape& s, const Layout& layout, const ShapeBuffers& b) {
  splitkv::reference::HostProblem problem;
  problem.layout = KvLayout::contiguous;
  problem.batch = 1;
  problem.num_heads = s.num_heads;
  problem.num_kv_heads = s.num_kv_heads;
  problem.head_dim = s.head_dim;
  problem.cache_capacity = s.context_len;
  problem.seqlens = {s.context_len};
  const std::size_t row = static_cast<std::size_t>(s.num_kv_heads) * s.head_dim;
  const auto q = download(reinterpret_cast<const std::uint16_t*>(b.q), static_cast<std::size_t>(s.num_heads) * s.head_dim);
  problem.q.resize(q.size());
  std::transform(q.begin(), q.end(), problem.q.begin(), splitkv::bench::bf16_to_double);
  problem.k.resize(row * s.context_len);
  problem.v.resize(row * s.context_len);
  const auto table = layout.layout == KvLayout::paged ? download(b.block_table, b.max_pages) : std::vector<int32_t>{};
  if (b.fp8) {
    // Sequence 0's descales; the reference multiplies them in.
    const auto descales = download(b.descales, static_cast<std::size_t>(2) * s.batch * s.num_kv_heads);
    problem.kv_dtype = splitkv::KvDtype::fp8_e4m3;
    for (int h = 0; h < s.num_kv_heads; ++h) {
      problem.k_descale.push_back(descales[h]);
      problem.v_descale.push_back(descales[static_cast<std::size_t>(s.batch) * s.num_kv_heads + h]);
    }
  }
  for (int t = 0; t < s.context_len; ++t) {
    const std::size_t source_row_fp8 =
        layout.layout == KvLayout::paged
            ? static_cast<std::size_t>(table[t / layout.page_size]) * layout.page_size + t % layout.page_size
            : static_cast<std::size_t>(t);
    if (b.fp8) {
      const auto k = download(static_cast<const std::uint8_t*>(b.k[0]) + source_row_fp8 * row, row);
      const auto v = download(static_cast<const std::uint8_t*>(b.v[0]) + source_row_fp8 * row, row);
      for (std::size_t i = 0; i < row; ++i) {
        problem.k[t * row + i] = splitkv::e4m3_to_double(k[i]);
        problem.v[t * row + i] = splitkv::e4m3_to_double(v[i]);
      }
      continue;
    }
    const std::size_t source_row =
        layout.layout == KvLayout::paged
            ? static_cast<std::size_t>(table[t / layout.page_size]) * layout.page_size + t % layout.page_size
            : static_cast<std::size_t>(t);
    const auto k = download(reinterpret_cast<const std::uint16_t*>(b.k[0]) + source_row * row, row);
    const auto v = download(reinterpret_cast<const std::uint16_t*>(b.v[0]) + source_row * row, row);
    std::transform(k.begin(), k.end(), problem.k.begin() + t * row, splitkv::bench::bf16_to_double);
    std::transform(v.begin(), v.end(), problem.v.begin() + t * row, splitkv::bench::bf16_to_double);
  }
  std::vector<double> out, lse;
  splitkv::reference::attention(problem, out, lse);
  const auto gpu = download(reinterpret_cast<const std::uint16_t*>(b.out), out.size());
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double d = splitkv::bench::bf16_to_double(gpu[i]) - out[i];
    diff2 += std::isnan(d) ? INFINITY : d * d;
    ref2 += out[i] * out[i];
  }
  return std::sqrt(diff2 / ref2);
}

std::vector<int> parse_int_list(const std::string& text) {
  std::vector<int> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(std::stoi(item));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s ANCHORS_CSV [--out FILE] [--splits 1,2,4] [--layouts contiguous,paged16] "
                 "[--kv-dtypes bf16,fp8_e4m3] [--calls-per-graph 16]\n",
                 argv[0]);
    return 2;
  }
  std::string out_path = "decode_kernel_bench.csv";
  std::vector<int> split_counts = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
  std::vector<Layout> layouts = {{KvLayout::contiguous, 0}};
  std::vector<bool> kv_dtypes = {false};  // true: fp8_e4m3
  splitkv::tuner::GraphTimingProtocol protocol;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--out") {
      out_path = argv[i + 1];
    } else if (flag == "--splits") {
      split_counts = parse_int_list(argv[i + 1]);
    } else if (flag == "--kv-dtypes") {
      kv_dtypes.clear();
      std::stringstream stream(argv[i + 1]);
      std::string item;
      while (std::getline(stream, item, ',')) {
        if (item != "bf16" && item != "fp8_e4m3") {
          std::fprintf(stderr, "error: --kv-dtypes takes bf16 and fp8_e4m3, got %s\n", item.c_str());
          return 2;
        }
        kv_dtypes.push_back(item == "fp8_e4m3");
      }
    } else if (flag == "--calls-per-graph") {
      protocol.min_launches_per_graph = std::atoi(argv[i + 1]);
      if (protocol.min_launches_per_graph < 1) {
        std::fprintf(stderr, "error: --calls-per-graph takes a count of at least 1, got %s\n", argv[i + 1]);
        return 2;
      }
    } else if (flag == "--layouts") {
      layouts.clear();
      std::stringstream stream(argv[i + 1]);
      std::string item;
      while (std::getline(stream, item, ','))
        layouts.push_back(item == "contiguous" ? Layout{KvLayout::contiguous, 0}
                                               : Layout{KvLayout::paged, std::stoi(item.substr(5))});
    } else {
      std::fprintf(stderr, "error: unknown option %s\n", flag.c_str());
      return 2;
    }
  }

  std::vector<BenchShape> shapes;
  for (const AnchorShape& a : read_anchors(argv[1]))
    shapes.push_back({a.batch, a.num_heads, a.num_kv_heads, 128, a.context_len, a.cudnn_us});

  cudaDeviceProp properties{};
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::FILE* csv = std::fopen(out_path.c_str(), "w");
  if (!csv) {
    std::fprintf(stderr, "error: cannot write %s\n", out_path.c_str());
    return 2;
  }
  std::fprintf(csv, "gpu,layout,kv_dtype,batch,num_heads,num_kv_heads,head_dim,context_len,num_splits,time_us_median,"
                    "time_us_p10,time_us_p90,cv,repetitions,copies,kv_bytes,tbps,ref_error,split_vs_1_error\n");
  std::printf("%-11s %-8s %4s %5s %6s | %6s %9s %15s %6s %8s | %8s %7s | %9s\n", "layout", "B", "H", "L", "splits",
              "kv", "time_us", "p10-p90", "TB/s", "floor_us", "cudnn_us", "ours/cu", "ref_err");

  std::mt19937 rng(1234);
  for (const BenchShape& s : shapes) {
    for (const Layout& layout : layouts)
    for (const bool fp8 : kv_dtypes) {
      ShapeBuffers b;
      b.fp8 = fp8;
      const std::size_t kv_element_bytes = fp8 ? 1 : 2;
      const char* kv_name = fp8 ? "fp8_e4m3" : "bf16";
      const std::size_t row = static_cast<std::size_t>(s.num_kv_heads) * s.head_dim;
      if (layout.layout == KvLayout::paged) {
        b.max_pages = (s.context_len + layout.page_size - 1) / layout.page_size;
        b.num_pages = b.max_pages * s.batch;
        b.kv_elements = static_cast<std::size_t>(b.num_pages) * layout.page_size * row;
        std::vector<int32_t> table(b.num_pages);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        CHECK_CUDA(cudaMalloc(&b.block_table, table.size() * sizeof(int32_t)));
        CHECK_CUDA(cudaMemcpy(b.block_table, table.data(), table.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      } else {
        b.kv_elements = static_cast<std::size_t>(s.batch) * s.context_len * row;
      }
      const std::size_t kv_bytes = 2 * static_cast<std::size_t>(s.batch) * s.context_len * row * kv_element_bytes;
      splitkv::tuner::SweepPoint point;
      point.layout = layout.layout;
      point.page_size = layout.page_size;
      point.batch = s.batch;
      point.num_heads = s.num_heads;
      point.num_kv_heads = s.num_kv_heads;
      point.head_dim = s.head_dim;
      point.context_len = point.cache_capacity = s.context_len;
      if (fp8) point.kv_dtype = splitkv::KvDtype::fp8_e4m3;
      const int copies = splitkv::tuner::rotating_copies(point, properties.l2CacheSize, protocol.working_set_l2_multiple,
                                                         properties.totalGlobalMem / 2);
      for (int c = 0; c < copies; ++c) {
        b.k.push_back(nullptr);
        b.v.push_back(nullptr);
        CHECK_CUDA(cudaMalloc(&b.k.back(), b.kv_elements * kv_element_bytes));
        CHECK_CUDA(cudaMalloc(&b.v.back(), b.kv_elements * kv_element_bytes));
        if (fp8) {
          CHECK_CUDA(splitkv::tuner::fill_e4m3_codes(b.k.back(), b.kv_elements, 2 * c + 1, stream));
          CHECK_CUDA(splitkv::tuner::fill_e4m3_codes(b.v.back(), b.kv_elements, 2 * c + 2, stream));
        } else {
          CHECK_CUDA(splitkv::tuner::fill_uniform(b.k.back(), b.kv_elements, splitkv::DType::bf16, 2 * c + 1, stream));
          CHECK_CUDA(splitkv::tuner::fill_uniform(b.v.back(), b.kv_elements, splitkv::DType::bf16, 2 * c + 2, stream));
        }
      }
      if (fp8) {
        const std::size_t descales = 2 * static_cast<std::size_t>(s.batch) * s.num_kv_heads;
        CHECK_CUDA(cudaMalloc(&b.descales, descales * sizeof(float)));
        // Small enough that codes up to 448 keep the softmax from collapsing onto one token.
        CHECK_CUDA(splitkv::tuner::fill_range(b.descales, descales, 0.25f / 448.f, 4.f / 448.f, 5, stream));
      }
      const std::size_t q_elements = static_cast<std::size_t>(s.batch) * s.num_heads * s.head_dim;
      CHECK_CUDA(cudaMalloc(&b.q, q_elements * 2));
      CHECK_CUDA(cudaMalloc(&b.out, q_elements * 2));
      CHECK_CUDA(splitkv::tuner::fill_uniform(b.q, q_elements, splitkv::DType::bf16, 99, stream));
      const std::vector<int32_t> lengths(s.batch, s.context_len);
      CHECK_CUDA(cudaMalloc(&b.seqlens, s.batch * sizeof(int32_t)));
      CHECK_CUDA(cudaMemcpy(b.seqlens, lengths.data(), s.batch * sizeof(int32_t), cudaMemcpyHostToDevice));
      const int max_splits = *std::max_element(split_counts.begin(), split_counts.end());
      CHECK_CUDA(cudaMalloc(&b.workspace,
                            std::max<std::size_t>(16, splitkv::decode_workspace_bytes(make_params(s, layout, b, 0, max_splits)))));
      CHECK_CUDA(cudaStreamSynchronize(stream));

      // Validate: split count 1 against float64 on sequence 0, then every count against count 1.
      CHECK_CUDA(cudaMemset(b.out, 0xFF, q_elements * 2));
      if (splitkv::decode_attention(make_params(s, layout, b, 0, 1), stream) != splitkv::Status::ok) {
        std::fprintf(stderr, "error: %s\n", splitkv::last_error_message());
        return 1;
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double ref_error = reference_error_sequence0(s, layout, b);
      const auto unsplit = download(reinterpret_cast<const std::uint16_t*>(b.out), q_elements);

      double best_us = INFINITY;
      int best_splits = 0;
      splitkv::tuner::SampleStats best_stats;
      for (int splits : split_counts) {
        CHECK_CUDA(cudaMemset(b.out, 0xFF, q_elements * 2));
        if (splitkv::decode_attention(make_params(s, layout, b, 0, splits), stream) != splitkv::Status::ok) {
          std::fprintf(stderr, "error: %s\n", splitkv::last_error_message());
          return 1;
        }
        CHECK_CUDA(cudaStreamSynchronize(stream));
        const double split_error = splitkv::bench::relative_l2_difference(
            download(reinterpret_cast<const std::uint16_t*>(b.out), q_elements), unsplit);

        splitkv::tuner::GraphTiming timing;
        const std::string failure = splitkv::tuner::time_graph_replays(
            [&](int copy, cudaStream_t st) -> std::string {
              return splitkv::decode_attention(make_params(s, layout, b, copy, splits), st) == splitkv::Status::ok
                         ? ""
                         : splitkv::last_error_message();
            },
            copies, protocol, stream, &timing);
        if (!failure.empty()) {
          std::fprintf(stderr, "error: timing failed: %s\n", failure.c_str());
          return 1;
        }
        const auto& st = timing.stats;
        std::fprintf(csv, "%s,%s,%s,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.4f,%d,%d,%zu,%.4f,%.3e,%.3e\n", properties.name,
                     layout.name().c_str(), kv_name, s.batch, s.num_heads, s.num_kv_heads, s.head_dim, s.context_len, splits,
                     st.median, st.p10, st.p90, st.cv, st.count, copies, kv_bytes, kv_bytes / st.median / 1e6,
                     ref_error, split_error);
        std::fflush(csv);
        if (split_error > 1e-2 || !(ref_error <= 1e-2)) {
          std::fprintf(stderr, "error: wrong result at splits=%d (vs float64 %.3e, vs splits=1 %.3e)\n", splits,
                       ref_error, split_error);
          return 1;
        }
        if (st.median < best_us) {
          best_us = st.median;
          best_splits = splits;
          best_stats = st;
        }
      }
      const double floor_us = kv_bytes / (kDatasheetTbps * 1e6);
      std::printf("%-11s %-8s %4d %2d/%-2d %6d | %6d %9.2f %7.2f-%-7.2f %6.2f %8.2f | %8.1f %7.3f | %9.2e\n",
                  layout.name().c_str(), kv_name, s.batch, s.num_heads, s.num_kv_heads, s.context_len, best_splits, best_us,
                  best_stats.p10, best_stats.p90, kv_bytes / best_us / 1e6, floor_us, s.cudnn_us,
                  s.cudnn_us > 0 ? best_us / s.cudnn_us : 0.0, ref_error);
      std::fflush(stdout);
    }
  }
  std::fclose(csv);
  return 0;
}
