// Shows on stderr what the library reports through splitkv/tuner/progress.hpp, for as long as
// a ProgressPrinter lives: each task's start and end, and in between one line per interval
// at most, so that a minutes-long cross-validation is not silent and not a flood either.
#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>

namespace splitkv::cli {

class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& err, std::string command);
  ~ProgressPrinter();
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  void print(std::string_view task, std::string_view step, std::size_t done, std::size_t total);

  std::ostream& err_;
  std::string command_;
  Clock::time_point task_start_;
  Clock::time_point last_line_;
};

}  // namespace splitkv::cli
