// Times a decode step the way a served model runs it: many back-to-back calls captured in one
// CUDA graph, each call on its own K/V copy so the working set exceeds L2, timed over graph
// replays with CUDA events. Nothing here knows about attention; it times any enqueue function.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "splitkv/tuner/sample_stats.hpp"

namespace splitkv::tuner {

struct GraphTimingProtocol {
  int repetitions = 15;             // timed replays; one sample each
  int warmup_replays = 3;           // untimed replays first: module load, clocks ramping up
  double working_set_l2_multiple = 3.0;
  int min_launches_per_graph = 16;  // amortises the graph launch itself over many calls
};

// Copies of the per-call buffers needed so `copies * bytes_per_copy` is at least
// `multiple * l2_bytes`; at least 1.
int rotation_copies(std::size_t bytes_per_copy, std::size_t l2_bytes, double multiple);

struct GraphTiming {
  std::vector<double> per_call_us;  // one sample per replay: replay time / calls in the graph
  SampleStats stats;
  int calls_per_graph = 0;
};

// `enqueue(copy, stream)` enqueues one call on buffers `copy` (0..copies-1) and returns an empty
// string on success or a message. Returns "" and fills `timing`, or a message naming the
// failing step; a sticky CUDA error is reported, never hidden.
using EnqueueCall = std::function<std::string(int copy, cudaStream_t stream)>;
std::string time_graph_replays(const EnqueueCall& enqueue, int copies, const GraphTimingProtocol& protocol,
                               cudaStream_t stream, GraphTiming* timing);

}  // namespace splitkv::tuner
