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

#if defined(SPLITKV_TIMELINE)
// Device address of the kernels' slot array ([kTimelineSlotCount] unsigned long long). Defined in
// decode_attention.cu, the one translation unit that holds the array: without relocatable device
// code another translation unit cannot name it, so callers reset, read and (for the probe_* slots)
// write it through this pointer.
cudaError_t timeline_slots_address(unsigned long long** device_address);
#endif

}  // namespace splitkv::kernels
