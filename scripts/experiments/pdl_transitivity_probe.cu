// Does a programmatic successor's griddepcontrol.wait cover a grid two launches back, when the
// grid in between exits without waiting? splitkv's combine kernel lets CTAs whose rows need no
// merge exit before their wait (kernels/NOTES.md, v22); if every CTA does, the combine may complete
// while the split kernel still writes the output. Here: A writes `out` after spinning, B (PDL)
// triggers and exits at once, C (PDL) waits and copies `out`. A stale copy means the wait did not
// cover A. Build: nvcc -arch=sm_90a -o pdl_probe scripts/experiments/pdl_transitivity_probe.cu
#include <cstdio>
#include <cuda_runtime.h>

__global__ void poison(int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = -1;
}
__global__ void slow_writer(int* out, int n, long long spin_cycles, int value) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}
__global__ void exits_without_wait(int guarded) {
  asm volatile("griddepcontrol.launch_dependents;");
  if (guarded && blockIdx.x == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
}
__global__ void snapshot(const int* out, int* copy, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) copy[i] = out[i];
}

template <typename... Args>
void launch_pdl(void (*kernel)(Args...), int grid, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(128);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, kernel, args...);
}

int main() {
  const int n = 1 << 16;
  int *out, *copy, *host = new int[n];
  cudaMalloc(&out, n * sizeof(int));
  cudaMalloc(&copy, n * sizeof(int));
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  for (int guarded = 0; guarded <= 1; ++guarded) {
    int stale_runs = 0, runs = 50;
    for (int run = 0; run < runs; ++run) {
      poison<<<64, 128, 0, stream>>>(out, n);
      launch_pdl(slow_writer, 132, stream, out, n, 200000LL, run + 1);  // ~100 us at ~2 GHz
      launch_pdl(exits_without_wait, 8, stream, guarded);
      launch_pdl(snapshot, 64, stream, (const int*)out, copy, n);
      cudaMemcpyAsync(host, copy, n * sizeof(int), cudaMemcpyDeviceToHost, stream);
      cudaStreamSynchronize(stream);
      int stale = 0;
      for (int i = 0; i < n; ++i) stale += host[i] != run + 1;
      stale_runs += stale > 0;
    }
    std::printf("B %s: %d of %d runs saw A's output stale in C (%s)\n",
                guarded ? "with CTA 0 waiting" : "exiting without wait", stale_runs, runs,
                cudaGetErrorString(cudaGetLastError()));
  }
  return 0;
}
