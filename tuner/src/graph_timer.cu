#include "splitkv/tuner/graph_timer.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

namespace splitkv::tuner {
namespace {

std::string cuda_failure(const char* step, cudaError_t error) {
  return std::string(step) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
}

// Owns the graph objects so every early return releases them.
struct GraphResources {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  ~GraphResources() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace

int rotation_copies(std::size_t bytes_per_copy, std::size_t l2_bytes, double multiple) {
  if (bytes_per_copy == 0) return 1;
  const double needed = multiple * static_cast<double>(l2_bytes) / static_cast<double>(bytes_per_copy);
  return std::max(1, static_cast<int>(std::ceil(needed)));
}

std::string time_graph_replays(const EnqueueCall& enqueue, int copies, const GraphTimingProtocol& protocol,
                               cudaStream_t stream, GraphTiming* timing) {
  GraphResources r;
  const int calls = std::max(copies, protocol.min_launches_per_graph);
  cudaError_t error = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (error != cudaSuccess) return cuda_failure("cudaStreamBeginCapture", error);
  for (int call = 0; call < calls; ++call) {
    const std::string message = enqueue(call % copies, stream);
    if (!message.empty()) {
      cudaGraph_t abandoned = nullptr;
      cudaStreamEndCapture(stream, &abandoned);
      if (abandoned) cudaGraphDestroy(abandoned);
      return message;
    }
  }
  error = cudaStreamEndCapture(stream, &r.graph);
  if (error != cudaSuccess) return cuda_failure("cudaStreamEndCapture", error);
  error = cudaGraphInstantiate(&r.exec, r.graph, 0);
  if (error != cudaSuccess) return cuda_failure("cudaGraphInstantiate", error);
  if ((error = cudaEventCreate(&r.start)) != cudaSuccess) return cuda_failure("cudaEventCreate", error);
  if ((error = cudaEventCreate(&r.stop)) != cudaSuccess) return cuda_failure("cudaEventCreate", error);

  for (int i = 0; i < protocol.warmup_replays; ++i) {
    if ((error = cudaGraphLaunch(r.exec, stream)) != cudaSuccess) return cuda_failure("warm-up replay", error);
  }
  timing->per_call_us.clear();
  for (int i = 0; i < protocol.repetitions; ++i) {
    cudaEventRecord(r.start, stream);
    if ((error = cudaGraphLaunch(r.exec, stream)) != cudaSuccess) return cuda_failure("timed replay", error);
    cudaEventRecord(r.stop, stream);
    if ((error = cudaEventSynchronize(r.stop)) != cudaSuccess) return cuda_failure("replay", error);
    float milliseconds = 0.f;
    cudaEventElapsedTime(&milliseconds, r.start, r.stop);
    timing->per_call_us.push_back(1000.0 * milliseconds / calls);
  }
  timing->stats = summarize(timing->per_call_us);
  timing->calls_per_graph = calls;
  return "";
}

}  // namespace splitkv::tuner
