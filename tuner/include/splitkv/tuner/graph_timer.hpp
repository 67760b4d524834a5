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

struct GraphTiming {
  std::vector<double> per_call_us;  // one sample per replay: replay time / calls in the graph
  SampleStats stats;
  int calls_per_graph = 0;
};

// "cudaErrorIllegalAddress: an illegal memory access was encountered": how every GPU-side
// message of the tuner names a CUDA error.
std::string describe_cuda_error(cudaError_t error);

// `enqueue(copy, stream)` enqueues one call on buffers `copy` (0..copies-1) and returns an empty
// string on success or a message.
using EnqueueCall = std::function<std::string(int copy, cudaStream_t stream)>;

// One captured graph of back-to-back calls and the events that time its replays. Every method
// returns "" on success or a message naming the failing CUDA step; errors are never hidden.
class GraphReplayTimer {
 public:
  GraphReplayTimer() = default;
  GraphReplayTimer(const GraphReplayTimer&) = delete;
  GraphReplayTimer& operator=(const GraphReplayTimer&) = delete;
  ~GraphReplayTimer();

  // Captures max(copies, min_calls) calls cycling over the copies, and instantiates the graph.
  std::string capture(const EnqueueCall& enqueue, int copies, int min_calls, cudaStream_t stream);
  // Replays once without timing (warm-up).
  std::string replay();
  // Replays once between two events; `per_call_us` = replay time / calls in the graph.
  std::string timed_replay(double* per_call_us);
  int calls() const { return calls_; }

 private:
  void reset();
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  int calls_ = 0;
};

// Capture, warm up, then `protocol.repetitions` timed replays: the whole protocol in one call.
std::string time_graph_replays(const EnqueueCall& enqueue, int copies, const GraphTimingProtocol& protocol,
                               cudaStream_t stream, GraphTiming* timing);

}  // namespace splitkv::tuner
