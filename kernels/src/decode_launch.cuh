// Launch side of the decode kernels, shared by the translation units that instantiate them (the
// bf16/fp16 caches in decode_attention.cu, the fp8 caches in decode_attention_fp8.cu, so the two
// sets compile in parallel). Internal: included by those two files only.
#pragma once

#include <cmath>
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <string>
#include <utility>

#include "splitkv/decode_attention.hpp"
#include "splitkv/kernels/combine_splits.cuh"
#include "splitkv/kernels/decode_split_kv.cuh"
#include "splitkv/kernels/decode_unpacked_gqa.cuh"

namespace splitkv {
namespace detail {

// Records the message last_error_message() returns on this thread; defined once, in
// decode_attention.cu.
Status fail(Status status, std::string message);

// The combine of a call whose split kernel has run, for any dtype and head_dim: the fp8 caches'
// calls use the bf16/fp16 one through it, so its kernels are compiled once, in decode_attention.cu.
cudaError_t launch_combine_for(const DecodeParams& params, const kernels::DecodeKernelArgs& args, bool auto_table,
                               cudaStream_t stream);

// The fp8 caches' dispatch, in decode_attention_fp8.cu.
Status dispatch_fp8_cache(const DecodeParams& params, const kernels::DecodeKernelArgs& args, DecodeKernel kernel,
                          cudaStream_t stream);

}  // namespace detail
namespace {

using detail::fail;


bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }
bool is_aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

int log2_exact(int x) {
  int shift = 0;
  while ((1 << shift) < x) ++shift;
  return shift;
}

// Raising the dynamic shared-memory limit is per function and per device; only ever raised, so a
// launch that asks less than an earlier one finds the limit already high enough.
cudaError_t allow_shared_memory(const void* kernel, int bytes) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, int> allowed;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  std::lock_guard<std::mutex> lock(mutex);
  int& limit = allowed[{device, kernel}];
  if (bytes <= limit) return cudaSuccess;
  error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (error == cudaSuccess) limit = bytes;
  return error;
}

// CTAs of `kernel` that fit on the whole device at once (the persistent grid). Asked once per
// device, kernel and shared-memory size: the occupancy query costs microseconds of host time.
cudaError_t resident_ctas(const void* kernel, int shared_bytes, int* ctas) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, int>, int> known;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, kernel, shared_bytes);
  if (auto found = known.find(key); found != known.end()) {
    *ctas = found->second;
    return cudaSuccess;
  }
  int per_sm = 0, sms = 0;
  error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kernels::kThreadsPerCta, shared_bytes);
  if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  *ctas = known[key] = per_sm * sms;
  return cudaSuccess;
}

// An attribute of the current device, asked once per device and attribute: the query costs host time
// on every call otherwise.
cudaError_t device_attribute(cudaDeviceAttr attribute, int* value) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaDeviceAttr>, int> known;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = known.find({device, attribute}); found != known.end()) {
    *value = found->second;
    return cudaSuccess;
  }
  error = cudaDeviceGetAttribute(value, attribute, device);
  if (error == cudaSuccess) known[{device, attribute}] = *value;
  return error;
}

// The most dynamic shared memory one CTA may ask for on the current device.
cudaError_t shared_memory_per_cta(int* bytes) {
  return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, bytes);
}

// Speculative prefetch before the grid dependency wait: at most this many tiles per work item,
// and what all resident items prefetch stays within this share of L2, so it does not evict what
// the previous kernel, still running, reads.
constexpr int kPrefetchTileCap = 8;
constexpr int kPrefetchL2Percent = 25;

// Fills args.prefetch_tiles / prefetch_ctas for a launch with `items_in_flight` work items resident
// at once, of which CTAs below `prefetch_ctas` prefetch.
cudaError_t plan_speculative_prefetch(const DecodeParams& params, long long items_in_flight, int prefetch_ctas,
                                      kernels::DecodeKernelArgs& args) {
  args.prefetch_tiles = 0;
  args.prefetch_ctas = 0;
  if (params.layout != KvLayout::contiguous) return cudaSuccess;
  int l2_bytes = 0;
  const cudaError_t error = device_attribute(cudaDevAttrL2CacheSize, &l2_bytes);
  if (error != cudaSuccess) return error;
  const long long tile_bytes = 2LL * kTokensPerTile * params.head_dim * params.kv_element_bytes();  // K and V
  const long long fit = static_cast<long long>(l2_bytes) * kPrefetchL2Percent / 100 /
                        (std::max(items_in_flight, 1LL) * tile_bytes);
  args.prefetch_tiles = static_cast<int>(std::min<long long>(kPrefetchTileCap, fit));
  args.prefetch_ctas = prefetch_ctas;
  return cudaSuccess;
}

// Programmatic dependent launch needs sm_90; older devices get plain stream order.
bool supports_programmatic_launch() {
  int major = 0;
  return device_attribute(cudaDevAttrComputeCapabilityMajor, &major) == cudaSuccess && major >= 9;
}

template <typename... KernelArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, int shared_bytes,
                          cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<std::size_t>(shared_bytes);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (supports_programmatic_launch()) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// The auto table as the auto kernels take it (nothing for the others).
template <bool kAuto>
kernels::AutoTableArgument<kAuto> auto_table_argument(const DecodeParams& params) {
  kernels::AutoTableArgument<kAuto> argument{};
  if constexpr (kAuto) {
    argument.table = params.auto_splits;
    argument.launch_batch_row = auto_batch_class(params.batch);
  }
  return argument;
}

// Per-sequence split counts on the persistent grid: as many warp groups per CTA as one-item CTAs
// fit on an SM (one CTA per SM, so the first items land on distinct SMs), each group one work item
// in flight; at most the resident CTAs, never more CTAs than the largest possible number of items.
template <typename Element, int kHeadDim, bool kPaged, bool kAuto, bool kFp8>
cudaError_t launch_persistent(const DecodeParams& params, const kernels::DecodeKernelArgs& args,
                              cudaStream_t stream) {
  constexpr int kWarpGroups = kernels::persistent_warp_groups<kHeadDim, kFp8>();
  constexpr auto kernel = &kernels::decode_split_kv_persistent_kernel<Element, kHeadDim, kPaged, kAuto, kWarpGroups, kFp8>;
  const int shared_bytes = kernels::persistent_shared_bytes<kHeadDim, kFp8>(kWarpGroups, params.batch);
  cudaError_t error = allow_shared_memory(
      reinterpret_cast<const void*>(kernel), kernels::persistent_shared_bytes<kHeadDim, kFp8>(kWarpGroups, kMaxPersistentBatch));
  int resident = 0;
  if (error == cudaSuccess) error = resident_ctas(reinterpret_cast<const void*>(kernel), shared_bytes, &resident);
  if (error != cudaSuccess) return error;
  const long long most_items = static_cast<long long>(params.batch) * params.num_kv_heads * params.num_splits;
  const int grid = static_cast<int>(std::min<long long>(most_items, std::max(resident, 1)));
  kernels::DecodeKernelArgs launched = args;
  error = plan_speculative_prefetch(params, static_cast<long long>(grid) * kWarpGroups, grid, launched);
  if (error != cudaSuccess) return error;
  return launch_kernel(kernel, dim3(grid), dim3(kernels::kThreadsPerCta * kWarpGroups), shared_bytes, stream, launched,
                       auto_table_argument<kAuto>(params));
}

// Whether the persistent CTA (its warp groups, the largest batch's item offsets and the decision's
// arrays) fits the current device's shared memory per CTA. Where it does not (devices before
// sm_90), the CTA-per-item grid serves the same calls.
template <int kHeadDim, bool kFp8>
cudaError_t persistent_grid_fits(bool* fits) {
  int per_cta_bytes = 0;
  const cudaError_t error = shared_memory_per_cta(&per_cta_bytes);
  if (error != cudaSuccess) return error;
  const int static_bytes = 2048;  // the decision's and the scan's __shared__ arrays, with room
  *fits = kernels::persistent_shared_bytes<kHeadDim, kFp8>(kernels::persistent_warp_groups<kHeadDim, kFp8>(),
                                                           kMaxPersistentBatch) +
              static_bytes <=
          per_cta_bytes;
  return cudaSuccess;
}

// One CTA per possible work item: grid (batch x kv_heads, num_splits).
template <typename Element, int kHeadDim, bool kPaged, bool kAuto, bool kFp8>
cudaError_t launch_grid(const DecodeParams& params, const kernels::DecodeKernelArgs& args, cudaStream_t stream) {
  const int shared_bytes =
      kFp8 ? kernels::fp8_decode_shared_bytes<kHeadDim>() : kernels::decode_shared_bytes<kHeadDim>();
  const void* kernel = reinterpret_cast<const void*>(&kernels::decode_split_kv_kernel<Element, kHeadDim, kPaged, kAuto, kFp8>);
  const long long ctas = static_cast<long long>(params.batch) * params.num_kv_heads * params.num_splits;
  cudaError_t error = allow_shared_memory(kernel, shared_bytes);
  // Only the CTAs that can be resident at the launch (the first wave) can run ahead of the wait;
  // a later one would only put the length's round trip before its own loads.
  int resident = 0;
  if (error == cudaSuccess) error = resident_ctas(kernel, shared_bytes, &resident);
  if (error != cudaSuccess) return error;
  kernels::DecodeKernelArgs launched = args;
  launched.early_ctas = resident;
  error = plan_speculative_prefetch(params, std::min<long long>(ctas, resident), resident, launched);
  if (error != cudaSuccess) return error;
  return launch_kernel(kernels::decode_split_kv_kernel<Element, kHeadDim, kPaged, kAuto, kFp8>,
                       dim3(params.batch * params.num_kv_heads, params.num_splits), dim3(kernels::kThreadsPerCta),
                       shared_bytes, stream, launched, auto_table_argument<kAuto>(params));
}

template <typename Element, int kHeadDim, bool kAuto>
cudaError_t launch_combine(const DecodeParams& params, const kernels::DecodeKernelArgs& args, cudaStream_t stream) {
  const int rows = params.batch * params.num_heads;
  return launch_kernel(kernels::combine_splits_kernel<Element, kHeadDim, kAuto>,
                       dim3(ceil_div(rows, kernels::kCombineRowsPerCta)), dim3(kernels::kCombineRowsPerCta * 32), 0,
                       stream, args, rows, auto_table_argument<kAuto>(params));
}

template <typename Element, int kHeadDim, bool kPaged, bool kFp8>
Status launch(const DecodeParams& params, const kernels::DecodeKernelArgs& args, DecodeKernel kernel,
              cudaStream_t stream) {
  const bool auto_table = params.per_sequence_splits && params.splits_per_sequence == nullptr;
  const bool per_sequence = auto_table || params.splits_per_sequence != nullptr;
  if constexpr (kFp8) {
    if (kernel != DecodeKernel::packed_gqa)
      return fail(Status::unsupported, "an fp8_e4m3 cache runs on the packed_gqa kernel only");
  }
  if (auto_table && kernel != DecodeKernel::packed_gqa)
    return fail(Status::unsupported, "num_splits = auto (per_sequence_splits with auto_splits) runs on the "
                                     "packed_gqa kernel only");
  bool persistent = kernel == DecodeKernel::packed_gqa && per_sequence && params.batch <= kMaxPersistentBatch;
  cudaError_t error = persistent ? persistent_grid_fits<kHeadDim, kFp8>(&persistent) : cudaSuccess;
  if (error != cudaSuccess)
    return fail(Status::cuda_error, std::string("shared memory per CTA: ") + cudaGetErrorString(error));
  if (persistent) {
    error = auto_table ? launch_persistent<Element, kHeadDim, kPaged, true, kFp8>(params, args, stream)
                       : launch_persistent<Element, kHeadDim, kPaged, false, kFp8>(params, args, stream);
  } else if (kernel == DecodeKernel::packed_gqa) {
    error = auto_table ? launch_grid<Element, kHeadDim, kPaged, true, kFp8>(params, args, stream)
                       : launch_grid<Element, kHeadDim, kPaged, false, kFp8>(params, args, stream);
  } else if constexpr (!kFp8) {
    const dim3 grid(params.batch * params.num_heads, params.num_splits);
    error = launch_kernel(kernels::decode_unpacked_gqa_kernel<Element, kHeadDim, kPaged>, grid,
                          dim3(kernels::kThreadsPerCta), 0, stream, args);
  }
  if (error != cudaSuccess)
    return fail(Status::cuda_error, std::string("split kernel launch: ") + cudaGetErrorString(error));

  if (params.num_splits > 1) {
    if constexpr (kFp8)
      error = detail::launch_combine_for(params, args, auto_table, stream);
    else
      error = auto_table ? launch_combine<Element, kHeadDim, true>(params, args, stream)
                         : launch_combine<Element, kHeadDim, false>(params, args, stream);
    if (error != cudaSuccess)
      return fail(Status::cuda_error, std::string("combine kernel launch: ") + cudaGetErrorString(error));
  }
  return Status::ok;
}

template <typename Element, int kHeadDim, bool kFp8>
Status dispatch_layout(const DecodeParams& params, const kernels::DecodeKernelArgs& args, DecodeKernel kernel,
                       cudaStream_t stream) {
  return params.layout == KvLayout::paged ? launch<Element, kHeadDim, true, kFp8>(params, args, kernel, stream)
                                          : launch<Element, kHeadDim, false, kFp8>(params, args, kernel, stream);
}

template <typename Element, bool kFp8>
Status dispatch_head_dim(const DecodeParams& params, const kernels::DecodeKernelArgs& args, DecodeKernel kernel,
                         cudaStream_t stream) {
  switch (params.head_dim) {
    case 64: return dispatch_layout<Element, 64, kFp8>(params, args, kernel, stream);
    case 128: return dispatch_layout<Element, 128, kFp8>(params, args, kernel, stream);
    case 256: return dispatch_layout<Element, 256, kFp8>(params, args, kernel, stream);
    default: return fail(Status::unsupported, "head_dim must be 64, 128 or 256");
  }
}

}  // namespace
}  // namespace splitkv
