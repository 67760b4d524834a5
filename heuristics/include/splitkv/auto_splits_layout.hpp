// Rows and columns of the num_splits = auto table: which batch class and which length bucket a
// batch falls in. The host code that fills the table (NumSplitsPolicy::fill_auto_splits) and the
// device code that reads it (split_partition.hpp, the kernels) must agree on every boundary, so
// both include this one definition. It lives in the engines' include root because an engine
// compiles num_splits.hpp with that root alone; the kernels reach it through the header-only
// target splitkv::auto_splits_layout, not through the heuristics.
//
// Self-contained on purpose: no other splitkv header, so it cannot pull a second include root in.
#pragma once

#if defined(__CUDACC__)
#define SPLITKV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPLITKV_HOST_DEVICE inline
#endif

namespace splitkv {

// The table's extent. AutoSplitsTable (decode_params.hpp) is laid out with these;
// split_partition.hpp asserts that the two agree.
inline constexpr int kAutoLengthBuckets = 24;  // lengths up to 2^23 tokens
inline constexpr int kAutoBatchClasses = 40;   // 1..8 exactly, then quarter octaves up to 2048

// floor(log2(x)) for x >= 1, one instruction on either side.
SPLITKV_HOST_DEVICE int floor_log2(unsigned x) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(x);
#else
  return 31 - __builtin_clz(x);
#endif
}

// Log-scale bucket of a length: the i whose 2^i is nearest to `length` (boundaries at the
// geometric midpoints 2^(i+1/2)), clamped to [0, kAutoLengthBuckets).
SPLITKV_HOST_DEVICE int length_bucket(int length) {
  if (length <= 1) return 0;
  const int floor = floor_log2(static_cast<unsigned>(length));
  // length >= 2^(floor + 1/2)  <=>  length^2 >= 2^(2 floor + 1)
  const long long squared = static_cast<long long>(length) * length;
  const int bucket = squared >= (1ll << (2 * floor + 1)) ? floor + 1 : floor;
  return bucket < kAutoLengthBuckets ? bucket : kAutoLengthBuckets - 1;
}

// The batch that stands for effective-batch class r: 1..8 exactly (small batches differ most),
// then round(8 * 2^(k/4)) for k = r - 7, quarter octaves like the fitted table's CTA buckets
// (10, 11, 13, 16, 19, 23, 27, 32, ..., 2048).
SPLITKV_HOST_DEVICE int auto_batch_class_batch(int batch_class) {
  if (batch_class < 8) return batch_class + 1;
  const int k = batch_class - 7;
  // A conditional, not a 4-entry array: an indexed local array lives in local memory on the
  // device, and this sits on every CTA's critical path.
  const int step = k % 4;
  const float quarter_octave = step == 0 ? 1.f : step == 1 ? 1.18920712f : step == 2 ? 1.41421356f : 1.68179283f;
  return static_cast<int>(static_cast<float>(8 << (k / 4)) * quarter_octave + 0.5f);
}

// Class of an effective batch: the nearest representative on a log scale (boundaries at the
// geometric midpoints), clamped to the last class. At most five steps: a batch in [2^f, 2^(f+1))
// with f >= 3 falls in classes 4f - 5 .. 4f - 1.
SPLITKV_HOST_DEVICE int auto_batch_class(int effective_batch) {
  if (effective_batch <= 8) return effective_batch < 1 ? 0 : effective_batch - 1;
  const long long squared = static_cast<long long>(effective_batch) * effective_batch;
  int batch_class = 4 * floor_log2(static_cast<unsigned>(effective_batch)) - 6;
  if (batch_class > kAutoBatchClasses - 1) batch_class = kAutoBatchClasses - 1;
  while (batch_class + 1 < kAutoBatchClasses &&
         squared >= static_cast<long long>(auto_batch_class_batch(batch_class)) *
                        auto_batch_class_batch(batch_class + 1))
    ++batch_class;
  return batch_class;
}

// Sequences of the max length that do the batch's work: total / max, rounded to nearest, in
// [1, batch]. The host's NumSplitsShape lookup (num_splits.hpp, effective_batch) and the
// device's num_splits = auto both round with this.
SPLITKV_HOST_DEVICE int rounded_effective_batch(long long total_length, int max_length, int batch) {
  if (max_length <= 0 || total_length <= 0) return batch < 1 ? 1 : batch;
  const long long rounded = (2 * total_length + max_length) / (2LL * max_length);
  return rounded < 1 ? 1 : (rounded > batch ? batch : static_cast<int>(rounded));
}

}  // namespace splitkv
