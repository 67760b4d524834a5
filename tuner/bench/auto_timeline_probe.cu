// Where does num_splits = auto spend the ~0.9 µs per call it loses against the fixed-count kernel
// at the same split count (capacity scenario, kernels/NOTES.md v9c-v9e)? This probe runs one decode
// call at a time on the SPLITKV_TIMELINE build of the kernels, which records with %globaltimer
// when the split and combine CTAs enter, pass griddepcontrol.wait, know the batch's split count,
// finish their first work item and exit (kernels/include/splitkv/kernels/timeline_slots.hpp).
//
//   auto_timeline_probe [--out timeline.csv] [--calls N] [--warmup N] [--chain 1,4] [--hold-us US]
//                       [--trace-csv trace.csv] [--trace-samples N] [--trace-order alternate|grouped]
//                       [--trace-chain K]
//
// Each timed sample: reset the slots; launch a gate kernel that spins until the host has enqueued
// the whole call and then records its own end (the time origin); the decode call(s); a plain
// kernel that records when it starts (the stream's "call finished" as the next kernel sees it);
// synchronize; read the slots. Times are reported relative to the origin, so host launch latency
// is not in them. Modes: `fixed` at the host heuristic's count (NumSplitsPolicy on the real length,
// as scripts/bench_peers.py's splitkv_heuristic) and `auto` (the device's choice from the
// AutoSplitsTable, grid bound = auto_grid_bound(table, batch, capacity), as its splitkv_auto).
// `--chain K` issues K calls back to back inside one sample (the benchmark's steady state); then
// "first" slots belong to the first call and "last" slots to the last one.
//
// Output: CSV, one row per shape x mode x chain x slot (median/p10/p90 ns after the origin, and
// mode auto_minus_fixed for the difference of medians); a printed table; the deltas auto - fixed
// of the moments that make up the call; and the step of %globaltimer seen on this device.
//
// `--trace-csv FILE` adds the per-CTA trace (timeline_slots.hpp, TraceSplitField / TraceCombineField):
// per shape, after the warm-up, N single-call samples (chain 1) per mode, alternating fixed and auto;
// every written record becomes a CSV row (ns after the sample's origin), and a summary per shape and
// mode is printed. `--trace-chain K` traces the last of K calls back to back instead, the benchmark's
// steady state, where the single call's cold start is gone: each call's marks overwrite the previous
// call's, and every mark a call makes comes after the same mark of the call before it (a split CTA
// passes its wait only once the previous combine is complete), so the records read back are the
// last call's (decision - after wait, first tile - after_issue, item end - start, item-carrying
// groups per SM, combine exit - after wait and how many combine CTAs share an SM with such a group).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "bf16_host.hpp"
#include "splitkv/decode_attention.hpp"
#include "splitkv/kernels/timeline_slots.hpp"
#include "splitkv/num_splits.hpp"
#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/device_random.cuh"

namespace {

using splitkv::kernels::kTimelineSlotCount;
using splitkv::kernels::timeline_index;
using splitkv::kernels::timeline_slot_keeps_min;
using splitkv::kernels::timeline_slot_name;
using splitkv::kernels::TimelineSlot;
using SlotTimes = std::array<unsigned long long, kTimelineSlotCount>;
using splitkv::kernels::kTraceCombineFields;
using splitkv::kernels::kTraceCombineRecords;
using splitkv::kernels::kTraceCombineWarps;
using splitkv::kernels::kTraceMaxCtas;
using splitkv::kernels::kTraceMaxGroups;
using splitkv::kernels::kTraceMaxItems;
using splitkv::kernels::kTraceSplitFields;
using splitkv::kernels::kTraceSplitRecords;
using splitkv::kernels::trace_combine_field;
using splitkv::kernels::trace_item_field;
using splitkv::kernels::trace_split_field;
using splitkv::kernels::TraceCombineField;
using splitkv::kernels::TraceItemField;
using splitkv::kernels::TraceSplitField;

// The capacity scenario of issue #7 (its 32/8 and 64/8 head counts).
constexpr int kNumKvHeads = 8;
constexpr int kHeadDim = 128;
constexpr int kCacheCapacity = 131072;

struct ShapeCase {
  int batch;
  int context_len;  // every sequence's real length
  int num_heads;
};
// L512 against L4096 at the same items per CTA (B8 64/8 L512 and B1 32/8 L4096: 128 items of 4
// tiles), and 32/8 against 64/8 at L512, where `auto` loses most (kernels/NOTES.md, session 24).
constexpr ShapeCase kShapes[] = {{1, 512, 32},  {1, 512, 64},   {8, 512, 64},  {1, 4096, 32},
                                 {4, 4096, 32}, {16, 512, 32}, {16, 4096, 32}};

enum class Mode { fixed, automatic };
const char* mode_name(Mode mode) { return mode == Mode::fixed ? "fixed" : "auto"; }

// Every CUDA call goes through this: the message names the call and where it was made.
void check_cuda(cudaError_t error, const char* call, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(call) + " (auto_timeline_probe.cu:" + std::to_string(line) +
                             ") failed: " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}
#define CHECK_CUDA(call) check_cuda((call), #call, __LINE__)

void check_decode(splitkv::Status status, const char* what) {
  if (status != splitkv::Status::ok)
    throw std::runtime_error(std::string(what) + ": splitkv::decode_attention failed: " +
                             splitkv::last_error_message());
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now) : : "memory");
  return now;
}

// Host-mapped words the gate kernel polls and reports through.
struct Gate {
  volatile int release;    // host sets 1 once the whole sample is enqueued
  volatile int timed_out;  // device sets 1 if it gave up waiting
};

// The time origin of a sample. It holds the stream until the host has enqueued the decode call
// behind it, so the call's kernels are queued, not still being launched, when it ends; then it
// records its own end. It never triggers programmatic dependent launch, so the split kernel
// (launched by the library with that attribute) starts only once this grid has completed: the
// situation of a decode call behind any ordinary kernel.
__global__ void hold_then_mark_origin(Gate* gate, unsigned long long* slots, unsigned long long timeout_ns) {
  const unsigned long long start = globaltimer_ns();
  while (gate->release == 0) {
    if (globaltimer_ns() - start > timeout_ns) {
      gate->timed_out = 1;
      break;
    }
  }
  slots[timeline_index(TimelineSlot::probe_origin)] = globaltimer_ns();
}

// Launched plainly after the call: when a stream-ordered kernel behind the call gets to run.
__global__ void mark_next_kernel_entry(unsigned long long* slots) {
  slots[timeline_index(TimelineSlot::probe_next_kernel_entry)] = globaltimer_ns();
}

// Back-to-back timer reads in one thread: the differences show the timer's update step.
__global__ void read_globaltimer_burst(unsigned long long* times, int count) {
  for (int i = 0; i < count; ++i) times[i] = globaltimer_ns();
}

// Smallest nonzero step of %globaltimer seen in a burst of reads, and the distinct steps.
double measure_globaltimer_step(cudaStream_t stream, std::string* description) {
  constexpr int kReads = 1000;
  unsigned long long* device_times = nullptr;
  CHECK_CUDA(cudaMalloc(&device_times, kReads * sizeof(unsigned long long)));
  std::vector<unsigned long long> times(kReads);
  for (int run = 0; run < 2; ++run) {  // the first run loads the module
    read_globaltimer_burst<<<1, 1, 0, stream>>>(device_times, kReads);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  CHECK_CUDA(cudaMemcpy(times.data(), device_times, kReads * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(device_times));
  std::map<unsigned long long, int> steps;  // nonzero difference -> how often
  int changes = 0;
  for (int i = 1; i < kReads; ++i) {
    if (times[i] < times[i - 1]) throw std::runtime_error("%globaltimer went backwards within one thread");
    if (times[i] != times[i - 1]) {
      ++steps[times[i] - times[i - 1]];
      ++changes;
    }
  }
  std::ostringstream text;
  text << kReads << " reads in one thread spanning " << (times.back() - times.front()) << " ns; the value changed "
       << changes << " times; nonzero steps (ns x count):";
  int listed = 0;
  for (const auto& [step, count] : steps) {
    if (++listed > 12) {
      text << " ...";
      break;
    }
    text << " " << step << "x" << count;
  }
  *description = text.str();
  return steps.empty() ? NAN : static_cast<double>(steps.begin()->first);
}

// Linear interpolation between order statistics; NAN for no samples.
double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const double position = fraction * static_cast<double>(values.size() - 1);
  const std::size_t below = static_cast<std::size_t>(position);
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (position - static_cast<double>(below)) * (values[above] - values[below]);
}

bool slot_was_written(TimelineSlot slot, unsigned long long value) {
  return timeline_slot_keeps_min(slot) ? value != ULLONG_MAX : value != 0;
}

// The rows of the report: every slot but the origin, and the end of the call (the later of the
// split kernel's and the combine's last exit; a fixed single split launches no combine).
struct ReportRow {
  std::string name;
  bool from_slot;
  TimelineSlot slot;
};
std::vector<ReportRow> report_rows() {
  std::vector<ReportRow> rows;
  for (int i = 0; i < kTimelineSlotCount; ++i) {
    const auto slot = static_cast<TimelineSlot>(i);
    if (slot != TimelineSlot::probe_origin) rows.push_back({timeline_slot_name(slot), true, slot});
  }
  rows.push_back({"call_end", false, TimelineSlot::count});
  return rows;
}

// ns after the origin, or NAN where the slot was not written in this sample.
double time_after_origin(const SlotTimes& times, const ReportRow& row) {
  const unsigned long long origin = times[timeline_index(TimelineSlot::probe_origin)];
  auto relative = [&](TimelineSlot slot) {
    const unsigned long long value = times[timeline_index(slot)];
    return slot_was_written(slot, value) ? static_cast<double>(static_cast<long long>(value - origin)) : NAN;
  };
  if (row.from_slot) return relative(row.slot);
  const double split_end = relative(TimelineSlot::split_exit_last);
  const double combine_end = relative(TimelineSlot::combine_exit_last);
  if (std::isnan(combine_end)) return split_end;
  return std::isnan(split_end) ? combine_end : std::max(split_end, combine_end);
}

struct Summary {
  int written = 0;
  double median = NAN, p10 = NAN, p90 = NAN;
};
Summary summarize(const std::vector<SlotTimes>& samples, const ReportRow& row) {
  std::vector<double> values;
  for (const SlotTimes& times : samples) {
    const double value = time_after_origin(times, row);
    if (!std::isnan(value)) values.push_back(value);
  }
  return {static_cast<int>(values.size()), percentile(values, 0.5), percentile(values, 0.1), percentile(values, 0.9)};
}

std::string format_ns(double value) {
  if (std::isnan(value)) return "";
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f", value);
  return text;
}

// Device buffers of one shape: K/V at the full capacity, read through `copies` windows of
// context_len tokens inside each sequence's slot (the stride stays the capacity), so consecutive
// calls read different bytes and the working set exceeds L2 where the capacity allows, as the
// benchmark's rotating copies do.
struct ShapeBuffers {
  __nv_bfloat16* k = nullptr;
  __nv_bfloat16* v = nullptr;
  __nv_bfloat16* q = nullptr;
  __nv_bfloat16* out = nullptr;
  int32_t* seqlens = nullptr;
  splitkv::AutoSplitsTable* auto_table = nullptr;
  void* workspace = nullptr;
  int copies = 1;

  ShapeBuffers() = default;
  ShapeBuffers(const ShapeBuffers&) = delete;
  ShapeBuffers& operator=(const ShapeBuffers&) = delete;
  ~ShapeBuffers() {
    cudaFree(k);
    cudaFree(v);
    cudaFree(q);
    cudaFree(out);
    cudaFree(seqlens);
    cudaFree(auto_table);
    cudaFree(workspace);
  }
};

struct CallPlan {
  int fixed_splits = 1;   // host heuristic's count
  int auto_bound = 1;     // auto's grid bound (num_splits argument)
  int auto_splits = 1;    // what the device's table lookup gives this batch
  splitkv::NumSplitsSource fixed_source = splitkv::NumSplitsSource::one_wave_fallback;
};

splitkv::DecodeParams make_params(const ShapeCase& shape, const ShapeBuffers& buffers, const CallPlan& plan, Mode mode,
                                  int copy) {
  const std::size_t window = static_cast<std::size_t>(copy) * shape.context_len * kNumKvHeads * kHeadDim;
  splitkv::DecodeParams p;
  p.layout = splitkv::KvLayout::contiguous;
  p.dtype = splitkv::DType::bf16;
  p.batch = shape.batch;
  p.num_heads = shape.num_heads;
  p.num_kv_heads = kNumKvHeads;
  p.head_dim = kHeadDim;
  p.cache_capacity = kCacheCapacity;
  p.q = buffers.q;
  p.k = buffers.k + window;
  p.v = buffers.v + window;
  p.cache_seqlens = buffers.seqlens;
  p.out = buffers.out;
  p.workspace = buffers.workspace;
  if (mode == Mode::fixed) {
    p.num_splits = plan.fixed_splits;
  } else {
    p.num_splits = plan.auto_bound;
    p.per_sequence_splits = true;
    p.auto_splits = buffers.auto_table;
  }
  return p;
}

struct Options {
  std::string out_path = "auto_timeline_probe.csv";
  int calls = 200;
  int warmup = 20;
  std::vector<int> chains = {1, 4};
  int hold_us = 50;
  std::string trace_csv;  // empty: no per-CTA trace
  int trace_samples = 5;
  // alternate: fixed and auto trace samples take turns (each finds the other's code in the SM's
  // instruction cache); grouped: each mode's samples in a row, after 3 untraced ones of that mode.
  std::string trace_order = "alternate";
  int trace_chain = 1;  // calls back to back per trace sample; the records are the last call's
};

void print_usage(std::FILE* stream) {
  std::fprintf(stream,
               "usage: auto_timeline_probe [--out timeline.csv] [--calls N] [--warmup N] [--chain 1,4] [--hold-us US]\n"
               "  Device timeline (%%globaltimer) of one decode call, num_splits = auto against the fixed count the\n"
               "  host heuristic picks, contiguous bf16, 8 KV heads, d=128, capacity %d, uniform lengths,\n"
               "  (B, L, heads) in (1,512,32) (1,512,64) (8,512,64) (1,4096,32) (4,4096,32) (16,512,32) (16,4096,32).\n"
               "  Needs the SPLITKV_TIMELINE kernels.\n"
               "  --out PATH     CSV, one row per shape x mode x chain x slot (default auto_timeline_probe.csv)\n"
               "  --calls N      timed samples per shape, mode and chain (default 200)\n"
               "  --warmup N     untimed samples first (default 20)\n"
               "  --chain LIST   decode calls issued back to back per sample (default 1,4; 1 = the timeline)\n"
               "  --hold-us US   host wait after enqueueing a sample before releasing the gate (default 50)\n"
               "  --trace-csv F  also take per-CTA trace samples (chain 1, after the warm-up) and write every\n"
               "                 record to F (ns after the origin), with a summary per shape and mode\n"
               "  --trace-samples N  traced samples per shape and mode (default 5)\n"
               "  --trace-order O    alternate (default): fixed and auto samples take turns, so each finds the\n"
               "                 other kernel's code in the SMs' instruction caches; grouped: each mode's samples\n"
               "                 in a row after 3 untraced samples of that mode (its own code cached)\n"
               "  --trace-chain K    decode calls back to back per trace sample (default 1); the records are\n"
               "                 the last call's, so K > 1 traces the steady state of the graph benchmark\n",
               kCacheCapacity);
}

int parse_positive(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < 1 || value > 1000000)
    throw std::invalid_argument(flag + " wants a positive integer, got '" + text + "'");
  return static_cast<int>(value);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      print_usage(stdout);
      std::exit(0);
    }
    if (flag != "--out" && flag != "--calls" && flag != "--warmup" && flag != "--hold-us" && flag != "--chain" &&
        flag != "--trace-csv" && flag != "--trace-samples" && flag != "--trace-order" && flag != "--trace-chain")
      throw std::invalid_argument("unknown argument '" + flag + "' (try --help)");
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value (try --help)");
    const std::string value = argv[++i];
    if (flag == "--out") {
      options.out_path = value;
    } else if (flag == "--calls") {
      options.calls = parse_positive(flag, value);
    } else if (flag == "--warmup") {
      options.warmup = parse_positive(flag, value);
    } else if (flag == "--hold-us") {
      options.hold_us = parse_positive(flag, value);
    } else if (flag == "--trace-csv") {
      options.trace_csv = value;
    } else if (flag == "--trace-samples") {
      options.trace_samples = parse_positive(flag, value);
    } else if (flag == "--trace-chain") {
      options.trace_chain = parse_positive(flag, value);
    } else if (flag == "--trace-order") {
      if (value != "alternate" && value != "grouped")
        throw std::invalid_argument("--trace-order wants alternate or grouped, got '" + value + "'");
      options.trace_order = value;
    } else {  // --chain
      options.chains.clear();
      std::stringstream list(value);
      std::string item;
      while (std::getline(list, item, ',')) options.chains.push_back(parse_positive(flag, item));
      if (options.chains.empty()) throw std::invalid_argument("--chain wants a list such as 1,4");
    }
  }
  return options;
}

// Takes timeline samples on one stream; owns the gate and the slots' reset values.
class TimelineSampler {
 public:
  TimelineSampler(cudaStream_t stream, int hold_us) : stream_(stream), hold_us_(hold_us) {
    CHECK_CUDA(splitkv::kernels::timeline_slots_address(&device_slots_));
    CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&gate_), sizeof(Gate), cudaHostAllocMapped));
    CHECK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_gate_), gate_, 0));
    CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&reset_values_), sizeof(SlotTimes)));
    for (int i = 0; i < kTimelineSlotCount; ++i)
      (*reset_values_)[i] = timeline_slot_keeps_min(static_cast<TimelineSlot>(i)) ? ULLONG_MAX : 0ull;
    // Launch both probe kernels once, gate open: with lazy module loading, loading one while the
    // gate spins could wait for the gate, which waits for the host.
    gate_->release = 1;
    gate_->timed_out = 0;
    hold_then_mark_origin<<<1, 1, 0, stream_>>>(device_gate_, device_slots_, 1000000ull);
    CHECK_CUDA(cudaGetLastError());
    mark_next_kernel_entry<<<1, 1, 0, stream_>>>(device_slots_);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  TimelineSampler(const TimelineSampler&) = delete;
  TimelineSampler& operator=(const TimelineSampler&) = delete;
  ~TimelineSampler() {
    cudaFreeHost(gate_);
    cudaFreeHost(reset_values_);
  }

  // One sample around `enqueue_calls`; false if the gate timed out (the sample is then unusable).
  template <typename EnqueueCalls>
  bool sample(EnqueueCalls&& enqueue_calls, SlotTimes* times) {
    constexpr unsigned long long kGateTimeoutNs = 1000000000ull;
    CHECK_CUDA(cudaMemcpyAsync(device_slots_, reset_values_, sizeof(SlotTimes), cudaMemcpyHostToDevice, stream_));
    gate_->release = 0;
    gate_->timed_out = 0;
    hold_then_mark_origin<<<1, 1, 0, stream_>>>(device_gate_, device_slots_, kGateTimeoutNs);
    CHECK_CUDA(cudaGetLastError());
    enqueue_calls();
    mark_next_kernel_entry<<<1, 1, 0, stream_>>>(device_slots_);
    CHECK_CUDA(cudaGetLastError());
    // Make sure the work is submitted, give the front end time to fetch it, then open the gate.
    const cudaError_t query = cudaStreamQuery(stream_);  // not ready: the gate holds the stream
    if (query != cudaErrorNotReady) CHECK_CUDA(query);
    // Should the runtime keep "not ready" as the last error, the next launch check would report it;
    // clearing it hides nothing, since a real fault is sticky and surfaces at the synchronize below.
    static_cast<void>(cudaGetLastError());
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(hold_us_);
    while (std::chrono::steady_clock::now() < until) {
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    gate_->release = 1;
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    CHECK_CUDA(cudaMemcpy(times->data(), device_slots_, sizeof(SlotTimes), cudaMemcpyDeviceToHost));
    if (!slot_was_written(TimelineSlot::probe_origin, (*times)[timeline_index(TimelineSlot::probe_origin)]))
      throw std::runtime_error("the origin slot was not written: is the probe linked to splitkv_kernels_timeline?");
    return gate_->timed_out == 0;
  }

 private:
  cudaStream_t stream_;
  int hold_us_;
  unsigned long long* device_slots_ = nullptr;
  Gate* gate_ = nullptr;
  Gate* device_gate_ = nullptr;
  SlotTimes* reset_values_ = nullptr;
};

// The per-CTA trace of one sample: the kernels' records, copied back.
struct TraceSample {
  std::vector<unsigned long long> split;    // [kTraceSplitRecords * kTraceSplitFields]
  std::vector<unsigned long long> combine;  // [kTraceCombineRecords * kTraceCombineFields]
  unsigned long long origin = 0;
};

class TraceBuffers {
 public:
  explicit TraceBuffers(cudaStream_t stream) : stream_(stream) {
    CHECK_CUDA(splitkv::kernels::timeline_trace_address(&split_, &combine_));
  }
  void reset() {  // enqueue before the sample
    CHECK_CUDA(cudaMemsetAsync(split_, 0, kSplitBytes, stream_));
    CHECK_CUDA(cudaMemsetAsync(combine_, 0, kCombineBytes, stream_));
  }
  void read(TraceSample* sample) {  // after the sample's synchronize
    sample->split.resize(kSplitBytes / sizeof(unsigned long long));
    sample->combine.resize(kCombineBytes / sizeof(unsigned long long));
    CHECK_CUDA(cudaMemcpy(sample->split.data(), split_, kSplitBytes, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(sample->combine.data(), combine_, kCombineBytes, cudaMemcpyDeviceToHost));
  }

 private:
  static constexpr std::size_t kSplitBytes = sizeof(unsigned long long) * kTraceSplitRecords * kTraceSplitFields;
  static constexpr std::size_t kCombineBytes =
      sizeof(unsigned long long) * kTraceCombineRecords * kTraceCombineFields;
  cudaStream_t stream_;
  unsigned long long* split_ = nullptr;
  unsigned long long* combine_ = nullptr;
};

// Per shape and mode: what the printed trace summary is made of, over all traced samples.
struct TraceStats {
  int samples = 0;
  int split_records = 0, item_records = 0, truncated_items = 0;
  std::vector<double> decision_after_wait, first_tile_after_issue, item_duration;
  // Where one item's time goes: start -> loads issued -> first tile landed -> tile loop done
  // (epilogue) -> stores issued (end).
  std::vector<double> issue_after_start, epilogue_after_first_tile, end_after_epilogue;
  std::vector<double> staged_after_epilogue, end_after_staged;  // end_after_epilogue's two parts
  std::vector<double> issued_after_start, checked_after_issued;  // issue_after_start's two parts
  // Groups of the persistent `auto` kernel: when each begins the guess's check, after its wait,
  // split by whether the group carries an item.
  std::vector<double> check_after_wait_item, check_after_wait_idle;
  std::vector<std::string> sm_histograms;  // per sample: "1x60 2x4" = 60 SMs hold 1 item-carrying group, 4 hold 2
  int combine_records = 0, combine_beside_item = 0;
  std::vector<double> combine_exit_after_wait;
};

// Writes one sample's records to `csv` and adds them to `stats`.
void write_trace_sample(std::FILE* csv, const ShapeCase& shape, Mode mode, int splits_used, int sample_index,
                        const TraceSample& sample, TraceStats* stats) {
  auto relative = [&](unsigned long long value) {
    return value == 0 ? std::string() : std::to_string(static_cast<long long>(value - sample.origin));
  };
  auto span = [](unsigned long long from, unsigned long long to) {
    return from == 0 || to == 0 ? NAN : static_cast<double>(static_cast<long long>(to - from));
  };
  const char* prefix_format = "%d,%d,%d,%s,%d,%d,%s,%d,%d,%llu";
  std::map<unsigned long long, int> item_groups_per_sm;
  ++stats->samples;
  for (int record_index = 0; record_index < kTraceSplitRecords; ++record_index) {
    const unsigned long long* record = sample.split.data() + static_cast<std::size_t>(record_index) * kTraceSplitFields;
    auto field = [&](TraceSplitField f) { return record[trace_split_field(f)]; };
    if (field(TraceSplitField::entry) == 0) continue;
    ++stats->split_records;
    std::fprintf(csv, prefix_format, shape.batch, shape.num_heads, shape.context_len, mode_name(mode), splits_used,
                 sample_index, "split",
                 record_index / kTraceMaxGroups, record_index % kTraceMaxGroups, field(TraceSplitField::sm));
    std::fprintf(csv, ",%s,%s,%s,%s,%s", relative(field(TraceSplitField::entry)).c_str(),
                 relative(field(TraceSplitField::after_wait)).c_str(), relative(field(TraceSplitField::decision)).c_str(),
                 relative(field(TraceSplitField::exit)).c_str(), relative(field(TraceSplitField::check)).c_str());
    bool carries_item = false;
    int items = 0;
    for (int k = 0; k < kTraceMaxItems; ++k) {
      auto item = [&](TraceItemField f) { return record[trace_item_field(k, f)]; };
      if (item(TraceItemField::start) == 0) {
        std::fprintf(csv, ",,,,,,,,");
        continue;
      }
      ++items;
      std::fprintf(csv, ",%llu,%s,%s,%s,%s,%s,%s,%s", item(TraceItemField::index),
                   relative(item(TraceItemField::start)).c_str(), relative(item(TraceItemField::issued)).c_str(),
                   relative(item(TraceItemField::after_issue)).c_str(),
                   relative(item(TraceItemField::first_tile)).c_str(), relative(item(TraceItemField::epilogue)).c_str(),
                   relative(item(TraceItemField::merge_staged)).c_str(),
                   relative(item(TraceItemField::end)).c_str());
      for (auto [values, from, to] : {std::tuple{&stats->issue_after_start, TraceItemField::start, TraceItemField::after_issue},
                                      std::tuple{&stats->epilogue_after_first_tile, TraceItemField::first_tile,
                                                 TraceItemField::epilogue},
                                      std::tuple{&stats->end_after_epilogue, TraceItemField::epilogue, TraceItemField::end},
                                      std::tuple{&stats->staged_after_epilogue, TraceItemField::epilogue,
                                                 TraceItemField::merge_staged},
                                      std::tuple{&stats->end_after_staged, TraceItemField::merge_staged,
                                                 TraceItemField::end},
                                      std::tuple{&stats->issued_after_start, TraceItemField::start, TraceItemField::issued},
                                      std::tuple{&stats->checked_after_issued, TraceItemField::issued,
                                                 TraceItemField::after_issue}}) {
        const double part = span(item(from), item(to));
        if (!std::isnan(part)) values->push_back(part);
      }
      if (item(TraceItemField::end) != 0) {
        carries_item = true;
        stats->item_duration.push_back(span(item(TraceItemField::start), item(TraceItemField::end)));
      }
      const double load_wait = span(item(TraceItemField::after_issue), item(TraceItemField::first_tile));
      if (!std::isnan(load_wait)) stats->first_tile_after_issue.push_back(load_wait);
    }
    if (items == kTraceMaxItems) ++stats->truncated_items;  // the group may have run more than were recorded
    for (int w = 0; w < kTraceCombineWarps; ++w) std::fprintf(csv, ",,");
    std::fprintf(csv, "\n");
    const double checked = span(field(TraceSplitField::after_wait), field(TraceSplitField::check));
    if (!std::isnan(checked))
      (carries_item ? stats->check_after_wait_item : stats->check_after_wait_idle).push_back(checked);
    if (carries_item) {
      ++stats->item_records;
      ++item_groups_per_sm[field(TraceSplitField::sm)];
      const double decided = span(field(TraceSplitField::after_wait), field(TraceSplitField::decision));
      if (!std::isnan(decided)) stats->decision_after_wait.push_back(decided);
    }
  }
  std::map<int, int> histogram;  // item-carrying groups on an SM -> SMs
  for (const auto& [sm, count] : item_groups_per_sm) ++histogram[count];
  std::string text;
  for (const auto& [count, sms] : histogram) text += (text.empty() ? "" : " ") + std::to_string(count) + "x" + std::to_string(sms);
  stats->sm_histograms.push_back(text.empty() ? "-" : text);

  for (int cta = 0; cta < kTraceCombineRecords; ++cta) {
    const unsigned long long* record = sample.combine.data() + static_cast<std::size_t>(cta) * kTraceCombineFields;
    auto field = [&](TraceCombineField f, int warp = 0) { return record[trace_combine_field(f, warp)]; };
    if (field(TraceCombineField::entry) == 0) continue;
    ++stats->combine_records;
    unsigned long long first_wait = 0, last_exit = 0;
    for (int w = 0; w < kTraceCombineWarps; ++w) {
      const unsigned long long waited = field(TraceCombineField::after_wait_warp0, w);
      if (waited != 0 && (first_wait == 0 || waited < first_wait)) first_wait = waited;
      last_exit = std::max(last_exit, field(TraceCombineField::exit_warp0, w));
    }
    const unsigned long long sm = field(TraceCombineField::sm);
    std::fprintf(csv, prefix_format, shape.batch, shape.num_heads, shape.context_len, mode_name(mode), splits_used,
                 sample_index, "combine",
                 cta, 0, sm);
    std::fprintf(csv, ",%s,%s,%s,%s,", relative(field(TraceCombineField::entry)).c_str(), relative(first_wait).c_str(),
                 relative(field(TraceCombineField::decision)).c_str(), relative(last_exit).c_str());
    for (int k = 0; k < kTraceMaxItems; ++k) std::fprintf(csv, ",,,,,,,,");
    for (int w = 0; w < kTraceCombineWarps; ++w)
      std::fprintf(csv, ",%s,%s", relative(field(TraceCombineField::after_wait_warp0, w)).c_str(),
                   relative(field(TraceCombineField::exit_warp0, w)).c_str());
    std::fprintf(csv, "\n");
    const double busy = span(first_wait, last_exit);
    if (!std::isnan(busy)) stats->combine_exit_after_wait.push_back(busy);
    if (item_groups_per_sm.count(sm) != 0) ++stats->combine_beside_item;
  }
}

void write_trace_header(std::FILE* csv) {
  std::fprintf(csv, "batch,num_heads,context_len,mode,splits_used,sample,kernel,cta,group,sm,entry_ns,after_wait_ns,decision_ns,exit_ns,"
                    "check_ns");
  for (int k = 0; k < kTraceMaxItems; ++k)
    std::fprintf(csv,
                 ",item%d_index,item%d_start_ns,item%d_issued_ns,item%d_after_issue_ns,item%d_first_tile_ns,item%d_epilogue_ns,"
                 "item%d_merge_staged_ns,item%d_end_ns",
                 k, k, k, k, k, k, k, k);
  for (int w = 0; w < kTraceCombineWarps; ++w) std::fprintf(csv, ",warp%d_after_wait_ns,warp%d_exit_ns", w, w);
  std::fprintf(csv, "\n");
}

void print_trace_summary(const ShapeCase& shape, Mode mode, const TraceStats& stats) {
  auto median_max = [](const std::vector<double>& values) {
    if (values.empty()) return std::string("-");
    char text[64];
    std::snprintf(text, sizeof(text), "%.0f/%.0f", percentile(values, 0.5),
                  *std::max_element(values.begin(), values.end()));
    return std::string(text);
  };
  std::printf("trace B%d H%d L%d %-5s (%d samples, ns median/max): split groups %d, with items %d; decision-wait %s; "
              "first_tile-after_issue %s; item end-start %s\n",
              shape.batch, shape.num_heads, shape.context_len, mode_name(mode), stats.samples, stats.split_records, stats.item_records,
              median_max(stats.decision_after_wait).c_str(), median_max(stats.first_tile_after_issue).c_str(),
              median_max(stats.item_duration).c_str());
  std::printf("  item parts (ns median/max): after_issue-start %s; epilogue-first_tile %s (the tile loop); "
              "end-epilogue %s (the warps' merge and the stores)\n",
              median_max(stats.issue_after_start).c_str(), median_max(stats.epilogue_after_first_tile).c_str(),
              median_max(stats.end_after_epilogue).c_str());
  std::printf("  issue parts (ns median/max): issued-start %s (the first tiles' copies); after_issue-issued %s (the "
              "guess's check); the check begins after the wait: item groups %s, idle groups %s\n",
              median_max(stats.issued_after_start).c_str(), median_max(stats.checked_after_issued).c_str(),
              median_max(stats.check_after_wait_item).c_str(), median_max(stats.check_after_wait_idle).c_str());
  std::printf("  merge parts (ns median/max): rows, maxima and sums to shared memory + sync %s; weights, sum over "
              "warps + stores %s\n",
              median_max(stats.staged_after_epilogue).c_str(), median_max(stats.end_after_staged).c_str());
  std::printf("  item-carrying groups per SM (count x SMs), per sample:");
  for (const std::string& histogram : stats.sm_histograms) std::printf(" [%s]", histogram.c_str());
  std::printf("\n  combine CTAs %d: exit-after_wait %s; on an SM with an item-carrying split group: %d\n",
              stats.combine_records, median_max(stats.combine_exit_after_wait).c_str(), stats.combine_beside_item);
  if (stats.truncated_items > 0)
    std::printf("  note: %d groups recorded %d items, the most a record holds (later items are not in the trace)\n",
                stats.truncated_items, kTraceMaxItems);
}

struct Key {
  Mode mode;
  int chain;
  bool operator<(const Key& other) const {
    return mode != other.mode ? mode < other.mode : chain < other.chain;
  }
};

int run(const Options& options) {
  cudaDeviceProp properties{};
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::string step_description;
  const double timer_step_ns = measure_globaltimer_step(stream, &step_description);
  std::printf("device: %s, %d SMs, L2 %d MB\n", properties.name, properties.multiProcessorCount,
              properties.l2CacheSize >> 20);
  std::printf("globaltimer: smallest nonzero step %.0f ns (%s)\n", timer_step_ns, step_description.c_str());
  for (const char* name : {"SPLITKV_AUTO_GUESS", "SPLITKV_AUTO_SCHEDULE", "SPLITKV_PERSISTENT_WARP_GROUPS",
                           "SPLITKV_PERSISTENT_GRID_LIMIT", "SPLITKV_GRID_ONE_CTA_PER_SM"})
    if (const char* value = std::getenv(name)) std::printf("environment: %s=%s\n", name, value);

  const splitkv::NumSplitsPolicy policy =
      splitkv::NumSplitsPolicy::for_device(properties.name, properties.multiProcessorCount);
  if (policy.table() == nullptr)
    std::printf("warning: no generated split table for '%s' with %d SMs: the counts come from the one-wave "
                "fallback rule, not the H200 table the benchmark uses\n",
                properties.name, properties.multiProcessorCount);

  std::FILE* csv = std::fopen(options.out_path.c_str(), "w");
  if (csv == nullptr) throw std::runtime_error("cannot write " + options.out_path + ": " + std::strerror(errno));
  std::fprintf(csv, "gpu,batch,num_heads,num_kv_heads,head_dim,cache_capacity,context_len,mode,chain,num_splits_arg,"
                    "splits_used,slot,kind,samples,samples_written,median_ns,p10_ns,p90_ns,globaltimer_step_ns\n");

  TimelineSampler sampler(stream, options.hold_us);
  std::FILE* trace_csv = nullptr;
  std::unique_ptr<TraceBuffers> trace_buffers;
  if (!options.trace_csv.empty()) {
    trace_csv = std::fopen(options.trace_csv.c_str(), "w");
    if (trace_csv == nullptr)
      throw std::runtime_error("cannot write " + options.trace_csv + ": " + std::strerror(errno));
    write_trace_header(trace_csv);
    trace_buffers = std::make_unique<TraceBuffers>(stream);
  }
  const std::vector<ReportRow> rows = report_rows();
  // Moments whose auto - fixed difference the summary lists (the call's critical path), with the
  // column heading and what the moment is.
  struct SummaryMoment {
    const char* row;
    const char* heading;
    const char* meaning;
  };
  const std::vector<SummaryMoment> summary_moments = {
      {"split_entry_first", "split0", "first split CTA starts"},
      {"split_entry_last", "splitN", "every split CTA has started"},
      {"split_decision_last", "decided", "the split count is known in every CTA (auto only)"},
      {"split_exit_last", "splitEnd", "last split CTA exits"},
      {"combine_entry_first", "comb0", "first combine CTA starts"},
      {"combine_after_wait_first", "cWait0", "first combine warp past griddepcontrol.wait"},
      {"combine_after_wait_last", "cWaitN", "last combine warp past griddepcontrol.wait"},
      {"call_end", "end", "end of the call (last exit of either kernel)"},
      {"probe_next_kernel_entry", "next", "a plain kernel behind the call starts"}};
  std::vector<std::string> summary_lines;

  for (const ShapeCase& shape : kShapes) {
    CallPlan plan;
    splitkv::NumSplitsShape host_shape;
    host_shape.batch = shape.batch;
    host_shape.num_heads = shape.num_heads;
    host_shape.num_kv_heads = kNumKvHeads;
    host_shape.head_dim = kHeadDim;
    host_shape.max_seqlen = shape.context_len;  // the real length, known here as in bench_peers.py
    host_shape.cache_capacity = kCacheCapacity;
    const splitkv::NumSplitsChoice choice = policy.choose(host_shape);
    plan.fixed_splits = choice.num_splits;
    plan.fixed_source = choice.source;
    splitkv::AutoSplitsTable table;
    policy.fill_auto_splits(host_shape, table);
    plan.auto_bound = splitkv::auto_grid_bound(table, shape.batch, kCacheCapacity);
    // The same lookup the kernels make from the lengths (BatchAutoDecision::finish).
    plan.auto_splits = splitkv::auto_split_count(table, static_cast<long long>(shape.batch) * shape.context_len,
                                                 shape.context_len, shape.batch, plan.auto_bound);

    ShapeBuffers buffers;
    const std::size_t kv_elements = static_cast<std::size_t>(shape.batch) * kCacheCapacity * kNumKvHeads * kHeadDim;
    const std::size_t q_elements = static_cast<std::size_t>(shape.batch) * shape.num_heads * kHeadDim;
    const double real_kv_bytes = 2.0 * shape.batch * shape.context_len * kNumKvHeads * kHeadDim * 2;
    buffers.copies = static_cast<int>(std::min<double>({64.0, std::ceil(3.0 * properties.l2CacheSize / real_kv_bytes),
                                                        static_cast<double>(kCacheCapacity / shape.context_len)}));
    buffers.copies = std::max(buffers.copies, 1);
    CHECK_CUDA(cudaMalloc(&buffers.k, kv_elements * 2));
    CHECK_CUDA(cudaMalloc(&buffers.v, kv_elements * 2));
    CHECK_CUDA(cudaMalloc(&buffers.q, q_elements * 2));
    CHECK_CUDA(cudaMalloc(&buffers.out, q_elements * 2));
    CHECK_CUDA(splitkv::tuner::fill_uniform(buffers.k, kv_elements, splitkv::DType::bf16, 11, stream));
    CHECK_CUDA(splitkv::tuner::fill_uniform(buffers.v, kv_elements, splitkv::DType::bf16, 12, stream));
    CHECK_CUDA(splitkv::tuner::fill_uniform(buffers.q, q_elements, splitkv::DType::bf16, 13, stream));
    const std::vector<int32_t> lengths(shape.batch, shape.context_len);
    CHECK_CUDA(cudaMalloc(&buffers.seqlens, lengths.size() * sizeof(int32_t)));
    CHECK_CUDA(cudaMemcpy(buffers.seqlens, lengths.data(), lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc(&buffers.auto_table, sizeof(table)));
    CHECK_CUDA(cudaMemcpy(buffers.auto_table, &table, sizeof(table), cudaMemcpyHostToDevice));
    {
      splitkv::DecodeParams widest = make_params(shape, buffers, plan, Mode::fixed, 0);
      widest.num_splits = std::max(plan.fixed_splits, plan.auto_bound);
      CHECK_CUDA(cudaMalloc(&buffers.workspace, std::max<std::size_t>(16, splitkv::decode_workspace_bytes(widest))));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));

    std::printf("\n== B%d %d/%d d%d L%d C%d: fixed %d splits (%s); auto bound %d, the device's lookup gives %d; "
                "%d K/V copies\n",
                shape.batch, shape.num_heads, kNumKvHeads, kHeadDim, shape.context_len, kCacheCapacity, plan.fixed_splits,
                splitkv::to_string(plan.fixed_source), plan.auto_bound, plan.auto_splits, buffers.copies);
    if (plan.auto_splits != plan.fixed_splits)
      std::printf("warning: auto decides %d splits but the host heuristic picks %d: the modes do different work\n",
                  plan.auto_splits, plan.fixed_splits);

    int next_copy = 0;
    auto enqueue = [&](Mode mode, int chain) {
      return [&, mode, chain] {
        for (int c = 0; c < chain; ++c) {
          check_decode(splitkv::decode_attention(make_params(shape, buffers, plan, mode, next_copy), stream),
                       mode_name(mode));
          next_copy = (next_copy + 1) % buffers.copies;
        }
      };
    };

    // One ungated call per mode first: it loads the kernels (lazy module loading may wait for the
    // device to go idle, which it would not while the gate spins), sets their shared-memory limits
    // and answers the occupancy queries; and the two modes must agree, the same work cut the same
    // way. Then gated warm-up samples (clocks, caches).
    const Mode modes[] = {Mode::fixed, Mode::automatic};
    std::vector<std::uint16_t> outputs[2];
    for (int m = 0; m < 2; ++m) {
      CHECK_CUDA(cudaMemsetAsync(buffers.out, 0xFF, q_elements * 2, stream));  // NaN: a row left unwritten shows
      check_decode(splitkv::decode_attention(make_params(shape, buffers, plan, modes[m], 0), stream), mode_name(modes[m]));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      outputs[m].resize(q_elements);
      CHECK_CUDA(cudaMemcpy(outputs[m].data(), buffers.out, q_elements * 2, cudaMemcpyDeviceToHost));
    }
    const double disagreement = splitkv::bench::relative_l2_difference(outputs[1], outputs[0]);
    if (!(disagreement <= 1e-2))
      throw std::runtime_error("auto and fixed outputs differ (relative L2 " + std::to_string(disagreement) + ")");
    SlotTimes scratch{};
    int warmup_timeouts = 0;
    for (int i = 0; i < options.warmup; ++i)
      for (Mode mode : modes) warmup_timeouts += sampler.sample(enqueue(mode, 1), &scratch) ? 0 : 1;
    if (warmup_timeouts > 0) std::printf("note: %d warm-up samples timed out at the gate\n", warmup_timeouts);

    // Per-CTA trace samples (the last of --trace-chain calls), before the timed samples: modes
    // alternating, or grouped.
    if (trace_csv != nullptr) {
      TraceStats stats[2];
      int trace_timeouts = 0;
      TraceSample trace;
      const bool grouped = options.trace_order == "grouped";
      std::vector<std::pair<int, int>> order;  // (sample, mode); sample < 0: untraced, warms the mode's code
      if (grouped) {
        for (int m = 0; m < 2; ++m)
          for (int i = -3; i < options.trace_samples; ++i) order.emplace_back(i, m);
      } else {
        for (int i = 0; i < options.trace_samples; ++i)
          for (int m = 0; m < 2; ++m) order.emplace_back(i, m);
      }
      for (const auto& [i, m] : order) {
        SlotTimes times{};
        if (i < 0) {
          if (!sampler.sample(enqueue(modes[m], options.trace_chain), &times)) ++trace_timeouts;
          continue;
        }
        trace_buffers->reset();
        if (!sampler.sample(enqueue(modes[m], options.trace_chain), &times)) {
          ++trace_timeouts;
          continue;
        }
        trace_buffers->read(&trace);
        trace.origin = times[timeline_index(TimelineSlot::probe_origin)];
        write_trace_sample(trace_csv, shape, modes[m], modes[m] == Mode::fixed ? plan.fixed_splits : plan.auto_splits, i,
                           trace, &stats[m]);
      }
      std::fflush(trace_csv);
      if (trace_timeouts > 0) std::printf("warning: %d trace samples dropped (gate timed out)\n", trace_timeouts);
      if (options.trace_chain > 1)
        std::printf("trace: the last of %d calls back to back in each sample\n", options.trace_chain);
      for (int m = 0; m < 2; ++m) print_trace_summary(shape, modes[m], stats[m]);
    }

    // Interleaved: every call index runs each chain and mode once, so drift over the run (clocks,
    // temperature) lands on all of them alike.
    std::map<Key, std::vector<SlotTimes>> samples;
    int timeouts = 0;
    for (int i = 0; i < options.calls; ++i)
      for (int chain : options.chains)
        for (Mode mode : modes) {
          SlotTimes times{};
          if (sampler.sample(enqueue(mode, chain), &times)) samples[{mode, chain}].push_back(times);
          else ++timeouts;
        }
    if (timeouts > 0) std::printf("warning: %d samples dropped (the gate kernel timed out waiting for the host)\n", timeouts);
    if (timeouts * 10 > options.calls * static_cast<int>(options.chains.size()) * 2)
      throw std::runtime_error("more than 10% of the samples timed out at the gate");

    for (int chain : options.chains) {
      std::printf("-- chain %d (%s); ns after the origin, median [p10, p90] over %d samples\n", chain,
                  chain == 1 ? "one call" : "calls back to back: first slots = first call, last = last call",
                  options.calls);
      std::printf("%-26s %22s %22s %10s\n", "moment", "fixed", "auto", "auto-fixed");
      std::map<std::string, double> delta_of;
      for (const ReportRow& row : rows) {
        Summary by_mode[2];
        for (int m = 0; m < 2; ++m) {
          const std::vector<SlotTimes>& list = samples[{modes[m], chain}];
          by_mode[m] = summarize(list, row);
          const int splits_used = modes[m] == Mode::fixed ? plan.fixed_splits : plan.auto_splits;
          const int splits_arg = modes[m] == Mode::fixed ? plan.fixed_splits : plan.auto_bound;
          const char* kind = !row.from_slot ? "derived" : timeline_slot_keeps_min(row.slot) ? "min" : "max";
          std::fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%s,%s,%zu,%d,%s,%s,%s,%.0f\n", properties.name,
                       shape.batch, shape.num_heads, kNumKvHeads, kHeadDim, kCacheCapacity, shape.context_len,
                       mode_name(modes[m]), chain, splits_arg, splits_used, row.name.c_str(), kind, list.size(),
                       by_mode[m].written, format_ns(by_mode[m].median).c_str(), format_ns(by_mode[m].p10).c_str(),
                       format_ns(by_mode[m].p90).c_str(), timer_step_ns);
        }
        const double delta = by_mode[1].median - by_mode[0].median;
        delta_of[row.name] = delta;
        std::fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,auto_minus_fixed,%d,,,%s,%s,,%d,%s,,,%.0f\n", properties.name,
                     shape.batch, shape.num_heads, kNumKvHeads, kHeadDim, kCacheCapacity, shape.context_len, chain,
                     row.name.c_str(), !row.from_slot ? "derived" : timeline_slot_keeps_min(row.slot) ? "min" : "max",
                     std::min(by_mode[0].written, by_mode[1].written), format_ns(delta).c_str(), timer_step_ns);
        auto cell = [](const Summary& s) {
          if (s.written == 0) return std::string("-");
          char text[64];
          std::snprintf(text, sizeof(text), "%.0f [%.0f, %.0f]", s.median, s.p10, s.p90);
          return std::string(text);
        };
        std::printf("%-26s %22s %22s %10s\n", row.name.c_str(), cell(by_mode[0]).c_str(), cell(by_mode[1]).c_str(),
                    std::isnan(delta) ? "-" : format_ns(delta).c_str());
      }
      std::fflush(csv);
      char line[512];
      int used = std::snprintf(line, sizeof(line), "B%-2d H%-2d L%-5d chain %-6d |", shape.batch, shape.num_heads, shape.context_len, chain);
      for (const SummaryMoment& moment : summary_moments) {
        const double delta = delta_of[moment.row];
        used += std::snprintf(line + used, sizeof(line) - used, " %8s", std::isnan(delta) ? "-" : format_ns(delta).c_str());
      }
      summary_lines.push_back(line);
    }
    std::fflush(stdout);
  }
  std::fclose(csv);
  if (trace_csv != nullptr) std::fclose(trace_csv);

  std::printf("\nauto - fixed, ns (difference of medians; '-' where a mode has no such moment, e.g. no combine at "
              "1 split):\n");
  for (const SummaryMoment& moment : summary_moments)
    std::printf("  %-8s %-24s %s\n", moment.heading, moment.row, moment.meaning);
  std::printf("%-23s |", "shape");
  for (const SummaryMoment& moment : summary_moments) std::printf(" %8s", moment.heading);
  std::printf("\n");
  for (const std::string& line : summary_lines) std::printf("%s\n", line.c_str());
  std::printf("wrote %s\n", options.out_path.c_str());
  if (!options.trace_csv.empty()) std::printf("wrote %s\n", options.trace_csv.c_str());
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "auto_timeline_probe: %s\n", error.what());
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "auto_timeline_probe: error: %s\n", error.what());
    return 1;
  }
}
