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

#include "splitkv/split_partition.hpp"
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

  bool prepared() const { return prepared_; }

  // Microseconds: launch overhead, KV read at a bandwidth that grows with the CTAs that
  // hold work until the SMs are full, and a combine that grows with the split count.
  static double model_time_us(const tuner::SweepPoint& p) {
    constexpr double kSms = 132;
    constexpr double kBandwidth = 4e12;
    const int active = active_splits(p.context_len, p.num_splits);
    const double ctas = double(p.batch) * p.num_kv_heads * active;
    const double utilisation = std::min(1.0, ctas / kSms);
    const double read_us = double(p.kv_bytes()) / (kBandwidth * utilisation) * 1e6;
    const double combine_us =
        p.num_splits > 1 ? 1.0 + 0.05 * p.num_splits + double(p.workspace_bytes()) / kBandwidth * 1e6 : 0;
    return 4.0 + read_us + combine_us;
  }

  std::map<std::string, tuner::KernelOutcome> prepare_failures;  // by shape key
  std::map<std::string, tuner::PointStatus> launch_failures;     // by point key
  std::set<std::string> unsupported_shapes;                      // by shape key
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
  const double t = FakeKernel::model_time_us(point);
  tuner::TimingResult result;
  result.time_us_median = t;
  result.time_us_p10 = t * 0.98;
  result.time_us_p90 = t * 1.03;
  result.cv = 0.01;
  result.repetitions = 5;
  return result;
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
