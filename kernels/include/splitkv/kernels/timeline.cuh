// Timeline marks inside the decode kernels, for measurement builds only (kernels/NOTES.md, v9g).
//
// With SPLITKV_TIMELINE defined (the splitkv_kernels_timeline library), a mark reads %globaltimer
// in one thread and folds it into a slot of `timeline_slots` with atomicMin or atomicMax, so after
// one decode call each slot holds the earliest or latest time any CTA reached that point. Only one
// thread per CTA (or per warp group / warp, where those finish independently) marks, and the
// atomic's result is unused (a fire-and-forget reduction), so a mark costs a few instructions.
//
// The per-CTA trace (TimelineGroupTrace, timeline_combine_mark) writes plain stores into each CTA's
// own record instead (timeline_slots.hpp).
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

// The per-CTA trace (timeline_slots.hpp): plain stores into this CTA's (warp group's) own record.
__device__ unsigned long long timeline_split_trace[kTraceSplitRecords * kTraceSplitFields];
__device__ unsigned long long timeline_combine_trace[kTraceCombineRecords * kTraceCombineFields];

__device__ __forceinline__ unsigned long long timeline_smid() {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}

// One work item's fields in a split record; no record (past the capacity or the item count): no-op.
struct TimelineItemTrace {
  unsigned long long* fields = nullptr;
  __device__ __forceinline__ void mark(TraceItemField field, bool marking_thread) const {
    if (marking_thread && fields != nullptr) fields[static_cast<int>(field)] = timeline_now();
  }
};

// The record of one split CTA's warp group. Every thread of the group holds one (the item count
// advances alike in all of them); `marking_thread` (the group's thread 0) writes.
struct TimelineGroupTrace {
  unsigned long long* record = nullptr;
  int items = 0;
  __device__ __forceinline__ TimelineGroupTrace(int linear_cta, int group) {
    if (linear_cta < kTraceMaxCtas && group < kTraceMaxGroups)
      record = timeline_split_trace + (static_cast<long long>(linear_cta) * kTraceMaxGroups + group) * kTraceSplitFields;
  }
  __device__ __forceinline__ void mark(TraceSplitField field, bool marking_thread) const {
    if (marking_thread && record != nullptr) record[trace_split_field(field)] = timeline_now();
  }
  __device__ __forceinline__ void mark_entry(bool marking_thread) const {
    if (marking_thread && record != nullptr) {
      record[trace_split_field(TraceSplitField::sm)] = timeline_smid();
      record[trace_split_field(TraceSplitField::entry)] = timeline_now();
    }
  }
  // Call right before the group starts an item: records its number and the start.
  __device__ __forceinline__ TimelineItemTrace begin_item(int index, bool marking_thread) {
    TimelineItemTrace item;
    if (record != nullptr && items < kTraceMaxItems) {
      item.fields = record + trace_item_field(items, TraceItemField::index);
      if (marking_thread) {
        item.fields[static_cast<int>(TraceItemField::index)] = static_cast<unsigned long long>(index);
        item.fields[static_cast<int>(TraceItemField::start)] = timeline_now();
      }
    }
    ++items;
    return item;
  }
};

// A combine CTA's record.
__device__ __forceinline__ void timeline_combine_mark(TraceCombineField field, int warp, bool marking_thread) {
  if (marking_thread && blockIdx.x < kTraceCombineRecords)
    timeline_combine_trace[static_cast<long long>(blockIdx.x) * kTraceCombineFields + trace_combine_field(field, warp)] =
        timeline_now();
}
__device__ __forceinline__ void timeline_combine_mark_entry(bool marking_thread = threadIdx.x == 0) {
  if (marking_thread && blockIdx.x < kTraceCombineRecords) {
    unsigned long long* record = timeline_combine_trace + static_cast<long long>(blockIdx.x) * kTraceCombineFields;
    record[trace_combine_field(TraceCombineField::sm)] = timeline_smid();
    record[trace_combine_field(TraceCombineField::entry)] = timeline_now();
  }
}

#else

__device__ __forceinline__ void timeline_mark_min(TimelineSlot, bool = true) {}
__device__ __forceinline__ void timeline_mark_max(TimelineSlot, bool = true) {}
__device__ __forceinline__ void timeline_mark_range(TimelineSlot, TimelineSlot, bool = true) {}

struct TimelineItemTrace {
  __device__ __forceinline__ void mark(TraceItemField, bool) const {}
};
struct TimelineGroupTrace {
  __device__ __forceinline__ TimelineGroupTrace(int, int) {}
  __device__ __forceinline__ void mark(TraceSplitField, bool) const {}
  __device__ __forceinline__ void mark_entry(bool) const {}
  __device__ __forceinline__ TimelineItemTrace begin_item(int, bool) { return {}; }
};
__device__ __forceinline__ void timeline_combine_mark(TraceCombineField, int, bool) {}
__device__ __forceinline__ void timeline_combine_mark_entry(bool = true) {}

#endif

}  // namespace splitkv::kernels
