// The slots of the decode-call timeline (kernels/NOTES.md, v9g): which moments of one decode call
// the kernels record when the library is built with SPLITKV_TIMELINE, and whether a slot keeps the
// earliest (min over the marking threads) or the latest (max) time seen. The marks themselves are in
// timeline.cuh; this header is what a host program reading the slots needs.
#pragma once

#if defined(SPLITKV_TIMELINE)
#include <cuda_runtime_api.h>
#endif

#if defined(__CUDACC__)
#define SPLITKV_TIMELINE_HOST_DEVICE __host__ __device__
#else
#define SPLITKV_TIMELINE_HOST_DEVICE
#endif

namespace splitkv::kernels {

// Times are %globaltimer values (ns). "first" slots keep the minimum over the marking threads,
// "last" slots the maximum. Split-kernel slots are written by both split kernels (the fixed-count
// CTA-per-item grid and the persistent schedule of num_splits = auto).
enum class TimelineSlot : int {
  split_entry_first,          // a split CTA began, before griddepcontrol.wait
  split_entry_last,           // the last split CTA to begin
  split_after_wait_first,     // griddepcontrol.wait returned (the previous grid is complete)
  split_after_wait_last,
  split_decision_first,       // auto kernels: the batch's split count is known (reduction finished)
  split_decision_last,
  split_item_end_first,       // a work item holding tokens finished its stores (the earliest one)
  split_exit_last,            // the last split CTA (persistent: warp group) returned
  combine_entry_first,
  combine_entry_last,
  combine_decision_last,      // batch_auto_split_count returned (instant for fixed counts)
  combine_after_wait_first,   // the combine's griddepcontrol.wait returned
  combine_after_wait_last,
  combine_exit_last,          // the last combine warp returned, on any path
  // Written by the probe (tuner/bench/auto_timeline_probe.cu), not by the decode kernels:
  probe_origin,               // a kernel launched just before the call finished: the time origin
  probe_next_kernel_entry,    // a plain kernel launched just after the call began
  count
};

inline constexpr int kTimelineSlotCount = static_cast<int>(TimelineSlot::count);

SPLITKV_TIMELINE_HOST_DEVICE constexpr int timeline_index(TimelineSlot slot) { return static_cast<int>(slot); }

// Min slots start at ULLONG_MAX and are lowered; max slots start at 0 and are raised.
SPLITKV_TIMELINE_HOST_DEVICE constexpr bool timeline_slot_keeps_min(TimelineSlot slot) {
  switch (slot) {
    case TimelineSlot::split_entry_first:
    case TimelineSlot::split_after_wait_first:
    case TimelineSlot::split_decision_first:
    case TimelineSlot::split_item_end_first:
    case TimelineSlot::combine_entry_first:
    case TimelineSlot::combine_after_wait_first:
      return true;
    default:
      return false;
  }
}

constexpr const char* timeline_slot_name(TimelineSlot slot) {
  switch (slot) {
    case TimelineSlot::split_entry_first: return "split_entry_first";
    case TimelineSlot::split_entry_last: return "split_entry_last";
    case TimelineSlot::split_after_wait_first: return "split_after_wait_first";
    case TimelineSlot::split_after_wait_last: return "split_after_wait_last";
    case TimelineSlot::split_decision_first: return "split_decision_first";
    case TimelineSlot::split_decision_last: return "split_decision_last";
    case TimelineSlot::split_item_end_first: return "split_item_end_first";
    case TimelineSlot::split_exit_last: return "split_exit_last";
    case TimelineSlot::combine_entry_first: return "combine_entry_first";
    case TimelineSlot::combine_entry_last: return "combine_entry_last";
    case TimelineSlot::combine_decision_last: return "combine_decision_last";
    case TimelineSlot::combine_after_wait_first: return "combine_after_wait_first";
    case TimelineSlot::combine_after_wait_last: return "combine_after_wait_last";
    case TimelineSlot::combine_exit_last: return "combine_exit_last";
    case TimelineSlot::probe_origin: return "probe_origin";
    case TimelineSlot::probe_next_kernel_entry: return "probe_next_kernel_entry";
    case TimelineSlot::count: break;
  }
  return "?";
}

// The per-CTA trace (kernels/NOTES.md, v9g "Per-CTA trace"): besides the min/max slots, each split
// CTA (persistent kernel: each warp group) and each combine CTA writes its own record of
// %globaltimer values with plain stores by one thread (per warp where warps finish on their own).
// 0 = not written (a record is valid when its entry field is nonzero). Records past the capacity
// are not written. Index of a split record: (linear CTA = blockIdx.x + gridDim.x * blockIdx.y) *
// kTraceMaxGroups + warp group; of a combine record: blockIdx.x.
inline constexpr int kTraceMaxCtas = 4096;
inline constexpr int kTraceMaxGroups = 3;
inline constexpr int kTraceMaxItems = 3;  // work items recorded per warp group (the first ones)

enum class TraceSplitField : int {
  sm,          // %smid (raw)
  entry,       // before griddepcontrol.wait
  after_wait,  // griddepcontrol.wait returned
  decision,    // auto: the batch's split count is known in this group (reduction finished)
  exit,        // the group returned
  check,       // persistent auto with the guess: the group begins the guess's check (a warp vote
               // over the lengths loaded after the wait; before v33 a block-wide reduction)
  first_item,  // kTraceMaxItems x TraceItemField follow from here
};
enum class TraceItemField : int {
  index,        // the item's number (split-major: split x rows + row; CTA-per-item grid: linear CTA)
  start,        // the group begins the item (after its previous item's sync / after the decision)
  after_issue,  // after_issue() returned: the first tiles' loads are issued (guess: the decision held)
  first_tile,   // the first copy_async_wait of the tile loop returned (thread 0's share of tile 0)
  end,          // the item's stores are issued (items that hold tokens only)
  epilogue,     // the tile loop is done (its last copies waited for, the group synced): the merge begins
  merge_staged,  // the warps' unscaled rows, maxima and sums are in shared memory (the merge's one sync
                 // returned; before v32 there were two syncs, marked merge_stats and merge_rows)
  issued,        // the first tiles' copies are committed, before at_issue() (the guess's check)
  count
};
inline constexpr int kTraceItemFields = static_cast<int>(TraceItemField::count);
inline constexpr int kTraceSplitFields = 32;  // stride of a split record (30 used)
static_assert(static_cast<int>(TraceSplitField::first_item) + kTraceMaxItems * kTraceItemFields <= kTraceSplitFields,
              "split trace record layout");
inline constexpr int kTraceSplitRecords = kTraceMaxCtas * kTraceMaxGroups;

inline constexpr int kTraceCombineWarps = 4;  // kCombineRowsPerCta
enum class TraceCombineField : int {
  sm,
  entry,
  decision,          // batch_auto_split_count returned (thread 0)
  after_wait_warp0,  // + warp: that warp's griddepcontrol.wait returned (warps with live > 1 only)
  exit_warp0 = after_wait_warp0 + kTraceCombineWarps,  // + warp: that warp returned, on any path
};
inline constexpr int kTraceCombineFields = 16;  // stride (11 used)
static_assert(static_cast<int>(TraceCombineField::exit_warp0) + kTraceCombineWarps <= kTraceCombineFields,
              "combine trace record layout");
inline constexpr int kTraceCombineRecords = kTraceMaxCtas;

SPLITKV_TIMELINE_HOST_DEVICE constexpr int trace_split_field(TraceSplitField field) { return static_cast<int>(field); }
SPLITKV_TIMELINE_HOST_DEVICE constexpr int trace_item_field(int item, TraceItemField field) {
  return static_cast<int>(TraceSplitField::first_item) + item * kTraceItemFields + static_cast<int>(field);
}
SPLITKV_TIMELINE_HOST_DEVICE constexpr int trace_combine_field(TraceCombineField field, int warp = 0) {
  return static_cast<int>(field) + warp;
}

#if defined(SPLITKV_TIMELINE)
// Device address of the kernels' slot array ([kTimelineSlotCount] unsigned long long). Defined in
// decode_attention.cu, the one translation unit that holds the array: without relocatable device
// code another translation unit cannot name it, so callers reset, read and (for the probe_* slots)
// write it through this pointer.
cudaError_t timeline_slots_address(unsigned long long** device_address);
// Device addresses of the per-CTA trace: [kTraceSplitRecords * kTraceSplitFields] and
// [kTraceCombineRecords * kTraceCombineFields] unsigned long long. The caller zeroes them.
cudaError_t timeline_trace_address(unsigned long long** split_records, unsigned long long** combine_records);
#endif

}  // namespace splitkv::kernels
