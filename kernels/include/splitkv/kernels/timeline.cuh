// Timeline marks inside the decode kernels, for measurement builds only (kernels/NOTES.md, v9g).
//
// With SPLITKV_TIMELINE defined (the splitkv_kernels_timeline library), a mark reads %globaltimer
// in one thread and folds it into a slot of `timeline_slots` with atomicMin or atomicMax, so after
// one decode call each slot holds the earliest or latest time any CTA reached that point. Only one
// thread per CTA (or per warp group / warp, where those finish independently) marks, and the
// atomic's result is unused (a fire-and-forget reduction), so a mark costs a few instructions.
//
// Without SPLITKV_TIMELINE (every production build) the helpers are empty inline functions and no
// device variable exists: the kernels compile to the same code as without the marks.
#pragma once

#include "splitkv/kernels/timeline_slots.hpp"

namespace splitkv::kernels {

#if defined(SPLITKV_TIMELINE)

// One array for the whole library; decode_attention.cu is the only translation unit including
// this header in the timeline build (a second one would define a second host shadow symbol).
__device__ unsigned long long timeline_slots[kTimelineSlotCount];

__device__ __forceinline__ unsigned long long timeline_now() {
  unsigned long long nanoseconds;
  // The memory clobber keeps the read in program order with the loads and stores around the mark.
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(nanoseconds) : : "memory");
  return nanoseconds;
}

__device__ __forceinline__ void timeline_mark_min(TimelineSlot slot, bool marking_thread = threadIdx.x == 0) {
  if (marking_thread) atomicMin(&timeline_slots[timeline_index(slot)], timeline_now());
}

__device__ __forceinline__ void timeline_mark_max(TimelineSlot slot, bool marking_thread = threadIdx.x == 0) {
  if (marking_thread) atomicMax(&timeline_slots[timeline_index(slot)], timeline_now());
}

// The earliest and the latest arrival at one point, from one timer read.
__device__ __forceinline__ void timeline_mark_range(TimelineSlot earliest, TimelineSlot latest,
                                                    bool marking_thread = threadIdx.x == 0) {
  if (marking_thread) {
    const unsigned long long now = timeline_now();
    atomicMin(&timeline_slots[timeline_index(earliest)], now);
    atomicMax(&timeline_slots[timeline_index(latest)], now);
  }
}

#else

__device__ __forceinline__ void timeline_mark_min(TimelineSlot, bool = true) {}
__device__ __forceinline__ void timeline_mark_max(TimelineSlot, bool = true) {}
__device__ __forceinline__ void timeline_mark_range(TimelineSlot, TimelineSlot, bool = true) {}

#endif

}  // namespace splitkv::kernels
