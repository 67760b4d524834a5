// The measured shapes a fit and an evaluation work from: a results CSV (tuner/CSV_SCHEMA.md)
// read, validated and grouped so that every num_splits of one shape sits together. Every
// later step (oracle, policies, table fit, regret) looks at shapes, never at raw rows, so
// the rules about which rows count are decided here, once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/heuristics/kv_dtype_class.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::heuristics {

// Bad input: a message naming the file, the line where there is one, the field and the
// reason. The CLI turns it into exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The class of a row's KV cache (its dtype column): bf16 and fp16 are 16bit, fp8_e4m3 is fp8_e4m3.
KvDtypeClass kv_dtype_class_of(const tuner::SweepPoint& point);

// One timed split count of a shape.
struct SplitTiming {
  int num_splits = 1;
  double time_us = 0;  // median of the repetitions
  double cv = 0;       // their coefficient of variation
  int line = 0;        // where the row is in its file, for messages
};

// A decode shape with every split count the sweep timed successfully.
struct MeasuredShape {
  std::string kernel;
  tuner::SweepPoint point;            // the shape; point.num_splits is meaningless (kept 0)
  std::vector<SplitTiming> timings;   // ascending num_splits, never empty
  // Sum of the real lengths, from the rows' kv_bytes (a file-drawn ragged batch cannot be
  // regenerated without its length file; kv_bytes holds what the sweep read).
  std::int64_t total_tokens = 0;
  // A peer kernel's own choice of split count timed on this shape (peer_kernels.hpp): policy
  // kernel -> its row's median. Empty for our kernel; never fitted, only evaluated.
  std::map<std::string, double> policy_time_us;

  int kv_tiles() const;               // 64-token tiles of the real length
  int capacity_tokens() const;        // what FA's seqlen_k is: capacity, or block-table width x page size
  const SplitTiming* find(int num_splits) const;  // null when not timed
};

// Where the rows of a file went.
struct RowCounts {
  std::int64_t rows = 0;                          // data rows parsed (a torn tail is refused)
  std::int64_t ok = 0;                            // rows the fit uses
  std::map<std::string, std::int64_t> excluded;   // by status: throttled, oom, ...
  std::int64_t superseded = 0;                    // throttled rows a later row re-measured
  std::int64_t other_kernels = 0;                 // ok rows of kernels not selected
  std::int64_t other_kv_dtypes = 0;               // ok rows of the selected kernel, other KV dtype class
  std::int64_t policy_rows = 0;                   // ok rows of the selected peer's policy kernels, on its shapes
  std::int64_t shapes = 0;                        // shapes with at least one ok row
  std::int64_t shapes_without_ok_rows = 0;        // shapes whose every row failed
};

struct Measurements {
  std::string source;            // path as given
  std::string source_display;    // path as recorded in reports: relative, normalised
  std::vector<std::string> part_displays;  // source_display of each CSV merged in, in order
  std::string sha256;            // of the file's bytes
  std::string gpu;               // the gpu column (one per file)
  std::string kernel;            // the kernel the shapes belong to
  KvDtypeClass kv_dtype = KvDtypeClass::sixteen_bit;  // the KV cache class the shapes belong to
  // Every class the selected kernel's ok rows hold (the selected one among them), ascending: more
  // than one means the table's regenerate command must name --kv-dtype.
  std::vector<KvDtypeClass> kv_dtypes_present;
  int sm_count = 0;              // from the sidecar, the --num-sms flag or the known-GPU list
  std::string sm_count_source;   // "sidecar", "flag" or "known GPU list"
  std::string measured_at;       // the sidecar's finished_at (or started_at); empty without one
  std::vector<MeasuredShape> shapes;  // sorted by shape (deterministic order)
  RowCounts counts;
};

struct LoadOptions {
  std::string kernel;  // empty: the only kernel in the file, or "splitkv" when there are several
  // Empty: the only class the kernel's ok rows hold; a file holding two is refused, since pooling
  // them would fit neither cache's split counts.
  std::optional<KvDtypeClass> kv_dtype;
  int sm_count = 0;    // 0: from the sidecar or the known-GPU list
  bool read_sidecar = true;
};

// Reads, validates and groups a results CSV. Throws InputError for: a missing or empty
// file, missing columns and malformed fields (the tuner's parser), more than one GPU or two
// final rows for one point (tuner::check_results_consistency), non-positive or non-finite
// times, a negative cv, an unknown kernel, no ok rows, a KV dtype class without ok rows or two
// classes and none chosen, and an SM count that cannot be told.
// A point's throttled rows give way to its final row (a resume re-measures them). For a peer
// kernel (peer_kernels.hpp) the ok rows of its policy kernels are attached to the shapes its
// fixed-split rows measured (MeasuredShape::policy_time_us); InputError when one policy kernel
// has two ok rows for one shape.
Measurements load_measurements(const std::string& path, const LoadOptions& options = {});

// Several results CSVs of one GPU as one training set: a new grid swept beside full.json's (a grid
// cannot grow under `sweep --resume`) trains the tables with it. The parts must share the GPU, the
// kernel, the KV dtype class and the SM count, and no shape may be measured in two of them (which timing would stand?);
// each refusal is an InputError naming both files. The merged set's source and source_display join
// the parts' with " + ", its sha256 is that of the parts' sha256 hex digests joined by newlines (in
// the order given), its counts add up, and its shapes keep the one deterministic order. One part is
// returned as it is.
Measurements merge_measurements(std::vector<Measurements> parts);

// The same from bytes already in memory (tests, --check); `source` names them in messages.
Measurements measurements_from_text(std::string_view text, const std::string& source,
                                    const LoadOptions& options = {});

// The training CSVs as `splitkv fit` takes them on a command line: part_displays separated by
// spaces, each quoted for a POSIX shell where it needs it (a path may itself hold " + ").
std::string command_line_inputs(const Measurements& measurements);

// What `splitkv fit` needs besides the CSVs to pick these rows' KV dtype class: " --kv-dtype <class>"
// where the default would not (fp8_e4m3, or rows of several classes), else nothing, so the
// regenerate command of a table fitted on a 16-bit-only file stays as it always was.
std::string kv_dtype_argument(const Measurements& measurements);

// SM counts of GPUs we know, for CSVs without a sidecar; 0 when unknown.
int known_sm_count(std::string_view gpu_name);

// "results/h200/./full.csv" -> "results/h200/full.csv"; absolute paths under the working
// directory become relative to it, so the same file gives the same provenance text.
std::string display_path(const std::string& path);

// Ordering of shapes in every report and in the fit: layout, page size, dtype, head_dim,
// heads, batch, real length, capacity.
bool shape_less(const tuner::SweepPoint& a, const tuner::SweepPoint& b);

}  // namespace splitkv::heuristics
