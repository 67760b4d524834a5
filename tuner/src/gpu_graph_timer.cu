#include "splitkv/tuner/graph_timer.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

namespace splitkv::tuner {
namespace {

std::string cuda_failure(const char* step, cudaError_t error) {
  return std::string(step) + ": " + describe_cuda_error(error);
}

}  // namespace

std::string describe_cuda_error(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

GraphReplayTimer::~GraphReplayTimer() { reset(); }

void GraphReplayTimer::reset() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
  exec_ = nullptr;
  graph_ = nullptr;
  start_ = stop_ = nullptr;
  calls_ = 0;
}

std::string GraphReplayTimer::capture(const EnqueueCall& enqueue, int copies, int min_calls, cudaStream_t stream) {
  reset();
  stream_ = stream;
  const int calls = std::max(copies, min_calls);
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
  if ((error = cudaStreamEndCapture(stream, &graph_)) != cudaSuccess) return cuda_failure("cudaStreamEndCapture", error);
  if ((error = cudaGraphInstantiate(&exec_, graph_, 0)) != cudaSuccess) return cuda_failure("cudaGraphInstantiate", error);
  if ((error = cudaEventCreate(&start_)) != cudaSuccess) return cuda_failure("cudaEventCreate", error);
  if ((error = cudaEventCreate(&stop_)) != cudaSuccess) return cuda_failure("cudaEventCreate", error);
  calls_ = calls;
  return "";
}

std::string GraphReplayTimer::replay() {
  const cudaError_t error = cudaGraphLaunch(exec_, stream_);
  return error == cudaSuccess ? "" : cuda_failure("cudaGraphLaunch", error);
}

std::string GraphReplayTimer::timed_replay(double* per_call_us) {
  cudaError_t error;
  if ((error = cudaEventRecord(start_, stream_)) != cudaSuccess) return cuda_failure("cudaEventRecord", error);
  if ((error = cudaGraphLaunch(exec_, stream_)) != cudaSuccess) return cuda_failure("cudaGraphLaunch", error);
  if ((error = cudaEventRecord(stop_, stream_)) != cudaSuccess) return cuda_failure("cudaEventRecord", error);
  if ((error = cudaEventSynchronize(stop_)) != cudaSuccess) return cuda_failure("graph replay", error);
  float milliseconds = 0.f;
  if ((error = cudaEventElapsedTime(&milliseconds, start_, stop_)) != cudaSuccess)
    return cuda_failure("cudaEventElapsedTime", error);
  *per_call_us = 1000.0 * milliseconds / calls_;
  return "";
}

std::string time_graph_replays(const EnqueueCall& enqueue, int copies, const GraphTimingProtocol& protocol,
                               cudaStream_t stream, GraphTiming* timing) {
  GraphReplayTimer timer;
  std::string failure = timer.capture(enqueue, copies, protocol.min_launches_per_graph, stream);
  for (int i = 0; i < protocol.warmup_replays && failure.empty(); ++i) failure = timer.replay();
  timing->per_call_us.clear();
  for (int i = 0; i < protocol.repetitions && failure.empty(); ++i) {
    double us = 0;
    failure = timer.timed_replay(&us);
    timing->per_call_us.push_back(us);
  }
  if (!failure.empty()) return failure;
  timing->stats = summarize(timing->per_call_us);
  timing->calls_per_graph = timer.calls();
  return "";
}

}  // namespace splitkv::tuner
