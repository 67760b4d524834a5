#include "splitkv/heuristics/paged_vs_contiguous.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace splitkv::heuristics {
namespace {

// Everything that makes a shape except its layout: the rows of the layout comparison.
auto layout_free_key(const tuner::SweepPoint& p) {
  return std::make_tuple(int(p.dtype), int(p.kv_dtype), p.head_dim, p.num_heads, p.num_kv_heads, p.batch, p.context_len,
                         p.cache_capacity, tuner::to_string(p.length_distribution));
}
// ... and everything except the capacity: the pairs of the capacity scenario.
auto capacity_free_key(const tuner::SweepPoint& p) {
  return std::make_tuple(p.page_size, int(p.dtype), int(p.kv_dtype), p.head_dim, p.num_heads, p.num_kv_heads, p.batch,
                         p.context_len, tuner::to_string(p.length_distribution));
}

std::vector<std::size_t> policy_columns(const Evaluation& e, const std::vector<std::string>& names) {
  std::vector<std::size_t> columns;
  for (const std::string& name : names) {
    const auto it = std::find(e.policies.begin(), e.policies.end(), name);
    if (it == e.policies.end()) {
      throw std::logic_error(fmt::format("evaluation {} lacks policy {}", e.dataset, name));
    }
    columns.push_back(std::size_t(it - e.policies.begin()));
  }
  return columns;
}

LayoutTiming layout_timing(const ShapeResult& r, const std::vector<std::size_t>& columns) {
  LayoutTiming t;
  t.page_size = r.shape.point.layout == KvLayout::paged ? r.shape.point.page_size : 0;
  t.best_splits = r.oracle.fastest_splits;
  t.best_time_us = r.oracle.fastest_time_us;
  t.best_tbps = tuner::achieved_tbps(r.shape.point.kv_bytes(), t.best_time_us);
  for (std::size_t column : columns) {
    const PolicyOutcome& o = r.outcomes.at(column);
    if (!o.evaluated) throw std::logic_error("layout_timing: policy not evaluated on this shape");
    t.policies.push_back({o.pick.splits, o.measured.timed, o.measured.time_us});
  }
  return t;
}

std::string layouts_in(const Evaluation& e) {
  std::set<int> page_sizes;
  for (const ShapeResult& r : e.shapes) page_sizes.insert(r.shape.point.layout == KvLayout::paged ? r.shape.point.page_size : 0);
  std::vector<std::string> labels;
  for (int p : page_sizes) labels.push_back(layout_label(p));
  return labels.empty() ? std::string("none") : fmt::format("{}", fmt::join(labels, ", "));
}

std::string us(double v) { return fmt::format("{:.3f}", v); }
std::string ratio(double v) { return fmt::format("{:.4f}", v); }
std::string ratio(const std::optional<double>& v) { return v ? ratio(*v) : std::string(); }

std::string shape_columns(const tuner::SweepPoint& p) {
  return fmt::format("{},{},{},{},{},{},{}", tuner::to_string(p.element_types()), p.batch, p.num_heads, p.num_kv_heads,
                     p.head_dim, p.context_len, p.cache_capacity);
}

// Header and fields of one LayoutTiming, each column prefixed with `prefix`.
std::string timing_header(const std::string& prefix, const std::vector<std::string>& policies) {
  std::string out = fmt::format("{0}best_splits,{0}best_time_us,{0}best_tbps", prefix);
  for (const std::string& p : policies) out += fmt::format(",{0}{1}_splits,{0}{1}_timed_splits,{0}{1}_time_us", prefix, p);
  return out;
}
std::string timing_fields(const std::optional<LayoutTiming>& t, std::size_t policies) {
  if (!t) return std::string(3 * policies + 2, ',');
  std::string out = fmt::format("{},{},{:.4f}", t->best_splits, us(t->best_time_us), t->best_tbps);
  for (const PolicyTime& p : t->policies) out += fmt::format(",{},{},{}", p.splits, p.timed_splits, us(p.time_us));
  return out;
}

}  // namespace

std::vector<std::string> layout_comparison_policies() { return {"ours", "fa2_capacity", "fa2_real_length"}; }
std::vector<std::string> capacity_scenario_policies() {
  return {"ours", "ours_capacity_only", "fa2_capacity", "fa2_real_length"};
}

std::string layout_label(int page_size) {
  return page_size > 0 ? fmt::format("paged{}", page_size) : std::string("contiguous");
}

std::optional<double> LayoutComparisonRow::best_ratio(std::size_t page_index) const {
  const auto& p = paged.at(page_index);
  if (!p) return std::nullopt;
  return p->best_time_us / contiguous.best_time_us;
}

std::optional<double> LayoutComparisonRow::policy_ratio(std::size_t page_index, std::size_t policy_index) const {
  const auto& p = paged.at(page_index);
  if (!p) return std::nullopt;
  return p->policies.at(policy_index).time_us / contiguous.policies.at(policy_index).time_us;
}

LayoutComparison compare_layouts(const Evaluation& e, const std::string& gpu, const std::string& source) {
  LayoutComparison out;
  out.gpu = gpu;
  out.policies = layout_comparison_policies();
  const std::vector<std::size_t> columns = policy_columns(e, out.policies);

  std::set<int> page_sizes;
  bool any_contiguous = false;
  for (const ShapeResult& r : e.shapes) {
    if (r.shape.point.layout == KvLayout::paged) {
      page_sizes.insert(r.shape.point.page_size);
    } else {
      any_contiguous = true;
    }
    out.kernel = r.shape.kernel;
  }
  if (!any_contiguous) {
    throw InputError(fmt::format("{}: no contiguous rows with status ok (layouts measured: {}); paged vs "
                                 "contiguous needs both layouts",
                                 source, layouts_in(e)));
  }
  if (page_sizes.empty()) {
    throw InputError(fmt::format("{}: no paged rows with status ok (layouts measured: {}); paged vs "
                                 "contiguous needs both layouts",
                                 source, layouts_in(e)));
  }
  out.page_sizes.assign(page_sizes.begin(), page_sizes.end());

  struct Group {
    const ShapeResult* contiguous = nullptr;
    std::vector<const ShapeResult*> paged;
  };
  std::map<decltype(layout_free_key(tuner::SweepPoint{})), Group> groups;
  for (const ShapeResult& r : e.shapes) {
    Group& g = groups[layout_free_key(r.shape.point)];
    if (g.paged.empty()) g.paged.assign(out.page_sizes.size(), nullptr);
    if (r.shape.point.layout == KvLayout::paged) {
      const auto at = std::lower_bound(out.page_sizes.begin(), out.page_sizes.end(), r.shape.point.page_size);
      g.paged[std::size_t(at - out.page_sizes.begin())] = &r;
    } else {
      g.contiguous = &r;
    }
  }
  for (const auto& [key, g] : groups) {
    const int paged_count = int(std::count_if(g.paged.begin(), g.paged.end(), [](auto* p) { return p != nullptr; }));
    if (g.contiguous == nullptr) {
      out.paged_shapes_without_contiguous += paged_count;
      continue;
    }
    if (paged_count == 0) {
      ++out.contiguous_shapes_without_paged;
      continue;
    }
    LayoutComparisonRow row;
    row.shape = g.contiguous->shape.point;
    row.kv_bytes = row.shape.kv_bytes();
    row.contiguous = layout_timing(*g.contiguous, columns);
    for (const ShapeResult* p : g.paged) {
      row.paged.push_back(p ? std::optional<LayoutTiming>(layout_timing(*p, columns)) : std::nullopt);
    }
    out.rows.push_back(std::move(row));
  }
  if (out.rows.empty()) {
    throw InputError(fmt::format("{}: no shape was measured both contiguous and paged (same dtype, batch, heads, "
                                 "head_dim, context_len and cache_capacity); nothing to compare",
                                 source));
  }
  return out;
}

std::string layout_comparison_csv(const LayoutComparison& c) {
  std::string out = "gpu,kernel,dtype,batch,num_heads,num_kv_heads,head_dim,context_len,cache_capacity,kv_bytes,"
                    "fastest_layout," +
                    timing_header("contiguous_", c.policies);
  for (int page_size : c.page_sizes) {
    const std::string prefix = layout_label(page_size) + "_";
    out += "," + timing_header(prefix, c.policies) + fmt::format(",{}ratio_best", prefix);
    for (const std::string& p : c.policies) out += fmt::format(",{}ratio_{}", prefix, p);
  }
  out += '\n';
  for (const LayoutComparisonRow& r : c.rows) {
    int fastest = 0;
    double fastest_time = r.contiguous.best_time_us;
    for (const auto& p : r.paged) {
      if (p && p->best_time_us < fastest_time) {
        fastest = p->page_size;
        fastest_time = p->best_time_us;
      }
    }
    out += fmt::format("{},{},{},{},{},{}", c.gpu, c.kernel, shape_columns(r.shape), r.kv_bytes, layout_label(fastest),
                       timing_fields(r.contiguous, c.policies.size()));
    for (std::size_t i = 0; i < c.page_sizes.size(); ++i) {
      out += "," + timing_fields(r.paged[i], c.policies.size()) + "," + ratio(r.best_ratio(i));
      for (std::size_t k = 0; k < c.policies.size(); ++k) out += "," + ratio(r.policy_ratio(i, k));
    }
    out += '\n';
  }
  return out;
}

double CapacityScenarioRow::capacity_cost() const { return oversized.best_time_us / sized.best_time_us; }

std::size_t CapacityScenario::policy_index(const std::string& name) const {
  const auto it = std::find(policies.begin(), policies.end(), name);
  if (it == policies.end()) throw std::out_of_range("capacity scenario has no policy " + name);
  return std::size_t(it - policies.begin());
}

CapacityScenario capacity_scenario(const Evaluation& e, const std::string& gpu, const std::string& source) {
  CapacityScenario out;
  out.gpu = gpu;
  out.policies = capacity_scenario_policies();
  const std::vector<std::size_t> columns = policy_columns(e, out.policies);

  std::map<decltype(capacity_free_key(tuner::SweepPoint{})), const ShapeResult*> sized;
  for (const ShapeResult& r : e.shapes) {
    if (r.shape.point.cache_capacity == r.shape.point.context_len) sized[capacity_free_key(r.shape.point)] = &r;
  }
  bool any_contiguous = false;
  for (const ShapeResult& r : e.shapes) {  // shape order: layout first, contiguous before paged
    const tuner::SweepPoint& p = r.shape.point;
    if (p.cache_capacity <= p.context_len) continue;
    const auto twin = sized.find(capacity_free_key(p));
    if (twin == sized.end()) continue;
    out.kernel = r.shape.kernel;
    any_contiguous = any_contiguous || p.layout == KvLayout::contiguous;
    out.rows.push_back({p, p.kv_bytes(), layout_timing(*twin->second, columns), layout_timing(r, columns)});
  }
  if (!any_contiguous) {
    throw InputError(fmt::format(
        "{}: no contiguous shape was measured both at a cache_capacity above its context_len and at "
        "cache_capacity = context_len (layouts measured: {}); the capacity scenario needs both",
        source, layouts_in(e)));
  }
  return out;
}

std::string capacity_scenario_csv(const CapacityScenario& s) {
  std::string out =
      "gpu,kernel,layout,page_size,dtype,batch,num_heads,num_kv_heads,head_dim,context_len,cache_capacity,kv_bytes,"
      "sized_best_splits,sized_best_time_us,best_splits,best_time_us,best_tbps,capacity_cost";
  for (const std::string& p : s.policies) out += fmt::format(",{0}_splits,{0}_timed_splits,{0}_time_us,{0}_regret", p);
  out += ",fa2_capacity_over_ours,fa2_capacity_over_sized_best\n";
  const std::size_t ours = s.policy_index("ours"), fa2 = s.policy_index("fa2_capacity");
  for (const CapacityScenarioRow& r : s.rows) {
    const LayoutTiming& o = r.oversized;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{:.4f},{}", s.gpu, s.kernel, tuner::to_string(r.shape.layout),
                       r.shape.page_size, shape_columns(r.shape), r.kv_bytes, r.sized.best_splits,
                       us(r.sized.best_time_us), o.best_splits, us(o.best_time_us), o.best_tbps,
                       ratio(r.capacity_cost()));
    for (const PolicyTime& p : o.policies) {
      out += fmt::format(",{},{},{},{}", p.splits, p.timed_splits, us(p.time_us), ratio(p.time_us / o.best_time_us));
    }
    out += fmt::format(",{},{}\n", ratio(o.policies[fa2].time_us / o.policies[ours].time_us),
                       ratio(o.policies[fa2].time_us / r.sized.best_time_us));
  }
  return out;
}

}  // namespace splitkv::heuristics
