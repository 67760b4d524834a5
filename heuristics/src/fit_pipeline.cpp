#include "splitkv/heuristics/fit_pipeline.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/heuristics/policy_set.hpp"
#include "splitkv/tuner/sidecar.hpp"

namespace splitkv::heuristics {
namespace {

// A policy that asks `lookup` about a shape's batch x kv_heads and its length on `axis`.
Policy lookup_policy(std::string name, std::string description, SplitLookup lookup, LengthAxis axis) {
  return {std::move(name), std::move(description), false, [lookup, axis](const MeasuredShape& s) {
            const auto& p = s.point;
            const int splits = lookup(p.batch, p.num_kv_heads, p.head_dim, table_tokens(s, axis),
                                      p.layout == KvLayout::paged ? p.page_size : 0);
            return PolicyPick{splits, splits};
          }};
}

std::vector<Policy> given_table_policies(const GivenTable& table) {
  return {lookup_policy("ours", fmt::format("given table ({}) on batch x kv_heads and the real length", table.source),
                        table.real_length, LengthAxis::real_length),
          lookup_policy("ours_capacity_only",
                        fmt::format("given table ({}) on batch x kv_heads and the capacity", table.source),
                        table.capacity_only, LengthAxis::capacity)};
}

// Against the real-length table `ours` is, the question a caller with that table asks: is the
// 16-bit table good enough on this cache, or does it need its own?
std::vector<Policy> reused_table_policies(const FitRequest& request) {
  if (!request.reused_table) return {};
  const GivenTable& t = *request.reused_table;
  return {lookup_policy("reused_16bit_table",
                        fmt::format("the 16-bit KV cache's table ({}) unchanged, on batch x kv_heads and the real length",
                                    t.source),
                        t.real_length, LengthAxis::real_length)};
}

void check_table_gpu(const FitRequest& request, const GivenTable& t, const char* flag, const Measurements& training) {
  if (request.allow_other_gpu || (t.gpu_name == training.gpu && t.sm_count == training.sm_count)) return;
  throw InputError(fmt::format("{} {}: made for \"{}\" ({} SMs), but {} was measured on \"{}\" ({} SMs); "
                               "pass --allow-other-gpu to evaluate it there anyway",
                               flag, t.source, t.gpu_name, t.sm_count, request.results_csv, training.gpu,
                               training.sm_count));
}

// `table`: request.table as given_table_for_rows picked it for the training rows.
void check_given_tables(const FitRequest& request, const std::optional<GivenTable>& table,
                        const Measurements& training) {
  if (table) {
    check_table_gpu(request, *table, "--table", training);
    if (table->kv_dtype != training.kv_dtype) {
      throw InputError(fmt::format("--table {}: made for the {} KV cache, but the rows of {} evaluated are {}; score it "
                                   "on rows of its class (--kv-dtype {}), or a 16-bit table on other rows with "
                                   "--reuse-table",
                                   table->source, to_string(table->kv_dtype), request.results_csv,
                                   to_string(training.kv_dtype), to_string(table->kv_dtype)));
    }
  }
  if (request.reused_table) {
    const GivenTable& t = *request.reused_table;
    if (training.kv_dtype == KvDtypeClass::sixteen_bit) {
      throw InputError(fmt::format("--reuse-table {}: scores a 16-bit table on the rows of another KV cache, but the "
                                   "rows of {} evaluated are 16bit already (--kv-dtype fp8_e4m3 picks fp8 rows; "
                                   "--table scores a table on its own class)",
                                   t.source, request.results_csv));
    }
    if (t.kv_dtype != KvDtypeClass::sixteen_bit) {
      throw InputError(fmt::format("--reuse-table {}: made for the {} KV cache, not a 16-bit one (a header without "
                                   "kKvDtype, e.g. heuristics/generated/num_splits_h200.hpp)",
                                   t.source, to_string(t.kv_dtype)));
    }
    check_table_gpu(request, t, "--reuse-table", training);
  }
}

}  // namespace

FitProducts run_fit(const FitRequest& request) {
  FitProducts out;
  LoadOptions load;
  load.kernel = request.kernel;
  load.kv_dtype = request.kv_dtype;
  load.sm_count = request.num_sms;
  out.training = load_measurements(request.results_csv, load);
  if (!request.more_results_csvs.empty()) {
    std::vector<Measurements> parts;
    parts.push_back(std::move(out.training));
    LoadOptions more = load;
    more.kernel = parts.front().kernel;  // every part trains the same kernel and cache
    more.kv_dtype = parts.front().kv_dtype;
    for (const std::string& path : request.more_results_csvs) parts.push_back(load_measurements(path, more));
    out.training = merge_measurements(std::move(parts));
  }

  if (!request.validation_csv.empty()) {
    LoadOptions validation_load = load;
    validation_load.kernel = out.training.kernel;
    validation_load.kv_dtype = out.training.kv_dtype;
    validation_load.sm_count = out.training.sm_count;  // the same GPU, so the same SMs
    out.validation = load_measurements(request.validation_csv, validation_load);
    if (out.validation.gpu != out.training.gpu) {
      throw InputError(fmt::format("{}: gpu \"{}\" differs from \"{}\" in {}; validate on the GPU the table was fitted on",
                                   request.validation_csv, out.validation.gpu, out.training.gpu,
                                   request.results_csv));
    }
  }

  const std::string gpu_short =
      request.gpu_short_name.empty() ? short_gpu_name(out.training.gpu) : request.gpu_short_name;
  check_short_name(gpu_short);
  out.short_name = table_short_name(out.training.kernel, gpu_short, out.training.kv_dtype);
  std::optional<GivenTable> table;
  if (request.table) table = given_table_for_rows(*request.table, out.training.kv_dtype);
  check_given_tables(request, table, out.training);
  FitOptions options = request.options;
  if (options.sm_count == 0) options.sm_count = out.training.sm_count;  // waves are counted on the measured GPU
  if (const PeerKernel* peer = find_peer_kernel(out.training.kernel)) {
    options.occupancy = peer->occupancy;
  } else if (out.training.kv_dtype == KvDtypeClass::fp8_e4m3) {
    options.occupancy = kFp8KernelOccupancy;  // a smaller ring: more resident CTAs, other waves
  }
  if (!table) out.fit = fit_heuristic(out.training.shapes, options);

  if (!request.header_path.empty()) {
    out.header_path = request.header_path == "default" ? default_header_path(out.short_name) : request.header_path;
    out.header_text = emit_num_splits_header(
        out.fit, provenance_of(out.training, out.short_name, out.header_path, tuner::tool_version()));
  }

  const int sms = out.training.sm_count;
  const std::string& kernel = out.training.kernel;
  const auto policies = [&] {
    std::vector<Policy> tables = table ? given_table_policies(*table) : table_policies(out.fit);
    for (Policy& p : reused_table_policies(request)) tables.push_back(std::move(p));
    return all_policies(std::move(tables), sms, kernel);
  };
  out.evaluations.push_back(evaluate_policies("in_sample", out.training.shapes, policies()));
  if (request.cross_validate && !table) {
    for (const CrossValidationScheme& scheme : default_cross_validation_schemes()) {
      if (auto e = cross_validate(out.training.shapes, scheme, sms, options, reused_table_policies(request))) {
        out.evaluations.push_back(std::move(*e));
      }
    }
  }
  if (!out.validation.shapes.empty()) {
    out.evaluations.push_back(evaluate_policies("validation", out.validation.shapes, policies()));
  }
  for (const Evaluation& e : out.evaluations) {
    for (RegretSummaryRow& row : summarize(e, report_subsets(kernel))) out.summary.push_back(std::move(row));
  }

  out.context.gpu = out.training.gpu;
  out.context.sm_count = sms;
  out.context.kernel = out.training.kernel;
  out.context.kv_dtype = out.training.kv_dtype;
  out.context.training_input = out.training.source_display;
  out.context.training_sha256 = out.training.sha256;
  if (!out.validation.source.empty()) {
    out.context.validation_input = out.validation.source_display;
    out.context.validation_sha256 = out.validation.sha256;
  }
  return out;
}

std::map<std::string, std::string> report_files(const FitProducts& p, const std::string& regret_csv_path,
                                                bool with_fit_notes) {
  namespace fs = std::filesystem;
  const fs::path summary(regret_csv_path);
  const fs::path folder = summary.parent_path();
  const std::string stem = summary.stem().string();
  std::map<std::string, std::string> files;
  files[summary.string()] = regret_summary_csv(p.summary, find_peer_kernel(p.context.kernel) != nullptr);
  files[(folder / (stem + "_points.csv")).string()] = regret_points_csv(p.evaluations);
  files[(folder / (stem + ".md")).string()] = regret_markdown(p.evaluations, p.summary, p.context);
  if (with_fit_notes) files[(folder / "fit.md").string()] = fit_markdown(p.fit, p.training);
  return files;
}

std::string console_summary(const FitProducts& p) {
  const PeerKernel* peer = find_peer_kernel(p.context.kernel);
  // Beside ours in the capacity subsets: FA2 from the capacity, and a peer's own rule.
  const auto shown = [peer](const std::string& policy) {
    if (policy == "ours" || policy == "ours_capacity_only" || policy == "fa2_capacity" ||
        policy == "reused_16bit_table")
      return true;
    if (peer == nullptr) return false;
    for (const PolicyKernel& k : peer->policy_kernels) {
      if (k.name == policy) return true;
    }
    return false;
  };
  std::string out;
  const auto subset_lines = [&](const std::string& dataset, const std::string& subset, const char* heading,
                                bool every_policy) {
    bool header = false;
    for (const RegretSummaryRow& r : p.summary) {
      if (r.dataset != dataset || r.subset != subset || !(every_policy || shown(r.policy))) continue;
      if (!header && heading != nullptr) out += heading;
      header = true;
      out += fmt::format("  {:<22} {:>7} {:>8.4f} {:>8.4f} {:>8.4f} {:>9.1f}%\n", r.policy, r.stats.shapes,
                         r.stats.geomean, r.stats.p95, r.stats.max, 100.0 * r.stats.within_5pct);
    }
  };
  for (const Evaluation& e : p.evaluations) {
    out += fmt::format("\n{} ({} shapes): regret = policy time / fastest measured time\n", e.dataset, e.shapes.size());
    out += fmt::format("  {:<22} {:>7} {:>8} {:>8} {:>8} {:>10}\n", "policy", "shapes", "geomean", "p95", "max",
                       "within 5%");
    subset_lines(e.dataset, "all", nullptr, true);
    // The capacity scenario, stated beside ours.
    subset_lines(e.dataset, "capacity_gt_length", "  capacity > real length:\n", false);
    if (peer == nullptr) continue;
    const std::string slice = capacity_scenario_subset().name;
    subset_lines(e.dataset, slice, "  capacity 131072, fixed lengths 1024-32768:\n", false);
    for (const RegretSummaryRow& r : p.summary) {
      if (r.dataset == e.dataset && r.subset == slice && r.policy == peer->headline_policy && r.stats.ours_speedup > 0) {
        out += fmt::format("  ours is {:.4f}x faster than {} there (geomean over {} shapes of its time / ours)\n",
                           r.stats.ours_speedup, r.policy, r.stats.shapes);
      }
    }
  }
  return out;
}

}  // namespace splitkv::heuristics
