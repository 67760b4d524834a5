// kill -9 / resume: the sweep runner, driven by the CPU test double (tests/cpu/fake_kernel.hpp),
// is killed with SIGKILL at random moments and resumed each time, as a user would with
// `splitkv sweep --resume`, until it completes. Its CSV must then equal, byte for byte, the
// CSV of an uninterrupted run of the same grid: every point once, none lost, none doubled,
// no torn line, in plan order. Some cycles also leave a torn last line behind (what a machine
// crash in the middle of a row's write leaves), which the next --resume must cut off.
//
// After every kill it also checks the file the user would see at that moment: it parses (a
// torn tail allowed), holds no duplicate final row, every complete line is a line of the
// uninterrupted CSV, no row was lost since the previous cycle, and the sidecar (written
// atomically) parses.
//
//   splitkv_kill_resume --grid GRID --work DIR [--cycles N] [--seed S] [--sleep-us U]
//                       [--search exhaustive|pruned] [--rounds R]
//
// --rounds repeats the whole test R times with seeds S, S+1, ... (a soak run for the figures
// in RELIABILITY.md) and prints the totals.
//   splitkv_kill_resume --child --grid GRID --out CSV [--resume] [--sleep-us U] [--search ...]
//
// Exit: 0 pass, 1 a check failed (the message says which), 2 bad arguments.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fake_kernel.hpp"
#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace splitkv::tuner;
using splitkv::testing::FakeKernel;
using Clock = std::chrono::steady_clock;

struct Options {
  bool child = false;
  std::string grid;
  std::string out;
  std::string work;
  bool resume = false;
  int cycles = 25;
  unsigned long long seed = 0;
  bool seed_given = false;
  int sleep_us = 1000;
  std::string search = "exhaustive";
  int rounds = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "splitkv_kill_resume: " << why << "\n"
            << "usage: splitkv_kill_resume --grid GRID --work DIR [--cycles N] [--seed S] "
               "[--sleep-us U] [--search exhaustive|pruned] [--rounds R]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--child") o.child = true;
    else if (a == "--resume") o.resume = true;
    else if (a == "--grid") o.grid = value();
    else if (a == "--out") o.out = value();
    else if (a == "--work") o.work = value();
    else if (a == "--cycles") o.cycles = std::stoi(value());
    else if (a == "--seed") { o.seed = std::stoull(value()); o.seed_given = true; }
    else if (a == "--sleep-us") o.sleep_us = std::stoi(value());
    else if (a == "--search") o.search = value();
    else if (a == "--rounds") o.rounds = std::stoi(value());
    else usage("unknown argument " + a);
  }
  if (o.grid.empty()) usage("--grid is required");
  if (o.child && o.out.empty()) usage("--child needs --out");
  if (!o.child && o.work.empty()) usage("--work is required");
  if (!parse_search_mode(o.search)) usage("--search must be exhaustive or pruned");
  return o;
}

// ---------------------------------------------------------------------------------------
// Child: one `splitkv sweep` invocation, with the fake kernel and a timer that takes
// sleep_us per point. Failures are part of the data: one shape runs out of memory, one is
// unsupported, one point fails to launch.
int run_child(const Options& o) {
  const GridSpec grid = load_grid_file(o.grid);
  const SweepPlan plan = expand_grid(grid);
  FakeKernel kernel("splitkv");
  if (plan.shapes.size() > 3) {
    kernel.prepare_failures[plan.shapes[1].shape.shape_key()] =
        KernelOutcome::failure(PointStatus::oom, "fake: out of memory");
    kernel.unsupported_shapes.insert(plan.shapes[2].shape.shape_key());
    const SweepShape& shape = plan.shapes[3];
    kernel.launch_failures[shape.point(shape.split_counts.back()).key()] = PointStatus::launch_failed;
  }
  SweepRunOptions options;
  options.out_csv = o.out;
  options.resume = o.resume;
  options.search = *parse_search_mode(o.search);
  options.durability = Durability::fsync_each_row;  // what the CLI uses
  options.device.name = "Fake GPU (kill/resume test double)";
  options.device.l2_bytes = 1 << 20;
  options.git_sha = "kill-resume-test";
  const int sleep_us = o.sleep_us;
  SweepRunner runner(options);
  const SweepSummary summary = runner.run(
      grid, plan, {&kernel}, [sleep_us](KernelUnderTest& k, const SweepPoint& point, int copies) {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        return splitkv::testing::time_with_model(k, point, copies);
      });
  if (summary.stop != StopReason::complete) {
    std::cerr << "child: " << to_string(summary.stop) << ": " << summary.message << "\n";
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Driver.
int g_failures = 0;

struct Totals {
  long kills = 0;        // into the final CSVs
  long torn = 0;         // torn tails injected and repaired
  long rows = 0;         // rows of the final CSVs
  long lost = 0, duplicated = 0, foreign = 0;
} g_totals;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "FAIL: " << what << "\n";
    ++g_failures;
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> complete_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

pid_t spawn_child(const std::string& self, const Options& o, const std::string& out, bool resume) {
  std::vector<std::string> args = {self, "--child", "--grid", o.grid, "--out", out,
                                   "--sleep-us", std::to_string(o.sleep_us), "--search", o.search};
  if (resume) args.push_back("--resume");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    throw std::runtime_error("posix_spawn failed");
  }
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  return status;
}

int run_to_completion(const std::string& self, const Options& o, const std::string& out, bool resume) {
  const int status = wait_child(spawn_child(self, o, out, resume));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Appends the first part of a row without its newline: a write torn by a machine crash.
void tear_tail(const std::string& csv, const std::string& row, std::mt19937_64& random) {
  std::ofstream out(csv, std::ios::binary | std::ios::app);
  const std::size_t keep = 1 + random() % std::max<std::size_t>(1, row.size() - 1);
  out << row.substr(0, keep);
}

int run_driver(const Options& o, const std::string& self, unsigned long long seed) {
  const int failures_at_start = g_failures;
  std::mt19937_64 random(seed);
  std::cout << "kill/resume: seed " << seed << " (rerun with --seed " << seed << "), "
            << o.cycles << " kills, search " << o.search << ", " << o.sleep_us << " us per point\n";
  fs::remove_all(o.work);
  fs::create_directories(o.work);
  const std::string reference_csv = (fs::path(o.work) / "reference.csv").string();
  const std::string killed_csv = (fs::path(o.work) / "killed.csv").string();

  // 1. The uninterrupted run.
  const auto reference_start = Clock::now();
  if (run_to_completion(self, o, reference_csv, false) != 0) {
    std::cerr << "FAIL: the uninterrupted reference run did not complete\n";
    return 1;
  }
  const double reference_s = std::chrono::duration<double>(Clock::now() - reference_start).count();
  const std::string reference = read_all(reference_csv);
  const std::vector<std::string> reference_lines = complete_lines(reference);
  const std::set<std::string> reference_set(reference_lines.begin(), reference_lines.end());
  const std::size_t reference_rows = reference_lines.size() - 1;
  check(reference_set.size() == reference_lines.size(), "the reference run holds duplicate lines");
  std::cout << "reference: " << reference_rows << " rows in " << reference_s << " s\n";

  // 2. The killed-and-resumed run.
  // kills counts those into the current file; a run that completes before its kill restarts
  // the file, so the final CSV has been through o.cycles kills.
  int kills = 0, total_kills = 0, torn_injected = 0, finished_early = 0, launches = 0,
      launches_into_file = 0;
  std::size_t previous_rows = 0;
  std::vector<std::size_t> rows_after_kill;  // of the current file, for the report
  bool resume = false;
  while (kills < o.cycles) {
    // Spread the remaining kills over the remaining work: a random delay up to 1.5x the
    // fair share, so some kills land during start-up and some deep into a run.
    const double remaining = 1.0 - double(previous_rows) / double(reference_rows);
    const double share_s = reference_s * std::max(remaining, 0.02) / double(o.cycles - kills + 1);
    const double delay_s = std::uniform_real_distribution<double>(0, 1.25 * share_s)(random) +
                           std::uniform_real_distribution<double>(0, 0.002)(random);
    const pid_t pid = spawn_child(self, o, killed_csv, resume);
    ++launches;
    ++launches_into_file;
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    ::kill(pid, SIGKILL);
    const int status = wait_child(pid);
    resume = true;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++kills;
      ++total_kills;
    } else {
      // It completed before the kill landed: start again from a fresh file so every counted
      // cycle is a real kill.
      ++finished_early;
      check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child exited with an error");
      if (finished_early > 3 * o.cycles) {
        std::cerr << "FAIL: the sweep keeps finishing before the kill; grid too small\n";
        return 1;
      }
      fs::remove(killed_csv);
      fs::remove(sidecar_path_for(killed_csv));
      previous_rows = 0;
      rows_after_kill.clear();
      kills = 0;
      torn_injected = 0;
      launches_into_file = 0;
      resume = false;
      continue;
    }

    // What the user would find on disk right now.
    const std::string text = read_all(killed_csv);
    std::size_t rows = 0;
    try {
      const ResultsCsv contents = parse_results_csv(text, killed_csv);
      check_results_consistency(contents, killed_csv);
      rows = contents.rows.size();
    } catch (const std::exception& error) {
      check(false, std::string("after kill ") + std::to_string(kills) + ": " + error.what());
    }
    for (const std::string& line : complete_lines(text)) {
      check(reference_set.count(line) == 1,
            "after kill " + std::to_string(kills) + ": a line that is not in the reference: " + line);
    }
    check(rows >= previous_rows, "after kill " + std::to_string(kills) + ": rows went from " +
                                     std::to_string(previous_rows) + " to " + std::to_string(rows));
    previous_rows = rows;
    rows_after_kill.push_back(rows);
    const std::string sidecar = sidecar_path_for(killed_csv);
    if (fs::exists(sidecar)) {
      try {
        read_sidecar(sidecar);
      } catch (const std::exception& error) {
        check(false, std::string("after kill ") + std::to_string(kills) + ": sidecar: " + error.what());
      }
    }
    // Every fourth cycle, a torn last line for the next --resume to cut off.
    if (kills % 4 == 0 && !text.empty() && text.back() == '\n' && rows + 1 < reference_lines.size()) {
      tear_tail(killed_csv, reference_lines[rows + 1], random);
      ++torn_injected;
    }
  }
  const int final_code = run_to_completion(self, o, killed_csv, true);
  ++launches;
  ++launches_into_file;
  check(final_code == 0, "the final --resume did not complete (exit " + std::to_string(final_code) + ")");

  // 3. The comparison.
  const std::string killed = read_all(killed_csv);
  const std::vector<std::string> killed_lines = complete_lines(killed);
  std::multiset<std::string> killed_multiset(killed_lines.begin(), killed_lines.end());
  std::size_t lost = 0, duplicated = 0, foreign = 0;
  for (const std::string& line : reference_set) lost += killed_multiset.count(line) == 0;
  for (const std::string& line : reference_set) {
    duplicated += killed_multiset.count(line) > 1 ? killed_multiset.count(line) - 1 : 0;
  }
  for (const std::string& line : killed_multiset) foreign += reference_set.count(line) == 0;
  const bool torn = !killed.empty() && killed.back() != '\n';
  check(lost == 0, std::to_string(lost) + " rows lost");
  check(duplicated == 0, std::to_string(duplicated) + " rows duplicated");
  check(foreign == 0, std::to_string(foreign) + " rows that the uninterrupted run does not have");
  check(!torn, "the final CSV ends in a torn line");
  check(killed == reference, "the final CSV differs from the uninterrupted run's (order or bytes)");
  try {
    const Sidecar sidecar = read_sidecar(sidecar_path_for(killed_csv));
    const Sidecar reference_sidecar = read_sidecar(sidecar_path_for(reference_csv));
    check(sidecar.state == "complete", "final sidecar state is " + sidecar.state);
    check(sidecar.counts.ok == reference_sidecar.counts.ok &&
              sidecar.counts.failed == reference_sidecar.counts.failed,
          "final sidecar counts differ from the reference's");
    // A kill before a run's first sidecar write leaves no trace of that run.
    check(sidecar.runs >= 2 && sidecar.runs <= launches_into_file,
          "sidecar runs is " + std::to_string(sidecar.runs) + " after " +
              std::to_string(launches_into_file) + " launches into the file");
  } catch (const std::exception& error) {
    check(false, std::string("final sidecar: ") + error.what());
  }
  // A kill inside a sidecar write leaves its temp file; the next run (holding the CSV's
  // lock) removes it, so none may survive the final run.
  g_totals.kills += kills;
  g_totals.torn += torn_injected;
  g_totals.rows += long(killed_lines.size()) - 1;
  g_totals.lost += long(lost);
  g_totals.duplicated += long(duplicated);
  g_totals.foreign += long(foreign);
  std::size_t stale_temps = 0;
  for (const auto& entry : fs::directory_iterator(o.work)) {
    stale_temps += entry.path().filename().string().rfind("killed.json.tmp.", 0) == 0;
  }
  check(stale_temps == 0, std::to_string(stale_temps) + " stale sidecar temp files left");

  std::cout << "kill/resume: " << kills << " kills (SIGKILL) into the final CSV, "
            << launches_into_file << " launches into it, " << torn_injected
            << " torn tails injected and repaired; " << total_kills << " kills and " << launches
            << " launches in all (" << finished_early
            << " runs completed before their kill and restarted the file)\n"
            << "kill/resume: rows on disk after each kill:";
  for (std::size_t rows : rows_after_kill) std::cout << ' ' << rows;
  std::cout << "\n"
            << "kill/resume: final CSV " << killed_lines.size() - 1 << " rows vs "
            << reference_rows << " uninterrupted: " << lost << " lost, " << duplicated
            << " duplicated, " << foreign << " foreign, torn " << (torn ? "yes" : "no") << ", "
            << (killed == reference ? "byte-identical" : "DIFFERENT") << "\n"
            << "kill/resume: " << stale_temps << " stale sidecar temp files at the end\n";
  if (g_failures > failures_at_start) {
    std::cout << "kill/resume: FAILED (" << g_failures - failures_at_start << " checks; seed "
              << seed << ")\n";
    return 1;
  }
  std::cout << "kill/resume: PASSED\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    if (o.child) return run_child(o);
    const std::string self = fs::canonical("/proc/self/exe").string();
    const unsigned long long seed = o.seed_given ? o.seed : std::random_device{}();
    int failed_rounds = 0;
    for (int round = 0; round < o.rounds; ++round) {
      const int failures_before = g_failures;
      if (run_driver(o, self, seed + round) != 0 || g_failures != failures_before) ++failed_rounds;
    }
    if (o.rounds > 1) {
      std::cout << "kill/resume totals: " << o.rounds << " rounds (" << failed_rounds << " failed), "
                << g_totals.kills << " kills, " << g_totals.torn << " torn tails repaired, "
                << g_totals.rows << " final rows: " << g_totals.lost << " lost, "
                << g_totals.duplicated << " duplicated, " << g_totals.foreign << " foreign\n";
    }
    return failed_rounds == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::cerr << "splitkv_kill_resume: " << error.what() << "\n";
    return 1;
  }
}
