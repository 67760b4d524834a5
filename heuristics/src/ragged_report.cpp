#include "splitkv/heuristics/ragged_report.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace splitkv::heuristics {
namespace {

constexpr double kWithin = 1.05;

std::string number(double value, int digits) { return value > 0 ? fmt::format("{:.{}f}", value, digits) : ""; }

}  // namespace

NumSplitsShape num_splits_shape(const tuner::SweepPoint& point, bool with_max_length) {
  NumSplitsShape shape;
  shape.batch = point.batch;
  shape.num_heads = point.num_heads;
  shape.num_kv_heads = point.num_kv_heads;
  shape.head_dim = point.head_dim;
  shape.max_seqlen = with_max_length ? point.context_len : 0;
  shape.cache_capacity = point.to_decode_params().capacity_tokens();
  shape.page_size = point.layout == KvLayout::paged ? point.page_size : 0;
  return shape;
}

const std::vector<std::string>& device_policy_kernel_names() {
  static const std::vector<std::string> names = {"splitkv_auto", "fa3_dynamic", "flashinfer_plan"};
  return names;
}

std::vector<DeviceTimes> device_times_from_rows(const std::vector<tuner::ResultRow>& rows, const std::string& source) {
  std::vector<DeviceTimes> out;
  for (const std::string& kernel : device_policy_kernel_names()) {
    DeviceTimes times{kernel, {}};
    for (const tuner::ResultRow& row : rows) {
      if (row.kernel != kernel || row.status != tuner::PointStatus::ok) continue;
      if (!(row.time_us_median > 0) || !std::isfinite(row.time_us_median)) {
        throw InputError(fmt::format("{}: kernel {} shape {}: time_us_median {} is not a positive time", source,
                                     kernel, row.point.shape_key(), row.time_us_median));
      }
      times.time_us_by_shape[row.point.shape_key()] = row.time_us_median;
    }
    if (!times.time_us_by_shape.empty()) out.push_back(std::move(times));
  }
  if (out.empty()) {
    throw InputError(fmt::format("{}: no ok rows of the device-policy kernels (splitkv_auto, fa3_dynamic, "
                                 "flashinfer_plan); sweep sweeps/ragged_policies.json with --kernel "
                                 "splitkv_auto,fa3_dynamic,flashinfer_plan",
                                 source));
  }
  return out;
}

std::vector<DeviceTimes> load_device_times(const std::string& path) {
  try {
    const tuner::ResultsCsv csv = tuner::read_results_csv(path);
    if (csv.rows.empty() && !csv.torn) throw InputError(fmt::format("{}: no rows (is the path right?)", path));
    if (csv.torn) throw InputError(fmt::format("{}: the last line is torn; finish or resume the sweep first", path));
    return device_times_from_rows(csv.rows, path);
  } catch (const tuner::CsvError& error) {
    throw InputError(error.what());
  }
}

bool is_capacity_scenario(const tuner::SweepPoint& point) {
  return point.length_distribution.kind == tuner::LengthKind::fixed &&
         point.to_decode_params().capacity_tokens() > point.context_len;
}

std::vector<Policy> ragged_host_policies(const NumSplitsPolicy& ours, int num_sms) {
  std::vector<Policy> policies;
  for (Policy& p : reference_policies(num_sms)) {
    if (p.name == "oracle") policies.push_back(std::move(p));
  }
  policies.push_back({"ours_host_max", "ours on the host: the runtime table at the batch's max length", false,
                      [ours](const MeasuredShape& s) {
                        const int splits = ours(num_splits_shape(s.point, true));
                        return PolicyPick{splits, splits};
                      }});
  policies.push_back({"ours_host_total", "ours on the host knowing the max and the total real length "
                      "(the table asked about the batch of max-length sequences doing the same work)", false,
                      [ours](const MeasuredShape& s) {
                        NumSplitsShape shape = num_splits_shape(s.point, true);
                        shape.total_seqlen = s.total_tokens;
                        const int splits = ours(shape);
                        return PolicyPick{splits, splits};
                      }});
  policies.push_back({"ours_capacity_only", "ours on the host knowing only the capacity", false,
                      [ours](const MeasuredShape& s) {
                        const int splits = ours(num_splits_shape(s.point, false));
                        return PolicyPick{splits, splits};
                      }});
  for (Policy& p : reference_policies(num_sms)) {
    if (p.name == "fa2_capacity") policies.push_back(std::move(p));
  }
  return policies;
}

double RaggedEvaluation::device_regret(std::size_t k, std::size_t i) const {
  const ShapeResult& r = host.shapes.at(i);
  const auto& times = device.at(k).time_us_by_shape;
  const auto it = times.find(r.shape.point.shape_key());
  return it == times.end() || !(r.oracle.fastest_time_us > 0) ? 0 : it->second / r.oracle.fastest_time_us;
}

RaggedEvaluation evaluate_ragged(const std::vector<MeasuredShape>& shapes, const NumSplitsPolicy& ours, int num_sms,
                                 std::vector<DeviceTimes> device) {
  RaggedEvaluation e;
  e.host = evaluate_policies("ragged", shapes, ragged_host_policies(ours, num_sms));
  e.device = std::move(device);
  return e;
}

std::vector<RaggedSummaryRow> ragged_summary(const RaggedEvaluation& e) {
  struct Subset {
    std::string name;
    std::function<bool(const tuner::SweepPoint&)> contains;
  };
  std::vector<Subset> subsets = {
      {"all", [](const tuner::SweepPoint&) { return true; }},
      {"capacity_scenario", is_capacity_scenario},
      {"ragged", [](const tuner::SweepPoint& p) { return p.length_distribution.kind != tuner::LengthKind::fixed; }},
  };
  std::set<std::string> distributions;
  for (const ShapeResult& r : e.host.shapes) {
    if (r.shape.point.length_distribution.kind != tuner::LengthKind::fixed) {
      distributions.insert(tuner::to_string(r.shape.point.length_distribution));
    }
  }
  for (const std::string& name : distributions) {
    subsets.push_back({name, [name](const tuner::SweepPoint& p) { return tuner::to_string(p.length_distribution) == name; }});
  }
  std::vector<RaggedSummaryRow> rows;
  for (const Subset& subset : subsets) {
    for (std::size_t k = 0; k < e.host.policies.size(); ++k) {
      std::vector<double> regrets;
      for (const ShapeResult& r : e.host.shapes) {
        if (subset.contains(r.shape.point)) regrets.push_back(r.outcomes[k].regret);
      }
      if (!regrets.empty()) rows.push_back({subset.name, e.host.policies[k], regret_stats(regrets)});
    }
    for (std::size_t k = 0; k < e.device.size(); ++k) {
      std::vector<double> regrets;
      for (std::size_t i = 0; i < e.host.shapes.size(); ++i) {
        const double regret = e.device_regret(k, i);
        if (regret > 0 && subset.contains(e.host.shapes[i].shape.point)) regrets.push_back(regret);
      }
      if (!regrets.empty()) rows.push_back({subset.name, e.device[k].kernel, regret_stats(regrets)});
    }
  }
  return rows;
}

RaggedAcceptance ragged_acceptance(const RaggedEvaluation& e) {
  RaggedAcceptance a;
  const auto fa2 = std::find(e.host.policies.begin(), e.host.policies.end(), "fa2_capacity");
  const std::size_t fa2_column = std::size_t(fa2 - e.host.policies.begin());
  std::size_t auto_column = e.device.size();
  for (std::size_t k = 0; k < e.device.size(); ++k) {
    if (e.device[k].kernel == "splitkv_auto") auto_column = k;
  }
  int within = 0;
  double worst_fa2 = 0;
  for (std::size_t i = 0; i < e.host.shapes.size(); ++i) {
    const ShapeResult& r = e.host.shapes[i];
    if (!is_capacity_scenario(r.shape.point)) continue;
    const double auto_regret = auto_column < e.device.size() ? e.device_regret(auto_column, i) : 0;
    if (auto_regret > 0) {
      ++a.capacity_shapes;
      within += auto_regret <= kWithin ? 1 : 0;
    }
    if (fa2 != e.host.policies.end() && r.outcomes[fa2_column].regret > worst_fa2) {
      worst_fa2 = r.outcomes[fa2_column].regret;
      a.fa2_worst_shape = r.shape.point.shape_key();
      a.fa2_worst_regret = worst_fa2;
      a.auto_speedup_at_fa2_worst = auto_regret > 0 ? worst_fa2 / auto_regret : 0;
    }
  }
  a.auto_within_5pct = a.capacity_shapes > 0 ? double(within) / a.capacity_shapes : 0;
  return a;
}

std::string ragged_points_csv(const RaggedEvaluation& e) {
  std::string out = "shape,layout,page_size,dtype,batch,num_heads,num_kv_heads,head_dim,context_len,cache_capacity,"
                    "length_distribution,capacity_scenario,oracle_splits,oracle_time_us";
  for (const std::string& p : e.host.policies) {
    if (p != "oracle") out += fmt::format(",{0}_splits,{0}_time_us,{0}_regret", p);
  }
  for (const DeviceTimes& d : e.device) out += fmt::format(",{0}_time_us,{0}_regret", d.kernel);
  out += "\n";
  for (std::size_t i = 0; i < e.host.shapes.size(); ++i) {
    const ShapeResult& r = e.host.shapes[i];
    const tuner::SweepPoint& p = r.shape.point;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f}", p.shape_key(), tuner::to_string(p.layout),
                       p.page_size, tuner::to_string(p.element_types()), p.batch, p.num_heads, p.num_kv_heads, p.head_dim,
                       p.context_len, p.cache_capacity, tuner::to_string(p.length_distribution),
                       is_capacity_scenario(p) ? 1 : 0, r.oracle.fastest_splits, r.oracle.fastest_time_us);
    for (std::size_t k = 0; k < e.host.policies.size(); ++k) {
      if (e.host.policies[k] == "oracle") continue;
      const PolicyOutcome& o = r.outcomes[k];
      out += fmt::format(",{},{:.3f},{:.4f}", o.pick.splits, o.measured.time_us, o.regret);
    }
    for (std::size_t k = 0; k < e.device.size(); ++k) {
      const double regret = e.device_regret(k, i);
      out += fmt::format(",{},{}", number(regret * r.oracle.fastest_time_us, 3), number(regret, 4));
    }
    out += "\n";
  }
  return out;
}

std::string ragged_markdown(const RaggedEvaluation& e, const std::vector<RaggedSummaryRow>& rows,
                            const RaggedAcceptance& a, const std::string& provenance) {
  std::string out = "# Ragged batches and the capacity scenario: device-side split policies\n\n";
  out += provenance;
  out += "\nRegret = time / the fastest single split count of kernel `splitkv` on the same shape (the oracle). "
         "Host policies (`ours_host_max`: our runtime table at the batch's max length; `ours_host_total`: the same "
         "table asked about total length / max length sequences of the max length; `ours_capacity_only`; "
         "`fa2_capacity`: FlashAttention 2's heuristic on the capacity, timed at the splits that overlap the real "
         "length) are timed on splitkv's rows at the count they pick. Device policies (`splitkv_auto`, `fa3_dynamic`, "
         "`flashinfer_plan`) are measured kernels; a per-sequence schedule can beat every single count, so their "
         "regret may be below 1. They come from a sweep of their own, on caches allocated apart from the fixed "
         "counts': on the H200 the same point moved by up to 15% between such sweeps, so for the capacity scenario "
         "`scripts/bench_peers.py --groups capacity_auto` also times `auto` and every fixed count on the same "
         "buffers.\n\n";
  out += "## Acceptance\n\n";
  if (a.capacity_shapes > 0) {
    out += fmt::format("- capacity scenario: `splitkv_auto` within 5% of the best fixed split count on **{:.1f}%** "
                       "of {} shapes\n",
                       100 * a.auto_within_5pct, a.capacity_shapes);
  } else {
    out += "- capacity scenario: `splitkv_auto` not measured on any capacity-scenario shape\n";
  }
  if (!a.fa2_worst_shape.empty()) {
    out += fmt::format("- where `fa2_capacity` is worst (`{}`, regret {:.3f}): `splitkv_auto` is {}\n",
                       a.fa2_worst_shape, a.fa2_worst_regret,
                       a.auto_speedup_at_fa2_worst > 0 ? fmt::format("**{:.2f}x** faster", a.auto_speedup_at_fa2_worst)
                                                       : std::string("not measured"));
  }
  out += "\n## Regret by subset\n\n| subset | policy | shapes | geomean | p95 | max | within 5% |\n"
         "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (const RaggedSummaryRow& r : rows) {
    out += fmt::format("| {} | {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.1f}% |\n", r.subset, r.policy, r.stats.shapes,
                       r.stats.geomean, r.stats.p95, r.stats.max, 100 * r.stats.within_5pct);
  }
  out += fmt::format("\n{} shapes; per shape: the points CSV next to this file.\n", e.host.shapes.size());
  return out;
}

}  // namespace splitkv::heuristics
