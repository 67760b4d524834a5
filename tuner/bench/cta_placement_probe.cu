// Which SM does each CTA of a grid land on? The persistent `auto` schedule hands work items to
// CTAs in blockIdx order; when there are fewer items than resident CTA slots, the items only
// spread over distinct SMs if the hardware places consecutive CTAs on distinct SMs. This probe
// launches grids shaped like the decode kernel's (its shared-memory footprint, so the same CTAs
// per SM) and records %smid per CTA, while every CTA spins long enough that all are resident.
//
//   cta_placement_probe [--out placement.csv]
//
// Prints, per configuration, how many distinct SMs the first n CTAs occupy (n = 64, 128, 132, 200)
// and the largest number of the first 128 CTAs on one SM.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

__global__ void record_sm(int* sm_of_cta, long long spin_ns) {
  extern __shared__ unsigned char reserve[];  // only occupies shared memory, like the decode kernel
  unsigned sm = 0;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const int cta = blockIdx.x + blockIdx.y * gridDim.x;
  if (threadIdx.x == 0) {
    sm_of_cta[cta] = static_cast<int>(sm);
    reserve[0] = 1;
    long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    while (now - start < spin_ns);
  }
}

bool check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) out_path = argv[++i];
    else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: cta_placement_probe [--out placement.csv]\n");
      return 0;
    } else {
      std::fprintf(stderr, "cta_placement_probe: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp properties{};
  if (!check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties")) return 1;
  const int sms = properties.multiProcessorCount;
  struct Config {
    std::string name;
    int grid_x, grid_y, shared_bytes;
  };
  // 100 KB: d=128 (2 CTAs/SM); 66 KB: d=64 (3/SM); 200 KB: d=256 (1/SM).
  std::vector<Config> configs = {
      {"2d_128x2_smem100k", 128, 2, 100 * 1024},
      {"2d_128x6_smem100k", 128, 6, 100 * 1024},
      {"1d_" + std::to_string(sms) + "_smem200k", sms, 1, 200 * 1024},
      {"1d_" + std::to_string(sms - 1) + "_smem200k", sms - 1, 1, 200 * 1024},
  };
  // Grids around the resident count: does a grid that fills every slot place its first CTAs
  // differently from one a few CTAs smaller?
  for (int per_sm : {2, 3})
    for (int short_by : {0, 1, 2, 4, 8, 16, 64, 128}) {
      const int ctas = per_sm * sms - short_by;
      configs.push_back({"1d_" + std::to_string(ctas) + (per_sm == 2 ? "_smem100k" : "_smem66k"), ctas, 1,
                         (per_sm == 2 ? 100 : 66) * 1024});
    }
  if (!check(cudaFuncSetAttribute(record_sm, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024),
             "cudaFuncSetAttribute"))
    return 1;
  FILE* csv = out_path.empty() ? nullptr : std::fopen(out_path.c_str(), "w");
  if (!out_path.empty() && csv == nullptr) {
    std::fprintf(stderr, "cta_placement_probe: cannot write %s\n", out_path.c_str());
    return 1;
  }
  if (csv) std::fprintf(csv, "config,cta,sm\n");
  std::printf("%-20s %6s | distinct SMs among the first n CTAs   | max of first 128 on one SM\n", "config", "CTAs");
  std::printf("%-20s %6s | n=64  n=128  n=132  n=200              |\n", "", "");
  for (const Config& c : configs) {
    const int ctas = c.grid_x * c.grid_y;
    int* device_sm = nullptr;
    if (!check(cudaMalloc(&device_sm, ctas * sizeof(int)), "cudaMalloc")) return 1;
    // Two launches: the first warms up; the second is the one recorded.
    for (int run = 0; run < 2; ++run)
      record_sm<<<dim3(c.grid_x, c.grid_y), 128, c.shared_bytes>>>(device_sm, 20000);
    if (!check(cudaDeviceSynchronize(), c.name.c_str())) return 1;
    std::vector<int> sm(ctas);
    cudaMemcpy(sm.data(), device_sm, ctas * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(device_sm);
    auto distinct = [&](int n) {
      n = std::min(n, ctas);
      return static_cast<int>(std::set<int>(sm.begin(), sm.begin() + n).size());
    };
    std::vector<int> per_sm(sms + 1, 0);
    for (int i = 0; i < std::min(128, ctas); ++i) ++per_sm[std::min(sm[i], sms)];
    std::printf("%-20s %6d | %4d %5d %6d %6d              | %d\n", c.name.c_str(), ctas, distinct(64), distinct(128),
                distinct(132), distinct(200), *std::max_element(per_sm.begin(), per_sm.end()));
    if (csv)
      for (int i = 0; i < ctas; ++i) std::fprintf(csv, "%s,%d,%d\n", c.name.c_str(), i, sm[i]);
  }
  if (csv) std::fclose(csv);
  return 0;
}
