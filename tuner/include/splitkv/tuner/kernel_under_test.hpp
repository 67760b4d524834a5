// How the tuner reaches a split-KV decode kernel without knowing its internals: prepare
// buffers for a shape, launch one decode step with a split count, release. Anything that
// can do that (ours, a vendored FlashAttention, an engine's own kernel) can be swept.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "splitkv/tuner/point_status.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

class KernelUnderTest {
 public:
  virtual ~KernelUnderTest() = default;

  // The CSV's kernel column and the --kernel spelling; stable across versions.
  virtual std::string name() const = 0;

  // Host-only and cheap: whether this implementation can run the shape at all. Points it
  // cannot run are recorded as skipped (with `reason`) instead of failing at launch.
  virtual bool supports(const SweepPoint& shape, std::string* reason) const = 0;

  // Allocates and fills `copies` independent buffer sets for the shape; every split count
  // of the shape is then launched on them. shape.num_splits is the largest split count
  // that will be launched, so the workspace can be sized once. Report running out of
  // memory as oom and a rejected shape as invalid rather than throwing.
  virtual KernelOutcome prepare(const SweepPoint& shape, int copies) = 0;

  // Enqueues one decode step (split kernel plus combine) on buffer set `copy_index` into
  // `stream` (a cudaStream_t). No host synchronisation, so it can be captured in a graph.
  virtual KernelOutcome launch(int copy_index, int num_splits, void* stream) = 0;

  // Frees what prepare allocated. Safe to call without prepare and more than once.
  virtual void release() = 0;

  // True for a kernel whose own plan picks the split count, whatever launch's num_splits says
  // (a library's heuristic). The sweep times it once per shape, at the shape's largest planned
  // count, which its row records as num_splits: a policy row (tuner/CSV_SCHEMA.md).
  virtual bool picks_own_split_count() const { return false; }
};

class KernelRegistry {
 public:
  using Factory = std::function<std::unique_ptr<KernelUnderTest>()>;

  // Throws std::invalid_argument when the name is taken or empty.
  void add(const std::string& name, std::string description, Factory factory);
  bool contains(const std::string& name) const;
  // Throws std::invalid_argument naming the known kernels when `name` is not registered.
  std::unique_ptr<KernelUnderTest> create(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::string& description(const std::string& name) const;

 private:
  struct Entry {
    std::string description;
    Factory factory;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace splitkv::tuner
