// The JSON sidecar next to a results CSV: where, when, with what and how a sweep measured
// it. A CSV without it cannot be trusted or compared, so it is written before the first
// row and rewritten at the end, each time atomically (temp file, fsync, rename).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "splitkv/tuner/device_facts.hpp"
#include "splitkv/tuner/grid_spec.hpp"

namespace splitkv::tuner {

class SidecarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kSidecarSchema = "splitkv-sweep-sidecar/1";

struct SweepCounts {
  std::int64_t planned = 0;         // points in this shard after pruning (x kernels)
  std::int64_t ok = 0;              // rows with status ok in the CSV
  std::int64_t failed = 0;          // rows with any other status
  std::int64_t pruned = 0;          // grid points dropped before timing
  std::map<std::string, std::int64_t> pruned_by_reason;
  std::int64_t search_skipped = 0;  // left untimed by --search pruned
};

struct Sidecar {
  std::string tool_version;
  std::string git_sha;
  std::string results_csv;        // the CSV it describes, as given to the sweep
  std::string grid_path;
  std::string grid_sha256;        // of the grid file's bytes
  std::string grid_name;
  // The grid's length files: name -> {path, sha256}; written only when there are any.
  std::map<std::string, std::pair<std::string, std::string>> length_files;
  std::vector<std::string> kernels;
  std::string search = "exhaustive";
  std::string shard = "0/1";
  std::string shard_by = "index";  // how shapes were dealt to shards (index | cost)
  double memory_budget_gb = 0;
  MeasurementProtocol protocol;
  DeviceFacts device;
  // A merge of shards measured on several GPUs of one model: each of them, once; empty otherwise.
  std::vector<DeviceFacts> devices;
  std::string started_at;         // ISO-8601 UTC of the first run into this CSV
  std::string finished_at;        // empty while a run is in progress
  std::string state = "running";  // running | complete | interrupted | aborted
  std::string message;            // why a run stopped early
  int runs = 1;                   // sweep invocations into this CSV (each resume adds one)
  SweepCounts counts;
};

// "results/h200/quick.csv" -> "results/h200/quick.json"; a path not ending in .csv gets
// ".json" appended.
std::string sidecar_path_for(const std::string& csv_path);

nlohmann::json sidecar_to_json(const Sidecar& sidecar);
Sidecar sidecar_from_json(const nlohmann::json& document, const std::string& source);

void write_sidecar(const std::string& sidecar_path, const Sidecar& sidecar);
Sidecar read_sidecar(const std::string& sidecar_path);

std::string iso8601_utc(std::chrono::system_clock::time_point time);

// HEAD of the repository at repo_dir, with "-dirty" when tracked files differ from it;
// $SPLITKV_GIT_SHA wins when set (for copies of the tree without .git); "unknown" when
// neither works.
std::string git_head_sha(const std::string& repo_dir);

// The tree this binary was built from; git_head_sha() looks here by default.
std::string source_dir();
std::string tool_version();

}  // namespace splitkv::tuner
