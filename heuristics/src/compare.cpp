#include "splitkv/heuristics/compare.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace splitkv::heuristics {
namespace {

namespace fs = std::filesystem;

// geomean, min, p95 and max of positive ratios (regret_stats computes all but the min).
std::string ratio_stats(const std::vector<double>& values) {
  if (values.empty()) return "no shapes";
  const RegretStats s = regret_stats(values);
  return fmt::format("geomean {:.4f}, min {:.4f}, p95 {:.4f}, max {:.4f}", s.geomean,
                     *std::min_element(values.begin(), values.end()), s.p95, s.max);
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error_a, error_b;
  const fs::path pa = fs::weakly_canonical(a, error_a), pb = fs::weakly_canonical(b, error_b);
  if (error_a || error_b) return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
  return pa == pb;
}

}  // namespace

const Evaluation& CompareProducts::evaluation() const {
  const std::string dataset = separate_training ? "validation" : "in_sample";
  for (const Evaluation& e : fit.evaluations) {
    if (e.dataset == dataset) return e;
  }
  throw std::logic_error("compare: no " + dataset + " evaluation");
}

CompareProducts run_compare(const CompareRequest& request) {
  CompareProducts out;
  out.separate_training = !request.train_csv.empty() && !same_file(request.train_csv, request.results_csv);
  FitRequest fit;
  fit.results_csv = out.separate_training ? request.train_csv : request.results_csv;
  if (out.separate_training) fit.validation_csv = request.results_csv;
  fit.kernel = request.kernel;
  fit.num_sms = request.num_sms;
  fit.cross_validate = false;
  out.fit = run_fit(fit);  // also refuses a train CSV of another GPU

  const Measurements& compared = out.compared();
  out.layouts = compare_layouts(out.evaluation(), compared.gpu, compared.source_display);
  if (request.capacity_scenario) out.capacity = capacity_scenario(out.evaluation(), compared.gpu, compared.source_display);
  return out;
}

void check_compare_outputs(const CompareRequest& request, const std::string& out_path,
                           const std::string& capacity_out_path) {
  std::vector<std::pair<std::string, std::string>> outputs = {{"--out", out_path}};
  if (!capacity_out_path.empty()) outputs.emplace_back("--capacity-out", capacity_out_path);
  for (const auto& [flag, path] : outputs) {
    for (const std::string& input : {request.results_csv, request.train_csv}) {
      if (!input.empty() && same_file(path, input)) {
        throw InputError(fmt::format("{} {}: is an input of the comparison; write the report elsewhere", flag, path));
      }
    }
  }
  if (!capacity_out_path.empty() && same_file(out_path, capacity_out_path)) {
    throw InputError(fmt::format("--capacity-out {}: is the same file as --out", capacity_out_path));
  }
}

std::map<std::string, std::string> compare_files(const CompareProducts& p, const std::string& out_path,
                                                 const std::string& capacity_out_path) {
  std::map<std::string, std::string> files;
  files[out_path] = layout_comparison_csv(p.layouts);
  if (p.capacity && !capacity_out_path.empty()) files[capacity_out_path] = capacity_scenario_csv(*p.capacity);
  return files;
}

std::string compare_console_summary(const CompareProducts& p) {
  const Measurements& m = p.compared();
  const LayoutComparison& c = p.layouts;
  std::string out = fmt::format("compared  {} ({} shapes; gpu {}, kernel {}); ours fitted on {}\n", m.source_display,
                                m.shapes.size(), m.gpu, m.kernel,
                                p.separate_training ? p.fit.training.source_display : std::string("the same file"));
  out += fmt::format("layouts   {} shapes measured contiguous and paged", c.rows.size());
  if (c.paged_shapes_without_contiguous > 0) {
    out += fmt::format("; left out: {} paged shapes without a contiguous twin", c.paged_shapes_without_contiguous);
  }
  if (c.contiguous_shapes_without_paged > 0) {
    out += fmt::format("; left out: {} contiguous shapes without a paged twin", c.contiguous_shapes_without_paged);
  }
  out += "\n          paged time / contiguous time:\n";
  for (std::size_t i = 0; i < c.page_sizes.size(); ++i) {
    std::vector<double> best, ours;
    for (const LayoutComparisonRow& r : c.rows) {
      if (const auto v = r.best_ratio(i)) best.push_back(*v);
      if (const auto v = r.policy_ratio(i, 0)) ours.push_back(*v);
    }
    out += fmt::format("  {:<9} {:>5} shapes, each layout at its best: {}\n", layout_label(c.page_sizes[i]),
                       best.size(), ratio_stats(best));
    out += fmt::format("  {:<9} {:>5} shapes, {:<24} {}\n", "", ours.size(),
                       fmt::format("each at the {} pick:", c.policies[0]), ratio_stats(ours));
  }
  if (p.capacity) {
    const CapacityScenario& s = *p.capacity;
    const std::size_t ours = s.policy_index("ours"), fa2 = s.policy_index("fa2_capacity");
    for (int page_size : {0, -1}) {  // contiguous, then every paged row
      std::vector<double> capacity_cost, heuristic_cost;
      for (const CapacityScenarioRow& r : s.rows) {
        if ((r.shape.layout == KvLayout::paged) != (page_size < 0)) continue;
        capacity_cost.push_back(r.capacity_cost());
        heuristic_cost.push_back(r.oversized.policies[fa2].time_us / r.oversized.policies[ours].time_us);
      }
      if (capacity_cost.empty()) continue;
      out += fmt::format("capacity  {} {} shapes at a capacity above the real length:\n", capacity_cost.size(),
                         page_size < 0 ? "paged" : "contiguous");
      out += fmt::format("  capacity alone (best / best at capacity = length): {}\n", ratio_stats(capacity_cost));
      out += fmt::format("  fa2_capacity time / ours time:                     {}\n", ratio_stats(heuristic_cost));
    }
  }
  return out;
}

}  // namespace splitkv::heuristics
