#include "splitkv/heuristics/measurements.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"

namespace splitkv::heuristics {
namespace {

namespace fs = std::filesystem;
using tuner::PointStatus;
using tuner::ResultRow;

auto shape_fields(const tuner::SweepPoint& p) {
  return std::make_tuple(int(p.layout), p.page_size, int(p.dtype), int(p.kv_dtype), p.head_dim, p.num_heads,
                         p.num_kv_heads, p.batch, p.context_len, p.cache_capacity,
                         tuner::to_string(p.length_distribution));
}

std::string read_bytes(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) throw InputError(fmt::format("{}: cannot open: no such file", path));
  if (fs::is_directory(path, error)) throw InputError(fmt::format("{}: is a folder, not a results CSV", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The kernel to fit: the requested one, else the only one, else "splitkv" (ours).
std::string pick_kernel(const std::set<std::string>& kernels, const std::string& requested,
                        const std::string& source) {
  const auto list = [&] {
    std::string text;
    for (const auto& k : kernels) text += (text.empty() ? "" : ", ") + k;
    return text;
  };
  if (!requested.empty()) {
    if (!kernels.count(requested)) {
      throw InputError(fmt::format("{}: no ok rows of kernel \"{}\" (kernels with ok rows: {})",
                                   source, requested, list()));
    }
    return requested;
  }
  if (kernels.size() == 1) return *kernels.begin();
  if (kernels.count("splitkv")) return "splitkv";
  throw InputError(fmt::format("{}: rows of several kernels ({}); choose one with --kernel", source,
                               list()));
}

// How the messages name a class with its row count: what the dtype column holds for it.
std::string describe(KvDtypeClass kv_dtype, std::int64_t rows) {
  return kv_dtype == KvDtypeClass::fp8_e4m3 ? fmt::format("fp8_e4m3 ({} rows)", rows)
                                            : fmt::format("16bit (bf16/fp16, {} rows)", rows);
}

// The class to fit: the requested one, else the only one; two and none requested is refused.
// `ok_rows` counts the kernel's ok rows of each class present.
KvDtypeClass pick_kv_dtype(const std::map<KvDtypeClass, std::int64_t>& ok_rows,
                           const std::optional<KvDtypeClass>& requested, const std::string& kernel,
                           const std::string& source) {
  std::string found;
  for (const auto& [c, n] : ok_rows) found += fmt::format("{}{}", found.empty() ? "" : " and ", describe(c, n));
  if (requested) {
    if (ok_rows.count(*requested)) return *requested;
    throw InputError(fmt::format("{}: no ok rows of kernel {} with KV cache class {} (--kv-dtype {}); its ok rows "
                                 "are {}",
                                 source, kernel, to_string(*requested), to_string(*requested), found));
  }
  if (ok_rows.size() == 1) return ok_rows.begin()->first;
  throw InputError(fmt::format("{}: ok rows of kernel {} for two KV cache classes, {}; a table is fitted for one: "
                               "pass --kv-dtype 16bit or --kv-dtype fp8_e4m3",
                               source, kernel, found));
}

}  // namespace

KvDtypeClass kv_dtype_class_of(const tuner::SweepPoint& point) {
  return point.kv_dtype == KvDtype::fp8_e4m3 ? KvDtypeClass::fp8_e4m3 : KvDtypeClass::sixteen_bit;
}

int MeasuredShape::kv_tiles() const { return ceil_div(point.context_len, kTokensPerTile); }

int MeasuredShape::capacity_tokens() const {
  if (point.layout == KvLayout::paged && point.page_size > 0) {
    return point.block_table_width() * point.page_size;
  }
  return point.cache_capacity;
}

const SplitTiming* MeasuredShape::find(int num_splits) const {
  const auto it = std::lower_bound(
      timings.begin(), timings.end(), num_splits,
      [](const SplitTiming& t, int splits) { return t.num_splits < splits; });
  return it != timings.end() && it->num_splits == num_splits ? &*it : nullptr;
}

bool shape_less(const tuner::SweepPoint& a, const tuner::SweepPoint& b) {
  return shape_fields(a) < shape_fields(b);
}

int known_sm_count(std::string_view gpu_name) {
  // Only cards whose name pins the SM count; MIG slices and cut-down parts report other
  // names or counts and must bring a sidecar or --num-sms.
  static constexpr std::pair<std::string_view, int> kKnown[] = {
      {"NVIDIA H200", 132},
      {"NVIDIA H100 80GB HBM3", 132},
      {"NVIDIA H100 PCIe", 114},
      {"NVIDIA A100-SXM4-80GB", 108},
      {"NVIDIA A100-SXM4-40GB", 108},
  };
  for (const auto& [name, sms] : kKnown) {
    if (name == gpu_name) return sms;
  }
  return 0;
}

std::string display_path(const std::string& path) {
  fs::path p(path);
  if (p.is_absolute()) {
    std::error_code error;
    const fs::path cwd = fs::current_path(error);
    if (!error) {
      const fs::path relative = p.lexically_normal().lexically_relative(cwd);
      if (!relative.empty() && *relative.begin() != "..") p = relative;
    }
  }
  return p.lexically_normal().generic_string();
}

namespace {

// Parse, validate and group; the SM count is left for the callers, which know where to look.
Measurements parse_and_group(std::string_view text, const std::string& source,
                             const LoadOptions& options) {
  tuner::ResultsCsv csv;
  try {
    csv = tuner::parse_results_csv(text, source);
  } catch (const tuner::CsvError& error) {
    throw InputError(error.what());
  }
  // A torn last line is an interrupted sweep: fitting the rows before it would emit a table
  // from part of the grid, so it is refused (as `merge` and a sweep without --resume do).
  if (csv.torn) {
    throw InputError(fmt::format("{}:{}: the last line is torn (no newline: an interrupted sweep); "
                                 "finish it with `splitkv sweep ... --resume` first",
                                 source, csv.torn->line));
  }
  if (csv.rows.empty()) {
    throw InputError(!text.empty()
                         ? fmt::format("{}: holds no complete data rows", source)
                         : fmt::format("{}: is empty (no header, no rows)", source));
  }

  Measurements m;
  m.source = source;
  m.source_display = display_path(source);
  m.part_displays = {m.source_display};
  m.sha256 = tuner::sha256_hex(text);
  m.counts.rows = std::int64_t(csv.rows.size());
  m.gpu = csv.rows.front().gpu;

  // One GPU per file and one final row per point: the tuner's rule, shared with the sweep.
  try {
    tuner::check_results_consistency(csv, source);
  } catch (const tuner::CsvError& error) {
    throw InputError(error.what());
  }
  // A point may also hold throttled rows (a resume times those again): its final row wins,
  // else its last throttled row; the others are superseded.
  std::unordered_map<std::string, std::size_t> row_of_point;
  for (std::size_t i = 0; i < csv.rows.size(); ++i) {
    const ResultRow& row = csv.rows[i];
    const int line = csv.row_lines[i];
    if (row.status == PointStatus::ok) {
      if (!(row.time_us_median > 0) || !std::isfinite(row.time_us_median)) {
        throw InputError(fmt::format("{}:{}: time_us_median {} is not a positive finite time",
                                     source, line, row.time_us_median));
      }
      if (!(row.cv >= 0) || !std::isfinite(row.cv)) {
        throw InputError(fmt::format("{}:{}: cv {} is not a finite number >= 0", source, line, row.cv));
      }
    }
    const auto [it, inserted] = row_of_point.emplace(tuner::resume_key(row), i);
    if (!inserted && (row.status != PointStatus::throttled ||
                      csv.rows[it->second].status == PointStatus::throttled)) {
      it->second = i;
    }
  }
  std::vector<bool> superseded(csv.rows.size(), true);
  for (const auto& [key, i] : row_of_point) superseded[i] = false;

  std::set<std::string> kernels_with_ok;
  for (std::size_t i = 0; i < csv.rows.size(); ++i) {
    if (!superseded[i] && csv.rows[i].status == PointStatus::ok) kernels_with_ok.insert(csv.rows[i].kernel);
  }
  if (kernels_with_ok.empty()) {
    throw InputError(fmt::format("{}: none of its {} rows has status ok; nothing to fit", source,
                                 csv.rows.size()));
  }
  m.kernel = pick_kernel(kernels_with_ok, options.kernel, source);
  std::map<KvDtypeClass, std::int64_t> kv_dtype_ok_rows;
  for (std::size_t i = 0; i < csv.rows.size(); ++i) {
    const ResultRow& row = csv.rows[i];
    if (!superseded[i] && row.status == PointStatus::ok && row.kernel == m.kernel) {
      ++kv_dtype_ok_rows[kv_dtype_class_of(row.point)];
    }
  }
  m.kv_dtype = pick_kv_dtype(kv_dtype_ok_rows, options.kv_dtype, m.kernel, source);
  for (const auto& [c, n] : kv_dtype_ok_rows) m.kv_dtypes_present.push_back(c);
  const PeerKernel* peer = find_peer_kernel(m.kernel);
  const auto is_policy_kernel = [peer](const std::string& kernel) {
    if (peer == nullptr) return false;
    for (const PolicyKernel& p : peer->policy_kernels) {
      if (p.name == kernel) return true;
    }
    return false;
  };

  // Group ok rows of the chosen kernel by shape; keep its policy kernels' ok rows aside.
  std::map<std::string, MeasuredShape> by_shape;
  std::set<std::string> shapes_seen;
  struct PolicyRow {
    std::string kernel;
    double time_us;
    int line;
  };
  std::map<std::string, std::vector<PolicyRow>> policy_rows;  // by shape key
  for (std::size_t i = 0; i < csv.rows.size(); ++i) {
    const ResultRow& row = csv.rows[i];
    if (superseded[i]) {
      ++m.counts.superseded;
      continue;
    }
    if (kv_dtype_class_of(row.point) != m.kv_dtype && (row.kernel == m.kernel || is_policy_kernel(row.kernel))) {
      if (row.status == PointStatus::ok) ++m.counts.other_kv_dtypes;
      continue;
    }
    if (row.kernel != m.kernel) {
      if (row.status != PointStatus::ok) continue;
      if (!is_policy_kernel(row.kernel)) {
        ++m.counts.other_kernels;
        continue;
      }
      tuner::SweepPoint shape = row.point;
      shape.num_splits = 0;
      policy_rows[shape.shape_key()].push_back({row.kernel, row.time_us_median, csv.row_lines[i]});
      continue;
    }
    tuner::SweepPoint shape = row.point;
    shape.num_splits = 0;
    const std::string shape_key = shape.shape_key();
    shapes_seen.insert(shape_key);
    if (row.status != PointStatus::ok) {
      ++m.counts.excluded[std::string(tuner::to_string(row.status))];
      continue;
    }
    ++m.counts.ok;
    MeasuredShape& entry = by_shape[shape_key];
    entry.kernel = row.kernel;
    entry.point = shape;
    const std::int64_t bytes_per_token = 2LL * shape.num_kv_heads * shape.head_dim * shape.kv_element_bytes();
    entry.total_tokens = row.kv_bytes > 0 && bytes_per_token > 0 ? row.kv_bytes / bytes_per_token : shape.total_tokens();
    entry.timings.push_back({row.point.num_splits, row.time_us_median, row.cv, csv.row_lines[i]});
  }
  for (const auto& [key, rows] : policy_rows) {
    const auto shape = by_shape.find(key);
    for (const PolicyRow& r : rows) {
      if (shape == by_shape.end()) {
        ++m.counts.other_kernels;  // no fixed-split time to compare it with
        continue;
      }
      if (!shape->second.policy_time_us.emplace(r.kernel, r.time_us).second) {
        throw InputError(fmt::format("{}:{}: a second ok row of policy kernel {} for shape {}; a policy kernel "
                                     "has one row per shape",
                                     source, r.line, r.kernel, key));
      }
      ++m.counts.policy_rows;
    }
  }
  for (auto& [key, shape] : by_shape) {
    std::sort(shape.timings.begin(), shape.timings.end(),
              [](const SplitTiming& a, const SplitTiming& b) { return a.num_splits < b.num_splits; });
    m.shapes.push_back(std::move(shape));
  }
  std::sort(m.shapes.begin(), m.shapes.end(), [](const MeasuredShape& a, const MeasuredShape& b) {
    return shape_less(a.point, b.point);
  });
  m.counts.shapes = std::int64_t(m.shapes.size());
  m.counts.shapes_without_ok_rows = std::int64_t(shapes_seen.size()) - m.counts.shapes;

  return m;
}

void resolve_sm_count_from_flag(Measurements& m, const LoadOptions& options) {
  if (m.sm_count == 0 && options.sm_count > 0) {
    m.sm_count = options.sm_count;
    m.sm_count_source = "flag";
  }
}

void resolve_sm_count_from_known_list(Measurements& m) {
  if (m.sm_count > 0) return;
  if (const int known = known_sm_count(m.gpu); known > 0) {
    m.sm_count = known;
    m.sm_count_source = "known GPU list";
  }
}

void require_sm_count(const Measurements& m) {
  if (m.sm_count > 0) return;
  throw InputError(fmt::format("{}: cannot tell the SM count of \"{}\": no sidecar with "
                               "device.sm_count and not a known GPU; pass --num-sms",
                               m.source, m.gpu));
}

}  // namespace

Measurements measurements_from_text(std::string_view text, const std::string& source,
                                    const LoadOptions& options) {
  Measurements m = parse_and_group(text, source, options);
  resolve_sm_count_from_flag(m, options);
  resolve_sm_count_from_known_list(m);
  require_sm_count(m);
  return m;
}

Measurements load_measurements(const std::string& path, const LoadOptions& options) {
  const std::string bytes = read_bytes(path);
  // SM count precedence: the flag, then the sidecar, then the known-GPU list.
  Measurements m = parse_and_group(bytes, path, options);
  resolve_sm_count_from_flag(m, options);

  if (options.read_sidecar) {
    const std::string sidecar_path = tuner::sidecar_path_for(path);
    std::error_code error;
    if (fs::exists(sidecar_path, error)) {
      tuner::Sidecar sidecar;
      try {
        sidecar = tuner::read_sidecar(sidecar_path);
      } catch (const std::exception& failure) {
        throw InputError(fmt::format("{}: sidecar of {} is unreadable: {}", sidecar_path, path,
                                     failure.what()));
      }
      if (!sidecar.device.name.empty() && sidecar.device.name != m.gpu) {
        throw InputError(fmt::format("{}: device.name \"{}\" differs from the CSV's gpu \"{}\"",
                                     sidecar_path, sidecar.device.name, m.gpu));
      }
      m.measured_at = !sidecar.finished_at.empty() ? sidecar.finished_at : sidecar.started_at;
      if (m.sm_count == 0 && sidecar.device.sm_count > 0) {
        m.sm_count = sidecar.device.sm_count;
        m.sm_count_source = "sidecar";
      }
    }
  }
  resolve_sm_count_from_known_list(m);
  require_sm_count(m);
  return m;
}

std::string command_line_inputs(const Measurements& measurements) {
  const auto quoted = [](const std::string& path) {
    const bool plain = !path.empty() && path.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                              "0123456789_-+=.,/:@%") == std::string::npos;
    if (plain) return path;
    std::string out = "'";
    for (char c : path) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  std::string out;
  for (const std::string& path : measurements.part_displays) out += (out.empty() ? "" : " ") + quoted(path);
  return out;
}

std::string kv_dtype_argument(const Measurements& m) {
  if (m.kv_dtype == KvDtypeClass::sixteen_bit && m.kv_dtypes_present.size() <= 1) return "";
  return fmt::format(" --kv-dtype {}", to_string(m.kv_dtype));
}

Measurements merge_measurements(std::vector<Measurements> parts) {
  if (parts.empty()) throw std::invalid_argument("merge_measurements: no parts");
  if (parts.size() == 1) return std::move(parts.front());
  Measurements merged;
  const Measurements& first = parts.front();
  merged.gpu = first.gpu;
  merged.kernel = first.kernel;
  merged.kv_dtype = first.kv_dtype;
  std::set<KvDtypeClass> present;
  merged.sm_count = first.sm_count;
  merged.sm_count_source = first.sm_count_source;
  std::map<std::string, std::string> owner;  // shape key -> the file it came from
  std::string digests;
  const auto join = [](std::string& to, const std::string& what) { to += (to.empty() ? "" : " + ") + what; };
  for (Measurements& part : parts) {
    if (part.gpu != first.gpu) {
      throw InputError(fmt::format("{}: gpu \"{}\" differs from \"{}\" in {}; train on one GPU's results",
                                   part.source, part.gpu, first.gpu, first.source));
    }
    if (part.kernel != first.kernel) {
      throw InputError(fmt::format("{}: kernel {} differs from {} in {}; pass --kernel", part.source, part.kernel,
                                   first.kernel, first.source));
    }
    if (part.kv_dtype != first.kv_dtype) {
      throw InputError(fmt::format("{}: KV dtype class {} differs from {} in {}; train one class's table on its "
                                   "rows (--kv-dtype)",
                                   part.source, to_string(part.kv_dtype), to_string(first.kv_dtype), first.source));
    }
    if (part.sm_count != first.sm_count) {
      throw InputError(fmt::format("{}: {} SMs ({}) differ from {} ({}) in {}", part.source, part.sm_count,
                                   part.sm_count_source, first.sm_count, first.sm_count_source, first.source));
    }
    for (MeasuredShape& shape : part.shapes) {
      const auto [it, inserted] = owner.emplace(shape.point.shape_key(), part.source);
      if (!inserted) {
        throw InputError(fmt::format("{}:{}: shape {} is also measured in {}; a shape belongs to one file",
                                     part.source, shape.timings.front().line, shape.point.shape_key(),
                                     it->second));
      }
      merged.shapes.push_back(std::move(shape));
    }
    join(merged.source, part.source);
    join(merged.source_display, part.source_display);
    merged.part_displays.insert(merged.part_displays.end(), part.part_displays.begin(), part.part_displays.end());
    digests += (digests.empty() ? "" : "\n") + part.sha256;
    merged.measured_at = std::max(merged.measured_at, part.measured_at);
    merged.counts.rows += part.counts.rows;
    merged.counts.ok += part.counts.ok;
    for (const auto& [status, n] : part.counts.excluded) merged.counts.excluded[status] += n;
    merged.counts.superseded += part.counts.superseded;
    merged.counts.other_kernels += part.counts.other_kernels;
    merged.counts.other_kv_dtypes += part.counts.other_kv_dtypes;
    present.insert(part.kv_dtypes_present.begin(), part.kv_dtypes_present.end());
    merged.counts.policy_rows += part.counts.policy_rows;
    merged.counts.shapes += part.counts.shapes;
    merged.counts.shapes_without_ok_rows += part.counts.shapes_without_ok_rows;
  }
  merged.sha256 = tuner::sha256_hex(digests);
  merged.kv_dtypes_present.assign(present.begin(), present.end());
  std::sort(merged.shapes.begin(), merged.shapes.end(), [](const MeasuredShape& a, const MeasuredShape& b) {
    return shape_less(a.point, b.point);
  });
  return merged;
}

}  // namespace splitkv::heuristics
