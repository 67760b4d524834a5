// The results CSV (schema: tuner/CSV_SCHEMA.md): one row per timed configuration, appended
// and made durable as soon as it is measured, so a crash or kill loses at most the point
// in flight and a resumed sweep picks up exactly where the file ends.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "splitkv/tuner/point_status.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::tuner {

inline constexpr std::array<std::string_view, 24> kResultsCsvColumns = {
    "gpu",            "kernel",         "layout",       "page_size",     "dtype",
    "batch",          "num_heads",      "num_kv_heads", "head_dim",      "context_len",
    "cache_capacity", "length_distribution", "num_splits", "time_us_median", "time_us_p10",
    "time_us_p90",    "cv",             "repetitions",  "kv_bytes",      "tbps",
    "status",         "message",        "gpu_index",    "gpu_uuid"};
// The columns every file has; the device columns after them (gpu_index, gpu_uuid) came
// later, and a file without them reads as rows whose device is unknown.
inline constexpr std::size_t kRequiredResultsCsvColumns = 22;

// Messages: "<file>:<line>:<column>: <reason>" (column counts characters from 1).
class CsvError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ResultRow {
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

  std::string gpu;
  std::string kernel;
  SweepPoint point;
  double time_us_median = kMissing;  // missing (empty in the file) unless status is ok
  double time_us_p10 = kMissing;
  double time_us_p90 = kMissing;
  double cv = kMissing;
  int repetitions = 0;
  std::int64_t kv_bytes = 0;
  double tbps = kMissing;  // kv_bytes / median: the achieved KV read bandwidth, TB/s
  PointStatus status = PointStatus::ok;
  std::string message;
  int gpu_index = -1;    // the GPU's index on its machine; -1 (empty in the file) when unknown
  std::string gpu_uuid;  // e.g. "GPU-5b1a...": which card of the model measured the row
};

// Resume identity of a row: the kernel plus the point key. The gpu is not part of it: one
// file holds one GPU's results and the runner refuses to mix them.
std::string resume_key(std::string_view kernel, const SweepPoint& point);
inline std::string resume_key(const ResultRow& row) { return resume_key(row.kernel, row.point); }

// tbps from bytes and a median in microseconds; missing when the median is.
double achieved_tbps(std::int64_t kv_bytes, double time_us_median);

// with_device_columns = false: the layout of a file written before gpu_index and gpu_uuid,
// which a resume keeps so that every line of the file has the same fields.
std::string format_results_header(bool with_device_columns = true);  // ends in '\n'
std::string format_results_row(const ResultRow& row, bool with_device_columns = true);  // one line, ends in '\n'

// A trailing line without its newline: the write a crash interrupted.
struct TornTail {
  int line = 0;                 // 1-based line where it starts
  std::int64_t offset = 0;      // byte offset where it starts (the length to truncate to)
  std::string text;             // its bytes, for the report
};

struct ResultsCsv {
  std::vector<ResultRow> rows;
  std::vector<int> row_lines;   // line of each row, for messages further down the pipeline
  std::optional<TornTail> torn;
  bool device_columns = true;   // the header has gpu_index and gpu_uuid (true for a file with no header yet)
};

// Parses a whole results file. An empty text is an empty file (no header yet). A header
// may leave out both device columns (gpu_index, gpu_uuid), not just one. Missing or unknown
// columns, a wrong field count, bad numbers, unknown statuses, bytes that are not UTF-8 and
// a byte-order mark throw CsvError; a torn last line is dropped and reported instead,
// because that is what a kill leaves.
ResultsCsv parse_results_csv(std::string_view text, const std::string& source);
ResultsCsv read_results_csv(const std::string& path);  // a missing file reads as empty

// Rules across rows, which each row on its own cannot break: one file holds one GPU, and
// at most one final row (any status but throttled) per point, since a resume never times
// a finished point again; a second one means two sweeps were mixed into one file. Throws
// CsvError naming "<source>:<line>:1" of the offending row.
void check_results_consistency(const ResultsCsv& contents, const std::string& source);

enum class Durability {
  fsync_each_row,  // survives power loss and OS crashes, not just a killed process
  write_only,      // the page cache alone: survives kill -9 but not a machine crash
};

// Appends rows to a results CSV, writing the header only into a new or empty file. Holds
// an exclusive lock so two sweeps cannot interleave rows in one file. Rows appended to a
// file whose header lacks the device columns are written without them.
class ResultsCsvWriter {
 public:
  explicit ResultsCsvWriter(const std::string& path,
                            Durability durability = Durability::fsync_each_row);
  ~ResultsCsvWriter();
  ResultsCsvWriter(const ResultsCsvWriter&) = delete;
  ResultsCsvWriter& operator=(const ResultsCsvWriter&) = delete;

  // One write() of the whole line, then fdatasync: a row is either fully there or, at
  // worst, a torn tail that the next resume truncates.
  void append(const ResultRow& row);
  const std::string& path() const { return path_; }

 private:
  void write_all(const std::string& bytes);

  std::string path_;
  Durability durability_;
  int fd_ = -1;
  bool device_columns_ = true;
};

struct ResumeState {
  // Points a resumed sweep must not time again, by resume_key: rows with a terminal status
  // (ok and the final failures); throttled rows are measured again.
  std::unordered_map<std::string, ResultRow> finished;
  std::int64_t rows_read = 0;
  std::set<std::string> gpus;             // gpu column values seen
  std::optional<TornTail> truncated_tail; // what was cut off the end, if anything
};

// The finished points of already-read contents, touching no file (what --dry-run reports).
ResumeState resume_state_from(const ResultsCsv& contents);

// Reads an existing results file for --resume and cuts a torn last line off it, so the
// next append starts on a clean line. A missing file is a fresh start.
ResumeState load_resume_state(const std::string& path);

// True when `path` holds measured data: at least one row or a torn line. A sweep without
// --resume refuses such a file rather than appending to (or clobbering) measurements.
bool has_measured_data(const ResultsCsv& contents);

}  // namespace splitkv::tuner
