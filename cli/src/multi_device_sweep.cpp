// `splitkv sweep --devices`: one worker process per listed GPU, each the same sweep on its own
// shard (shapes dealt by estimated cost), watched from here: one progress line for all of them,
// a worker that dies restarted with --resume, and the shards merged into --out once every
// worker is done. The workers are plain `splitkv sweep --shard i/N --resume` processes, so
// everything a single sweep promises (a row on disk as soon as it is measured, a resume that
// loses and repeats nothing) holds for each of them.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <thread>

#include <fmt/format.h>

#include "splitkv/tuner/atomic_file.hpp"
#include "splitkv/tuner/fake_gpu.hpp"
#include "splitkv/tuner/merge_results.hpp"
#include "splitkv/tuner/plan_report.hpp"
#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "sweep_support.hpp"

extern char** environ;

namespace splitkv::cli {
namespace {

namespace fs = std::filesystem;
using namespace splitkv::tuner;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "results/h200/full.csv" -> "results/h200/full.shards": where the workers' CSVs and logs go.
std::string shards_folder_for(const std::string& out_csv) {
  fs::path path(out_csv);
  if (path.extension() == ".csv") return path.replace_extension(".shards").string();
  return out_csv + ".shards";
}

// "0,1,1" -> those indices (one may repeat: workers sharing a GPU).
std::vector<int> parse_device_list(const std::string& text) {
  std::vector<int> indices;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    if (entry.empty() || entry.size() > 6 || entry.find_first_not_of("0123456789") != std::string::npos) {
      throw InputError(fmt::format("--devices \"{}\": \"{}\" is not a GPU index (expected all, or indices "
                                   "as splitkv devices numbers them, e.g. 0,1,2)",
                                   text, entry));
    }
    indices.push_back(std::stoi(entry));
    start = comma + 1;
  }
  return indices;
}

struct Worker {
  enum class State { running, waiting, done, interrupted, failed, bad_input };

  int shard = 0;
  int ordinal = 0;          // the GPU in this process's numbering (splitkv devices)
  int gpu = 0;              // its index on the machine, for the progress line
  std::string visible;      // the worker's CUDA_VISIBLE_DEVICES
  std::string csv, log;
  std::int64_t planned = 0;
  std::int64_t rows = 0;           // rows in its CSV now
  std::int64_t rows_at_start = 0;  // ... when this run began
  std::int64_t newlines = 0, counted_bytes = 0;
  pid_t pid = -1;
  int restarts = 0;
  State state = State::waiting;
  Clock::time_point start_at;
  double finished_s = 0;
  std::string last_exit;
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

// Lines in the worker's CSV, counted from where the last count stopped: it only grows, but a
// resume may first cut a torn last line (never a newline), so a shrunk file is counted again.
void count_rows(Worker& w) {
  struct stat info {};
  if (::stat(w.csv.c_str(), &info) != 0) {
    w.rows = w.newlines = w.counted_bytes = 0;
    return;
  }
  if (info.st_size < w.counted_bytes) w.newlines = w.counted_bytes = 0;
  if (info.st_size > w.counted_bytes) {
    const int fd = ::open(w.csv.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buffer[1 << 16];
    while (w.counted_bytes < info.st_size) {
      const ssize_t n = ::pread(fd, buffer, sizeof buffer, w.counted_bytes);
      if (n <= 0) break;
      w.newlines += std::count(buffer, buffer + n, '\n');
      w.counted_bytes += n;
    }
    ::close(fd);
  }
  w.rows = std::max<std::int64_t>(0, w.newlines - 1);  // the header
}

std::vector<std::string> worker_environment(const std::string& visible) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env.emplace_back(*e);
  }
  env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  return env;
}

// Starts `self args...` with its output appended to `log`, in its own process group (a
// Ctrl-C reaches this process alone, which passes one SIGINT on), and told to stop cleanly
// (SIGINT) should this process die first.
pid_t spawn_worker(const std::string& self, const std::vector<std::string>& args, const std::vector<std::string>& env,
                   const std::string& log) {
  std::vector<std::string> argv_text = {self};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text = env;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error(fmt::format("{}: cannot open for appending: {}", log, std::strerror(errno)));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGINT);
    if (::getppid() != parent) ::_exit(kExitInterrupted);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execve(self.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(fork_errno)));
  return pid;
}

std::string last_lines(const std::string& path, int count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > std::size_t(count)) lines.erase(lines.begin());
  }
  std::string text;
  for (const std::string& line : lines) text += "    " + line + "\n";
  return text;
}

class MultiDeviceSweep {
 public:
  MultiDeviceSweep(const SweepCommandOptions& options, const SweepInputs& inputs, std::ostream& out,
                   std::ostream& err)
      : options_(options), inputs_(inputs), out_(out), err_(err) {}

  int run() {
    if (options_.worker_retries < 0) {
      throw InputError(fmt::format("--worker-retries {}: must be >= 0", options_.worker_retries));
    }
    resolve_devices();
    const SweepPlan whole = expand_grid(inputs_.grid);
    const int count = int(workers_.size());
    for (Worker& w : workers_) {
      const SweepPlan plan = select_shard(inputs_.grid, whole, ShardSpec{w.shard, count}, inputs_.shard_by);
      w.planned = plan.point_count() * std::int64_t(inputs_.kernels.size());
      estimates_.push_back(estimate_plan(inputs_.grid, plan, int(inputs_.kernels.size())).seconds);
    }
    if (options_.dry_run) return dry_run(whole);
    check_outputs();
    fs::create_directories(folder_);
    start_ = Clock::now();
    err_ << fmt::format("splitkv sweep: {} workers on {}; shapes dealt by {} (estimated {}); their CSVs and logs "
                        "are in {}\n",
                        count, gpus_text(), to_string(inputs_.shard_by), estimates_text(), folder_);
    install_stop_handlers();
    for (Worker& w : workers_) start(w);
    watch();
    restore_default_signals();
    return finish();
  }

 private:
  void resolve_devices() {
    const std::vector<int> requested =
        options_.devices == "all" ? std::vector<int>{} : parse_device_list(options_.devices);
    const DeviceListing listing = list_sweep_devices();
    if (!listing.ok && !(options_.dry_run && options_.devices != "all")) {
      throw std::runtime_error("--devices: " + listing.error);
    }
    // Indices as `splitkv devices` prints them (the machine's, through CUDA_VISIBLE_DEVICES), each
    // turned into this process's CUDA ordinal.
    std::vector<int> ordinals;
    if (options_.devices == "all") {
      for (std::size_t i = 0; i < listing.devices.size(); ++i) ordinals.push_back(int(i));
    } else {
      std::string known;
      for (const DeviceFacts& d : listing.devices) known += (known.empty() ? "" : ", ") + std::to_string(d.index);
      for (int index : requested) {
        const auto found = std::find_if(listing.devices.begin(), listing.devices.end(),
                                        [&](const DeviceFacts& d) { return d.index == index; });
        if (listing.ok && found == listing.devices.end()) {
          throw InputError(fmt::format("--devices {}: there is no GPU {} (visible: {}; see splitkv devices)",
                                       options_.devices, index, known));
        }
        ordinals.push_back(listing.ok ? int(found - listing.devices.begin()) : index);
      }
    }
    // One output holds one GPU model: the fit turns it into that model's table.
    if (listing.ok) {
      const DeviceFacts& first = listing.devices[std::size_t(ordinals.front())];
      for (int ordinal : ordinals) {
        const DeviceFacts& d = listing.devices[std::size_t(ordinal)];
        if (d.name != first.name) {
          throw InputError(fmt::format(
              "--devices {}: GPU {} is \"{}\" but GPU {} is \"{}\"; one output holds the results of one GPU "
              "model, so refusing to mix them: list GPUs of one model (splitkv devices shows them) and sweep "
              "each model into its own --out",
              options_.devices, first.index, first.name, d.index, d.name));
        }
      }
      model_ = first.name;
    }
    folder_ = shards_folder_for(options_.out_path.empty() ? "splitkv_sweep.csv" : options_.out_path);
    for (std::size_t i = 0; i < ordinals.size(); ++i) {
      Worker w;
      w.shard = int(i);
      w.ordinal = ordinals[i];
      w.gpu = listing.ok ? listing.devices[std::size_t(w.ordinal)].index : w.ordinal;
      w.visible = visible_device_entry(w.ordinal);
      w.csv = (fs::path(folder_) / fmt::format("shard{}.csv", i)).string();
      w.log = (fs::path(folder_) / fmt::format("shard{}.log", i)).string();
      workers_.push_back(std::move(w));
    }
  }

  std::string gpus_text() const {
    std::map<int, int> per_gpu;
    for (const Worker& w : workers_) ++per_gpu[w.gpu];
    std::string text;
    for (const auto& [gpu, n] : per_gpu) {
      text += fmt::format("{}GPU {}{}", text.empty() ? "" : ", ", gpu, n > 1 ? fmt::format(" (x{}, shared)", n) : "");
    }
    return text + (model_.empty() ? "" : " (" + model_ + ")");
  }

  std::string estimates_text() const {
    std::string text;
    for (double s : estimates_) text += (text.empty() ? "~" : ", ~") + format_duration(s);
    return text + " each";
  }

  int dry_run(const SweepPlan& whole) {
    PlanReportInput report;
    report.grid = &inputs_.grid;
    report.grid_sha256 = sha256_file_hex(options_.grid_path);
    report.whole = &whole;
    report.shard = &whole;
    report.kernels = inputs_.kernels;
    report.search = inputs_.search;
    out_ << format_plan_report(report);
    const int count = int(workers_.size());
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = workers_[i];
      out_ << fmt::format("worker    {} on GPU {} (CUDA_VISIBLE_DEVICES={}): shard {}/{} by {}, {} rows, ~{}\n", i,
                          w.gpu, w.visible, w.shard, count, to_string(inputs_.shard_by), w.planned,
                          format_duration(estimates_[i]));
    }
    return 0;
  }

  // Before any worker starts: --out is usable, and the shards folder holds either nothing or
  // the shards of this same run (with --resume).
  void check_outputs() {
    const ResultsCsv merged =
        check_output(options_.out_path, options_.resume, options_.grid_path, ShardSpec{}, inputs_.shard_by);
    std::error_code error;
    const bool folder_exists = fs::is_directory(folder_, error);
    if (!folder_exists && fs::exists(folder_, error)) {
      throw InputError(fmt::format("--out {}: {} (where the workers write) exists and is not a folder",
                                   options_.out_path, folder_));
    }
    if (has_measured_data(merged) && !folder_exists) {
      throw InputError(fmt::format("--out {}: holds the rows of a sweep run without --devices (there is no {}); "
                                   "resume it without --devices, or choose another --out",
                                   options_.out_path, folder_));
    }
    if (!folder_exists) return;
    const int count = int(workers_.size());
    for (const auto& entry : fs::directory_iterator(folder_)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("shard", 0) != 0 || entry.path().extension() != ".csv") continue;
      const ResultsCsv contents = read_results_csv(entry.path().string());
      if (has_measured_data(contents) && !options_.resume) {
        throw InputError(fmt::format("{}: holds the rows of an earlier --devices run into {}; pass --resume to "
                                     "continue it, or choose another --out",
                                     entry.path().string(), options_.out_path));
      }
      const std::string sidecar = sidecar_path_for(entry.path().string());
      if (!fs::exists(sidecar, error)) continue;
      const ShardSpec shard = parse_shard(read_sidecar(sidecar).shard);
      if (shard.count != count) {
        throw InputError(fmt::format("{}: this sweep was started on {} workers (it holds shard {}), not {}; "
                                     "resume it with {} entries in --devices",
                                     sidecar, shard.count, shard.to_string(), count, shard.count));
      }
    }
  }

  void start(Worker& w) {
    count_rows(w);
    w.rows_at_start = w.rows;
    w.start_at = Clock::now();
    const std::vector<std::string> args = shard_sweep_arguments(
        options_, inputs_, w.csv, ShardSpec{w.shard, int(workers_.size())}.to_string());
    w.pid = spawn_worker(self_executable(), args, worker_environment(w.visible), w.log);
    w.state = Worker::State::running;
  }

  void stop_all() {
    for (Worker& w : workers_) {
      if (w.state == Worker::State::running) ::kill(w.pid, SIGINT);
      if (w.state == Worker::State::waiting) w.state = Worker::State::interrupted;
    }
  }

  void reaped(Worker& w, int status) {
    w.pid = -1;
    w.last_exit = describe_status(status);
    w.finished_s = seconds_since(start_);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      w.state = Worker::State::done;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitBadInput) {
      w.state = Worker::State::bad_input;  // the same input would be refused again
      if (!stopping_) {
        stopping_ = true;
        stop_all();
      }
    } else if (stopping_ || g_stop_requested.load()) {
      w.state = Worker::State::interrupted;
    } else if (w.restarts < options_.worker_retries) {
      ++w.restarts;
      w.state = Worker::State::waiting;
      w.start_at = Clock::now() + std::chrono::milliseconds(500);
      err_ << fmt::format("splitkv sweep: worker {} (GPU {}, shard {}/{}) ended with {}; restarting it with "
                          "--resume (restart {} of {}); its log: {}\n",
                          w.shard, w.gpu, w.shard, workers_.size(), w.last_exit, w.restarts,
                          options_.worker_retries, w.log);
    } else {
      w.state = Worker::State::failed;
    }
  }

  void watch() {
    auto last_print = Clock::now() - std::chrono::seconds(10);
    std::int64_t last_done = -1;
    while (true) {
      if (g_stop_requested.load() && !stopping_) {
        stopping_ = true;
        stop_all();
      }
      bool live = false;
      for (Worker& w : workers_) {
        if (w.state == Worker::State::running) {
          int status = 0;
          const pid_t pid = ::waitpid(w.pid, &status, WNOHANG);
          if (pid == w.pid) reaped(w, status);
        }
        if (w.state == Worker::State::waiting && !stopping_ && Clock::now() >= w.start_at) start(w);
        count_rows(w);
        live = live || w.state == Worker::State::running || w.state == Worker::State::waiting;
      }
      const std::int64_t done = total_done();
      if (!live || (done != last_done && Clock::now() - last_print >= std::chrono::seconds(1))) {
        print_progress();
        last_print = Clock::now();
        last_done = done;
      }
      if (!live) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  std::int64_t done_of(const Worker& w) const {
    return w.state == Worker::State::done ? w.planned : std::min(w.planned, w.rows);
  }

  std::int64_t total_done() const {
    std::int64_t done = 0;
    for (const Worker& w : workers_) done += done_of(w);
    return done;
  }

  // One line for all workers; the ETA is the last worker's.
  void print_progress() {
    const double elapsed = std::max(seconds_since(start_), 1e-3);
    std::int64_t planned = 0, written = 0;
    double eta = 0;
    std::string parts;
    for (const Worker& w : workers_) {
      planned += w.planned;
      const std::int64_t new_rows = std::max<std::int64_t>(0, w.rows - w.rows_at_start);
      written += new_rows;
      if (w.state != Worker::State::done) {
        const double rate = double(new_rows) / elapsed;
        eta = rate > 0 ? std::max(eta, double(w.planned - done_of(w)) / rate) : NAN;
      }
      parts += fmt::format(" | w{} gpu{} {}/{}{}", w.shard, w.gpu, done_of(w), w.planned,
                           w.state == Worker::State::done ? " done" : w.restarts > 0 ? fmt::format(" ({}x restarted)", w.restarts) : "");
    }
    const std::int64_t done = total_done();
    err_ << fmt::format("[{}/{}] {:.1f}% {:.1f} pt/s ETA {}{}\n", done, planned,
                        planned > 0 ? 100.0 * double(done) / double(planned) : 100.0, double(written) / elapsed,
                        format_duration(eta), parts);
    err_.flush();
  }

  int finish() {
    int bad = 0, failed = 0, interrupted = 0;
    for (const Worker& w : workers_) {
      bad += w.state == Worker::State::bad_input;
      failed += w.state == Worker::State::failed;
      interrupted += w.state == Worker::State::interrupted;
    }
    for (const Worker& w : workers_) {
      if (w.state != Worker::State::bad_input && w.state != Worker::State::failed) continue;
      err_ << fmt::format("splitkv sweep: worker {} (GPU {}) {} ({}{}); the end of its log {}:\n{}", w.shard, w.gpu,
                          w.state == Worker::State::bad_input ? "refused its input" : "failed", w.last_exit,
                          w.restarts > 0 ? fmt::format(", after {} restarts", w.restarts) : "", w.log,
                          last_lines(w.log, 4));
    }
    if (bad > 0) return kExitBadInput;
    if (failed > 0 || interrupted > 0) {
      err_ << fmt::format("splitkv sweep: {}; every row so far is kept in {}\n",
                          failed > 0 ? fmt::format("{} of {} workers failed", failed, workers_.size())
                                     : std::string("interrupted"),
                          folder_);
      err_ << "splitkv sweep: resume with: " << resume_command(options_, inputs_) << "\n";
      return failed > 0 ? kExitFailed : kExitInterrupted;
    }
    std::vector<std::string> csvs;
    std::string times;
    for (const Worker& w : workers_) {
      csvs.push_back(w.csv);
      times += fmt::format("{}w{} {}", times.empty() ? "" : ", ", w.shard, format_duration(w.finished_s));
    }
    try {
      const MergeSummary summary = merge_results(csvs, options_.out_path);
      err_ << fmt::format("splitkv sweep: complete: {} rows from {} workers merged into {} in {} (workers: {})\n",
                          summary.rows, summary.shards, options_.out_path, format_duration(seconds_since(start_)),
                          times);
      return 0;
    } catch (const std::exception& error) {
      err_ << fmt::format("splitkv sweep: every worker finished, but merging their CSVs into {} failed: {}; their "
                          "rows are kept in {}\n",
                          options_.out_path, error.what(), folder_);
      return kExitFailed;
    }
  }

  const SweepCommandOptions& options_;
  const SweepInputs& inputs_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<Worker> workers_;
  std::vector<double> estimates_;
  std::string folder_;
  std::string model_;
  Clock::time_point start_;
  bool stopping_ = false;
};

}  // namespace

int run_multi_device_sweep(const SweepCommandOptions& options, const SweepInputs& inputs, std::ostream& out,
                           std::ostream& err) {
  return MultiDeviceSweep(options, inputs, out, err).run();
}

}  // namespace splitkv::cli
