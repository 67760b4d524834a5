// A CPU stand-in for a GPU kernel: obeys the KernelUnderTest contract, checks that the
// runner does too (prepare before launch, copy indices in range, release after), fails on
// request, and times points with a deterministic model shaped like the real curve:
// splitting helps until the SMs are full, then the combine costs more than it saves.
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "splitkv/tuner/fake_gpu.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"
#include "splitkv/tuner/sweep_runner.hpp"

namespace splitkv::testing {

class FakeKernel : public tuner::KernelUnderTest {
 public:
  explicit FakeKernel(std::string name = "fake") : name_(std::move(name)) {}

  std::string name() const override { return name_; }

  bool supports(const tuner::SweepPoint& shape, std::string* reason) const override {
    if (unsupported_shapes.count(shape.shape_key()) == 0) return true;
    *reason = "fake kernel does not serve this shape";
    return false;
  }

  tuner::KernelOutcome prepare(const tuner::SweepPoint& shape, int copies) override {
    if (prepared_) throw std::logic_error("prepare() without release() of the previous shape");
    if (copies < 1) throw std::logic_error("prepare() with no copies");
    ++prepares;
    largest_splits_prepared = std::max(largest_splits_prepared, shape.num_splits);
    const auto failure = prepare_failures.find(shape.shape_key());
    if (failure != prepare_failures.end()) return failure->second;
    prepared_ = true;
    shape_ = shape;
    copies_ = copies;
    return tuner::KernelOutcome::success();
  }

  tuner::KernelOutcome launch(int copy_index, int num_splits, void* /*stream*/) override {
    if (!prepared_) throw std::logic_error("launch() before prepare()");
    if (copy_index < 0 || copy_index >= copies_) throw std::logic_error("copy index out of range");
    if (num_splits > shape_.num_splits) throw std::logic_error("more splits than prepared for");
    ++launches;
    tuner::SweepPoint point = shape_;
    point.num_splits = num_splits;
    const auto failure = launch_failures.find(point.key());
    if (failure != launch_failures.end()) {
      return tuner::KernelOutcome::failure(failure->second, "injected launch failure");
    }
    return tuner::KernelOutcome::success();
  }

  void release() override {
    if (prepared_) ++releases;
    prepared_ = false;
  }

  bool picks_own_split_count() const override { return picks_own; }

  bool prepared() const { return prepared_; }

  // The model the fake GPU of the CLI times with (splitkv/tuner/fake_gpu.hpp).
  static double model_time_us(const tuner::SweepPoint& p) { return tuner::fake_gpu_time_us(p); }

  std::map<std::string, tuner::KernelOutcome> prepare_failures;  // by shape key
  std::map<std::string, tuner::PointStatus> launch_failures;     // by point key
  std::set<std::string> unsupported_shapes;                      // by shape key
  bool picks_own = false;  // stands in for a library heuristic: timed once per shape
  int prepares = 0;
  int releases = 0;
  int launches = 0;
  int largest_splits_prepared = 0;

 private:
  std::string name_;
  bool prepared_ = false;
  tuner::SweepPoint shape_;
  int copies_ = 0;
};

// The timing callback the GPU timer will replace: launch every rotating copy once, then
// report the model's time with a small fixed spread.
inline tuner::TimingResult time_with_model(tuner::KernelUnderTest& kernel,
                                           const tuner::SweepPoint& point, int copies) {
  for (int copy = 0; copy < copies; ++copy) {
    const tuner::KernelOutcome outcome = kernel.launch(copy, point.num_splits, nullptr);
    if (!outcome.ok()) return tuner::TimingResult::failure(outcome.status, outcome.message);
  }
  return tuner::fake_gpu_timing(point);
}

// Runner options for a sweep on the fake GPU into `out_csv`: no fsync (keeps the suites fast;
// fsync is tested in results_csv), a 1 MiB L2, a fixed git sha.
inline tuner::SweepRunOptions fake_gpu_run_options(const std::string& out_csv, std::ostream* progress = nullptr) {
  tuner::SweepRunOptions options;
  options.out_csv = out_csv;
  options.durability = tuner::Durability::write_only;
  options.device.name = "Fake GPU";
  options.device.l2_bytes = 1 << 20;
  options.git_sha = "test";
  options.progress = progress;
  return options;
}

}  // namespace splitkv::testing
