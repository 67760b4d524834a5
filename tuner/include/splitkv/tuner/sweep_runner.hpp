// Drives a sweep on the host: walks the planned points, skips what the results CSV already
// holds, asks a timing callback for each point, appends each row the moment it exists,
// and keeps the sidecar current. It never touches CUDA itself: the GPU timer is the
// callback, and tests drive the same loop with a fake kernel.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/tuner/device_facts.hpp"
#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/kernel_under_test.hpp"
#include "splitkv/tuner/point_status.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sweep_plan.hpp"

namespace splitkv::tuner {

// A sweep that must not start: output holding rows without --resume, a grid or GPU that
// differs from the one the output was measured with. Input problems, not device failures.
class SweepError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TimingResult {
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

  double time_us_median = kMissing;
  double time_us_p10 = kMissing;
  double time_us_p90 = kMissing;
  double cv = kMissing;  // standard deviation / mean over the repetitions
  int repetitions = 0;
  PointStatus status = PointStatus::ok;
  std::string message;

  static TimingResult failure(PointStatus status, std::string message) {
    TimingResult result;
    result.status = status;
    result.message = std::move(message);
    return result;
  }
};

// Times one point on a kernel whose buffers are prepared (`copies` rotating sets). Return
// a failure status for a point that could not be measured; throw only when the sweep
// cannot go on (a sticky CUDA error): the runner then stops with every row so far kept.
using TimingCallback =
    std::function<TimingResult(KernelUnderTest& kernel, const SweepPoint& point, int copies)>;

enum class SearchMode {
  exhaustive,  // every planned split count
  pruned,      // per shape, ascending split counts until `patience` in a row are slower than the best
};
std::string_view to_string(SearchMode mode);
std::optional<SearchMode> parse_search_mode(std::string_view text);

struct SweepRunOptions {
  std::string out_csv;
  bool resume = false;
  SearchMode search = SearchMode::exhaustive;
  int pruned_search_patience = 3;  // on the exhaustive H200 full.csv: the best within ties on 99.0% of shapes
  int throttle_retries = 1;  // throttled points are re-timed this many times before recording
  int max_copies = 1024;     // cap on rotating buffer sets per shape
  Durability durability = Durability::fsync_each_row;
  DeviceFacts device;        // name, index and uuid fill the gpu columns; l2_bytes sizes the rotation
  ShardSpec shard;
  ShardBy shard_by = ShardBy::index;  // how the plan's shapes were dealt to `shard`
  bool write_sidecar = true;
  std::string git_sha;       // empty: git_head_sha(source_dir())
  const std::atomic<bool>* stop_requested = nullptr;  // checked between points (SIGINT)
  std::ostream* progress = nullptr;                   // progress lines; null is silent
};

enum class StopReason { complete, interrupted, aborted };
std::string_view to_string(StopReason reason);

struct SweepSummary {
  StopReason stop = StopReason::complete;
  std::string message;               // why it stopped early; says how to resume
  std::int64_t planned = 0;          // points x kernels in this shard (shapes for a kernel that picks its own count)
  std::int64_t already_done = 0;     // found in the CSV and skipped
  std::int64_t rows_written = 0;     // by this run
  std::int64_t ok = 0;               // rows written with status ok
  std::int64_t failed = 0;           // rows written with another status
  std::int64_t search_skipped = 0;   // left untimed by the pruned search
  std::optional<TornTail> truncated_tail;
  double elapsed_s = 0;
};

class SweepRunner {
 public:
  explicit SweepRunner(SweepRunOptions options);

  // Throws SweepError (refused to start) or CsvError/SidecarError (unusable files) before
  // timing anything; once timing, every outcome is in the returned summary.
  SweepSummary run(const GridSpec& grid, const SweepPlan& plan,
                   const std::vector<KernelUnderTest*>& kernels, const TimingCallback& time_point);

 private:
  SweepRunOptions options_;
};

// "1m32s", "45s", "2h03m": ETA and duration spelling of progress lines and reports.
std::string format_duration(double seconds);

}  // namespace splitkv::tuner
