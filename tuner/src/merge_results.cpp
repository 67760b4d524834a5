#include "splitkv/tuner/merge_results.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "splitkv/tuner/atomic_file.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_plan.hpp"

namespace splitkv::tuner {
namespace {

// Every field of the sidecar that must agree for rows of two shards to be comparable.
void require_same(const std::string& what, const std::string& first, const std::string& other,
                  const std::string& first_path, const std::string& other_path) {
  if (first != other)
    throw MergeError(fmt::format("{}: {} is \"{}\" but {} has \"{}\"; refusing to merge shards of different sweeps",
                                 other_path, what, other, first_path, first));
}

ShardSpec shard_of(const Sidecar& sidecar, const std::string& path) {
  try {
    return parse_shard(sidecar.shard);
  } catch (const ShardError& error) {
    throw MergeError(fmt::format("{}: its sidecar's shard \"{}\" is not i/N: {}", path, sidecar.shard, error.what()));
  }
}

std::string protocol_text(const MeasurementProtocol& p) {
  return fmt::format("{} repetitions, {} warm-up replays, {} s min time, {} x L2", p.repetitions, p.warmup_replays,
                     p.min_time_s, p.min_working_set_l2_multiple);
}

}  // namespace

MergeSummary merge_results(const std::vector<std::string>& input_csvs, const std::string& out_csv) {
  if (input_csvs.empty()) throw MergeError("merge: no input CSVs given");
  for (const std::string& input : input_csvs) {
    std::error_code ignored;
    if (std::filesystem::equivalent(input, out_csv, ignored))
      throw MergeError(fmt::format("{}: the output is also an input; write the merge to a new file", out_csv));
  }
  std::vector<Sidecar> sidecars;
  std::vector<ResultsCsv> contents;
  for (const std::string& input : input_csvs) {
    if (!std::filesystem::is_regular_file(input)) throw MergeError(fmt::format("{}: no such file", input));
    const std::string sidecar_path = sidecar_path_for(input);
    if (!std::filesystem::is_regular_file(sidecar_path))
      throw MergeError(fmt::format("{}: its sidecar {} is missing; a shard without one cannot be checked",
                                   input, sidecar_path));
    sidecars.push_back(read_sidecar(sidecar_path));
    contents.push_back(read_results_csv(input));
    if (contents.back().torn)
      throw MergeError(fmt::format("{}:{}: its last line is torn (an interrupted sweep); finish it with "
                                   "`splitkv sweep ... --resume` first", input, contents.back().torn->line));
    check_results_consistency(contents.back(), input);
  }

  const Sidecar& first = sidecars.front();
  std::set<std::string> shards_seen;
  const ShardSpec first_shard = shard_of(first, input_csvs.front());
  for (std::size_t i = 0; i < sidecars.size(); ++i) {
    const Sidecar& s = sidecars[i];
    const std::string& path = input_csvs[i];
    require_same("GPU", first.device.name, s.device.name, input_csvs.front(), path);
    require_same("grid sha256", first.grid_sha256, s.grid_sha256, input_csvs.front(), path);
    require_same("protocol", protocol_text(first.protocol), protocol_text(s.protocol), input_csvs.front(), path);
    require_same("search", first.search, s.search, input_csvs.front(), path);
    require_same("shard_by", first.shard_by, s.shard_by, input_csvs.front(), path);
    require_same("kernels", fmt::format("{}", fmt::join(first.kernels, ",")),
                 fmt::format("{}", fmt::join(s.kernels, ",")), input_csvs.front(), path);
    const ShardSpec shard = shard_of(s, path);
    if (shard.count != first_shard.count)
      throw MergeError(fmt::format("{}: shard {} does not belong to a split into {} shards like {}", path, s.shard,
                                   first_shard.count, input_csvs.front()));
    if (!shards_seen.insert(s.shard).second)
      throw MergeError(fmt::format("{}: shard {} is given twice", path, s.shard));
    for (const ResultRow& row : contents[i].rows)
      if (row.gpu != first.device.name)
        throw MergeError(fmt::format("{}: a row was measured on \"{}\", not \"{}\"", path, row.gpu, first.device.name));
  }

  // One final row per point across all shards: two would mean overlapping shards.
  std::map<std::string, std::string> owner;
  std::string merged = format_results_header();
  MergeSummary summary;
  Sidecar out = first;
  out.results_csv = out_csv;
  out.counts = SweepCounts{};
  out.counts.pruned = first.counts.pruned;
  out.counts.pruned_by_reason = first.counts.pruned_by_reason;
  out.runs = 0;
  out.state = "complete";
  out.message.clear();
  out.devices.clear();
  std::set<std::string> devices_seen;  // by UUID (index and name where a sidecar has none)
  for (std::size_t i = 0; i < contents.size(); ++i) {
    const Sidecar& s = sidecars[i];
    for (const DeviceFacts& device : s.devices.empty() ? std::vector<DeviceFacts>{s.device} : s.devices) {
      const std::string identity = device.uuid.empty() ? fmt::format("{} {}", device.index, device.name) : device.uuid;
      if (devices_seen.insert(identity).second) out.devices.push_back(device);
    }
    out.runs += s.runs;
    out.counts.planned += s.counts.planned;
    out.counts.search_skipped += s.counts.search_skipped;
    out.started_at = std::min(out.started_at, s.started_at);
    out.finished_at = std::max(out.finished_at, s.finished_at);
    if (s.state != "complete") {
      out.state = s.state;
      out.message = fmt::format("{} is {}: {}", input_csvs[i], s.state, s.message);
    }
    for (std::size_t r = 0; r < contents[i].rows.size(); ++r) {
      const ResultRow& row = contents[i].rows[r];
      if (row.status == PointStatus::throttled) continue;  // never final; a resume re-times it
      const auto [it, inserted] = owner.emplace(resume_key(row), input_csvs[i]);
      if (!inserted)
        throw MergeError(fmt::format("{}:{}: point {} is also in {}; shards overlap", input_csvs[i],
                                     contents[i].row_lines[r], row.point.key(), it->second));
      (row.status == PointStatus::ok ? out.counts.ok : out.counts.failed) += 1;
      merged += format_results_row(row);
      ++summary.rows;
    }
  }
  for (int i = 0; i < first_shard.count; ++i) {
    const std::string spec = ShardSpec{i, first_shard.count}.to_string();
    if (!shards_seen.count(spec)) summary.missing_shards.push_back(spec);
  }
  out.shard = summary.missing_shards.empty()
                  ? "0/1"
                  : fmt::format("merged {} of {}", shards_seen.size(), first_shard.count);
  if (out.devices.size() < 2) out.devices.clear();
  summary.shards = static_cast<int>(shards_seen.size());
  write_file_atomically(out_csv, merged);
  write_sidecar(sidecar_path_for(out_csv), out);
  return summary;
}

}  // namespace splitkv::tuner
