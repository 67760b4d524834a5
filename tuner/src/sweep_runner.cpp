#include "splitkv/tuner/sweep_runner.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"

namespace splitkv::tuner {

std::string_view to_string(SearchMode mode) {
  return mode == SearchMode::pruned ? "pruned" : "exhaustive";
}

std::optional<SearchMode> parse_search_mode(std::string_view text) {
  if (text == "exhaustive") return SearchMode::exhaustive;
  if (text == "pruned") return SearchMode::pruned;
  return std::nullopt;
}

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::complete:
      return "complete";
    case StopReason::interrupted:
      return "interrupted";
    case StopReason::aborted:
      return "aborted";
  }
  return "unknown";
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  const long long hours = total / 3600;
  const long long minutes = (total % 3600) / 60;
  const long long secs = total % 60;
  if (hours > 0) return fmt::format("{}h{:02}m", hours, minutes);
  if (minutes > 0) return fmt::format("{}m{:02}s", minutes, secs);
  return fmt::format("{}s", secs);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void release_quietly(KernelUnderTest& kernel) {
  try {
    kernel.release();
  } catch (...) {
    // A kernel whose context is already broken may fail to free; the sweep is stopping
    // or moving on either way, and the rows are what matters.
  }
}

// The whole loop of one run, split out of SweepRunner::run so the setup (which may refuse
// to start) and the timing (which always ends in a summary) stay apart.
class SweepExecution {
 public:
  SweepExecution(const SweepRunOptions& options, const SweepPlan& plan,
                 const std::vector<KernelUnderTest*>& kernels, const TimingCallback& time_point,
                 const ResumeState& resume, ResultsCsvWriter& writer,
                 std::int64_t memory_budget_bytes, double l2_multiple, SweepSummary& summary)
      : options_(options),
        plan_(plan),
        kernels_(kernels),
        time_point_(time_point),
        resume_(resume),
        writer_(writer),
        memory_budget_bytes_(memory_budget_bytes),
        l2_multiple_(l2_multiple),
        summary_(summary) {}

  void run() {
    start_ = Clock::now();
    to_process_ = summary_.planned - summary_.already_done;
    for (KernelUnderTest* kernel : kernels_) {
      for (const SweepShape& shape : plan_.shapes) {
        if (stop_requested()) return interrupted();
        run_shape(*kernel, shape);
        if (summary_.stop != StopReason::complete) return;
      }
    }
  }

  std::string current_point() const { return current_point_; }

 private:
  bool stop_requested() const {
    return options_.stop_requested != nullptr && options_.stop_requested->load();
  }

  void interrupted() {
    summary_.stop = StopReason::interrupted;
    summary_.message = fmt::format("interrupted; {} rows are saved in {}; run again with --resume "
                                   "to continue",
                                   summary_.rows_written, options_.out_csv);
  }

  // Rows of the kernel being swept (kernel_name_) that a resume must not time again.
  const ResultRow* finished(const SweepPoint& point) const {
    const auto found = resume_.finished.find(resume_key(kernel_name_, point));
    return found == resume_.finished.end() ? nullptr : &found->second;
  }

  void run_shape(KernelUnderTest& kernel, const SweepShape& shape) {
    kernel_name_ = kernel.name();
    const bool picks_own = kernel.picks_own_split_count();
    std::vector<int> pending;
    for (int splits : timed_split_counts(shape, picks_own)) {
      if (finished(shape.point(splits)) == nullptr) pending.push_back(splits);
    }
    if (pending.empty()) return;

    const SweepPoint widest = shape.point(shape.split_counts.back());
    current_point_ = widest.shape_key();
    std::string reason;
    if (!kernel.supports(widest, &reason)) {
      for (int splits : pending) {
        record(shape.point(splits), TimingResult::failure(PointStatus::skipped, reason));
      }
      return;
    }
    const int copies = rotating_copies(widest, options_.device.l2_bytes, l2_multiple_,
                                       memory_budget_bytes_, options_.max_copies);
    KernelOutcome prepared;
    try {
      prepared = kernel.prepare(widest, copies);
    } catch (...) {
      release_quietly(kernel);
      throw;
    }
    if (!prepared.ok()) {
      release_quietly(kernel);
      for (int splits : pending) {
        record(shape.point(splits), TimingResult::failure(prepared.status, prepared.message));
      }
      return;
    }
    try {
      // One count per shape for a kernel that picks its own: nothing to search.
      if (options_.search == SearchMode::pruned && !picks_own) {
        search_pruned(kernel, shape, copies);
      } else {
        for (int splits : pending) {
          if (stop_requested()) {
            interrupted();
            break;
          }
          measure(kernel, shape.point(splits), copies);
        }
      }
    } catch (...) {
      release_quietly(kernel);
      throw;
    }
    release_quietly(kernel);
  }

  // The time over split counts is close to unimodal: walk up from 1 and stop once
  // `patience` counts in a row are slower than the best so far. Rows already in the CSV
  // count as measured, so a resumed pruned sweep makes the same decisions.
  void search_pruned(KernelUnderTest& kernel, const SweepShape& shape, int copies) {
    double best = std::numeric_limits<double>::infinity();
    int slower_in_a_row = 0;
    for (std::size_t i = 0; i < shape.split_counts.size(); ++i) {
      const SweepPoint point = shape.point(shape.split_counts[i]);
      double time = std::numeric_limits<double>::infinity();
      if (const ResultRow* row = finished(point)) {
        if (row->status == PointStatus::ok) time = row->time_us_median;
      } else {
        if (stop_requested()) return interrupted();
        const TimingResult result = measure(kernel, point, copies);
        if (result.status == PointStatus::ok) time = result.time_us_median;
      }
      if (time < best) {
        best = time;
        slower_in_a_row = 0;
      } else if (++slower_in_a_row >= options_.pruned_search_patience) {
        for (std::size_t j = i + 1; j < shape.split_counts.size(); ++j) {
          if (finished(shape.point(shape.split_counts[j])) == nullptr) {
            ++summary_.search_skipped;
            ++processed_;
          }
        }
        return;
      }
    }
  }

  TimingResult measure(KernelUnderTest& kernel, const SweepPoint& point, int copies) {
    current_point_ = point.key();
    TimingResult result = time_point_(kernel, point, copies);
    for (int retry = 0; retry < options_.throttle_retries && result.status == PointStatus::throttled;
         ++retry) {
      result = time_point_(kernel, point, copies);
    }
    record(point, result);
    return result;
  }

  void record(const SweepPoint& point, const TimingResult& result) {
    ResultRow row;
    row.gpu = options_.device.name;
    row.gpu_index = options_.device.index;
    row.gpu_uuid = options_.device.uuid;
    row.kernel = kernel_name_;
    row.point = point;
    row.status = result.status;
    row.message = result.message;
    row.repetitions = result.repetitions;
    row.kv_bytes = point.kv_bytes();
    // A failed point's numbers are not measurements; the file leaves them empty.
    if (result.status == PointStatus::ok || result.status == PointStatus::throttled) {
      row.time_us_median = result.time_us_median;
      row.time_us_p10 = result.time_us_p10;
      row.time_us_p90 = result.time_us_p90;
      row.cv = result.cv;
      row.tbps = achieved_tbps(row.kv_bytes, row.time_us_median);
    }
    if (result.status == PointStatus::ok &&
        !(std::isfinite(row.time_us_median) && std::isfinite(row.time_us_p10) &&
          std::isfinite(row.time_us_p90) && std::isfinite(row.cv))) {
      row.status = PointStatus::launch_failed;
      row.message = "timer returned ok without finite median, p10, p90 and cv";
      row.time_us_median = row.time_us_p10 = row.time_us_p90 = row.cv = row.tbps =
          ResultRow::kMissing;
    }
    writer_.append(row);
    ++summary_.rows_written;
    ++processed_;
    if (row.status == PointStatus::ok) {
      ++summary_.ok;
    } else {
      ++summary_.failed;
    }
    print_progress(row);
  }

  void print_progress(const ResultRow& row) {
    if (options_.progress == nullptr) return;
    const std::int64_t done = summary_.already_done + processed_;
    const double percent = summary_.planned > 0 ? 100.0 * double(done) / double(summary_.planned) : 100;
    const double elapsed = seconds_since(start_);
    const double rate = elapsed > 0 ? double(processed_) / elapsed : 0;
    const double eta = rate > 0 ? double(to_process_ - processed_) / rate : NAN;
    std::string outcome;
    if (row.status == PointStatus::ok) {
      outcome = fmt::format("{:.1f} us ({:.2f} TB/s)", row.time_us_median, row.tbps);
    } else {
      outcome = fmt::format("{}{}{}", to_string(row.status), row.message.empty() ? "" : ": ", row.message);
    }
    const std::string kernel = kernels_.size() > 1 ? row.kernel + " " : "";
    *options_.progress << fmt::format("[{}/{}] {:.1f}% {:.1f} pt/s ETA {} {}{} -> {}\n", done,
                                      summary_.planned, percent, rate, format_duration(eta), kernel,
                                      row.point.key(), outcome);
    options_.progress->flush();
  }

  const SweepRunOptions& options_;
  const SweepPlan& plan_;
  const std::vector<KernelUnderTest*>& kernels_;
  const TimingCallback& time_point_;
  const ResumeState& resume_;
  ResultsCsvWriter& writer_;
  const std::int64_t memory_budget_bytes_;
  const double l2_multiple_;
  SweepSummary& summary_;

  std::string kernel_name_;
  std::string current_point_;
  Clock::time_point start_;
  std::int64_t processed_ = 0;
  std::int64_t to_process_ = 0;
};

std::string file_sha256_or_empty(const std::string& path) {
  std::error_code error;
  if (path.empty() || !std::filesystem::is_regular_file(path, error)) return "";
  return sha256_file_hex(path);
}

// Counts of the whole CSV, one per point (the last row of a point wins): the sidecar
// describes the file, not just the latest run into it.
void count_rows(const std::string& csv_path, SweepCounts& counts) {
  const ResultsCsv contents = read_results_csv(csv_path);
  std::unordered_map<std::string, PointStatus> last;
  for (const ResultRow& row : contents.rows) last[resume_key(row)] = row.status;
  counts.ok = 0;
  counts.failed = 0;
  for (const auto& [key, status] : last) {
    if (status == PointStatus::ok) {
      ++counts.ok;
    } else {
      ++counts.failed;
    }
  }
}

// A sweep killed inside write_sidecar leaves "<sidecar>.tmp.<pid>" next to the sidecar.
// Called with the CSV's lock held, so no other sweep is writing this sidecar: any such
// file is stale.
void remove_stale_sidecar_temps(const std::string& sidecar_path) {
  const std::filesystem::path sidecar(sidecar_path);
  const std::filesystem::path folder = sidecar.has_parent_path() ? sidecar.parent_path() : ".";
  const std::string prefix = sidecar.filename().string() + ".tmp.";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) {
      std::filesystem::remove(entry.path(), error);
    }
  }
}

}  // namespace

SweepRunner::SweepRunner(SweepRunOptions options) : options_(std::move(options)) {}

SweepSummary SweepRunner::run(const GridSpec& grid, const SweepPlan& plan,
                              const std::vector<KernelUnderTest*>& kernels,
                              const TimingCallback& time_point) {
  const auto wall_start = Clock::now();
  const std::string& out = options_.out_csv;
  if (out.empty()) throw SweepError("no output CSV given");
  if (kernels.empty()) throw SweepError("no kernel to sweep");
  if (!time_point) throw SweepError("no timing callback");
  std::vector<std::string> kernel_names;
  for (KernelUnderTest* kernel : kernels) {
    const std::string name = kernel->name();
    if (std::find(kernel_names.begin(), kernel_names.end(), name) != kernel_names.end()) {
      throw SweepError(fmt::format("kernel {} is listed twice", name));
    }
    kernel_names.push_back(name);
  }

  const std::string sidecar_path = sidecar_path_for(out);
  const std::string grid_sha = file_sha256_or_empty(grid.source);
  std::optional<Sidecar> previous;
  ResumeState resume;
  std::error_code fs_error;
  if (options_.resume) {
    if (std::filesystem::exists(sidecar_path, fs_error)) previous = read_sidecar(sidecar_path);
    if (previous && !grid_sha.empty() && !previous->grid_sha256.empty() &&
        previous->grid_sha256 != grid_sha) {
      throw SweepError(fmt::format(
          "{}: grid {} changed since this CSV was started (sha256 {} then, {} now); resuming "
          "would mix grids, so write to a new --out",
          out, grid.source, previous->grid_sha256.substr(0, 12), grid_sha.substr(0, 12)));
    }
    if (previous) {
      for (const auto& [name, file] : previous->length_files) {
        const auto now = grid.length_files.find(name);
        if (now != grid.length_files.end() && now->second.sha256 != file.second) {
          throw SweepError(fmt::format(
              "{}: length file {} (\"{}\") changed since this CSV was started (sha256 {} then, {} now); "
              "resuming would mix batches, so write to a new --out",
              out, now->second.path, name, file.second.substr(0, 12), now->second.sha256.substr(0, 12)));
        }
      }
    }
    if (previous && previous->device.name != options_.device.name) {
      throw SweepError(fmt::format("{}: measured on \"{}\", this device is \"{}\"; write to a new "
                                   "--out for another GPU",
                                   out, previous->device.name, options_.device.name));
    }
    if (previous && previous->shard != options_.shard.to_string()) {
      throw SweepError(fmt::format("{}: holds shard {}, not {}", out, previous->shard,
                                   options_.shard.to_string()));
    }
    if (previous && previous->shard != "0/1" && previous->shard_by != to_string(options_.shard_by)) {
      throw SweepError(fmt::format("{}: holds shard {} dealt by {}, not by {}", out, previous->shard,
                                   previous->shard_by, to_string(options_.shard_by)));
    }
    // Checked before load_resume_state, which truncates a torn tail.
    for (const std::string& gpu : resume_state_from(read_results_csv(out)).gpus) {
      if (gpu != options_.device.name) {
        throw SweepError(fmt::format("{}: holds rows measured on \"{}\", this device is \"{}\"; "
                                     "write to a new --out for another GPU",
                                     out, gpu, options_.device.name));
      }
    }
    resume = load_resume_state(out);
  } else {
    const ResultsCsv existing = read_results_csv(out);
    if (has_measured_data(existing)) {
      throw SweepError(fmt::format("{}: already holds {} measured rows; pass --resume to "
                                   "continue it, or choose another --out (measured data is "
                                   "never overwritten)",
                                   out, existing.rows.size() + (existing.torn ? 1 : 0)));
    }
  }

  SweepSummary summary;
  summary.truncated_tail = resume.truncated_tail;
  for (const KernelUnderTest* kernel : kernels) {
    const std::string name = kernel->name();
    for (const SweepShape& shape : plan.shapes) {
      for (int splits : timed_split_counts(shape, kernel->picks_own_split_count())) {
        ++summary.planned;
        summary.already_done += resume.finished.count(resume_key(name, shape.point(splits)));
      }
    }
  }

  ResultsCsvWriter writer(out, options_.durability);

  Sidecar sidecar;
  sidecar.tool_version = tool_version();
  sidecar.git_sha = options_.git_sha.empty() ? git_head_sha(source_dir()) : options_.git_sha;
  sidecar.results_csv = out;
  sidecar.grid_path = grid.source;
  sidecar.grid_sha256 = grid_sha;
  sidecar.grid_name = grid.name;
  for (const auto& [name, file] : grid.length_files) sidecar.length_files[name] = {file.path, file.sha256};
  sidecar.kernels = kernel_names;
  if (previous) {
    for (const std::string& name : previous->kernels) {
      if (std::find(sidecar.kernels.begin(), sidecar.kernels.end(), name) == sidecar.kernels.end()) {
        sidecar.kernels.push_back(name);
      }
    }
  }
  sidecar.search = std::string(to_string(options_.search));
  sidecar.shard = options_.shard.to_string();
  sidecar.shard_by = std::string(to_string(options_.shard_by));
  sidecar.memory_budget_gb = grid.memory_budget_gb;
  sidecar.protocol = grid.protocol;
  sidecar.device = options_.device;
  sidecar.started_at = previous ? previous->started_at : iso8601_utc(std::chrono::system_clock::now());
  sidecar.runs = previous ? previous->runs + 1 : 1;
  sidecar.state = "running";
  sidecar.counts.planned = summary.planned;
  sidecar.counts.pruned = plan.pruned.total();
  for (const auto& [reason, count] : plan.pruned.points) {
    sidecar.counts.pruned_by_reason[std::string(to_string(reason))] = count;
  }
  if (options_.write_sidecar) {
    remove_stale_sidecar_temps(sidecar_path);
    count_rows(out, sidecar.counts);
    write_sidecar(sidecar_path, sidecar);
  }

  SweepExecution execution(options_, plan, kernels, time_point, resume, writer,
                           grid.memory_budget_bytes(), grid.protocol.min_working_set_l2_multiple,
                           summary);
  try {
    execution.run();
  } catch (const std::exception& error) {
    summary.stop = StopReason::aborted;
    summary.message = fmt::format("stopped at {}: {}; {} rows are saved in {}; fix the cause and "
                                  "run again with --resume to continue",
                                  execution.current_point(), error.what(), summary.rows_written, out);
  }
  summary.elapsed_s = seconds_since(wall_start);

  if (options_.write_sidecar) {
    sidecar.state = std::string(to_string(summary.stop));
    sidecar.message = summary.message;
    sidecar.finished_at = iso8601_utc(std::chrono::system_clock::now());
    sidecar.counts.search_skipped = summary.search_skipped;
    count_rows(out, sidecar.counts);
    write_sidecar(sidecar_path, sidecar);
  }
  return summary;
}

}  // namespace splitkv::tuner
