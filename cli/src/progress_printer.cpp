#include "progress_printer.hpp"

#include <ostream>
#include <utility>

#include <fmt/format.h>

#include "splitkv/tuner/progress.hpp"
#include "splitkv/tuner/sweep_runner.hpp"

namespace splitkv::cli {
namespace {

constexpr std::chrono::seconds kInterval{10};

}  // namespace

ProgressPrinter::ProgressPrinter(std::ostream& err, std::string command) : err_(err), command_(std::move(command)) {
  tuner::progress_sink() = [this](std::string_view task, std::string_view step, std::size_t done,
                                  std::size_t total) { print(task, step, done, total); };
}

ProgressPrinter::~ProgressPrinter() { tuner::progress_sink() = nullptr; }

void ProgressPrinter::print(std::string_view task, std::string_view step, std::size_t done, std::size_t total) {
  const Clock::time_point now = Clock::now();
  if (done == 0) {
    task_start_ = last_line_ = now;
    err_ << fmt::format("splitkv {}: {}: {} {}s to run\n", command_, task, total, step);
  } else if (done == total || now - last_line_ >= kInterval) {
    last_line_ = now;
    const double elapsed = std::chrono::duration<double>(now - task_start_).count();
    err_ << fmt::format("splitkv {}: {}: {} {}/{} done, {} elapsed\n", command_, task, step, done, total,
                        tuner::format_duration(elapsed));
  }
  err_.flush();
}

}  // namespace splitkv::cli
