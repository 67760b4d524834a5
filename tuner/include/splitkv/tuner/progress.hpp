// How far a long computation is (the folds of a cross-validation take minutes), reported to a
// process-wide sink. The command line installs one that prints to stderr; library callers
// and tests install none and see nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace splitkv::tuner {

// `done` of `total` steps (each one `step`, e.g. "fold") of `task` are finished; called with
// done = 0 as the task starts. Calls may come from several threads, one at a time.
using ProgressSink =
    std::function<void(std::string_view task, std::string_view step, std::size_t done, std::size_t total)>;

inline ProgressSink& progress_sink() {
  static ProgressSink sink;
  return sink;
}

inline void report_progress(std::string_view task, std::string_view step, std::size_t done, std::size_t total) {
  if (const ProgressSink& sink = progress_sink()) sink(task, step, done, total);
}

}  // namespace splitkv::tuner
