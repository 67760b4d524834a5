#include "splitkv/heuristics/regret_report.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/tuner/progress.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::heuristics {
namespace {

constexpr double kWithinRegret = 1.05;

PolicyOutcome outcome_for(const MeasuredShape& shape, const OracleChoice& oracle, const Policy& policy) {
  PolicyOutcome out;
  if (policy.measured_time) {
    // A peer's own choice, timed as a row of its own: the count it chose is not known (0).
    const std::optional<double> time = policy.measured_time(shape);
    if (!time) return out;  // not measured on this shape: left out of its summaries
    out.evaluated = true;
    out.pick = {0, 0};
    out.measured = {0, 0, SplitMatch::policy_row, *time, 0};
    out.regret = *time / oracle.fastest_time_us;
    return out;
  }
  out.evaluated = true;
  out.pick = policy.pick(shape);
  out.measured = time_at_splits(shape, out.pick.evaluated_splits);
  out.regret = out.measured.time_us / oracle.fastest_time_us;
  return out;
}

std::string ratio(double v) { return fmt::format("{:.4f}", v); }
std::string percent(double v) { return fmt::format("{:.1f}%", 100.0 * v); }

}  // namespace

Evaluation evaluate_policies(const std::string& dataset, const std::vector<MeasuredShape>& shapes,
                             const std::vector<Policy>& policies) {
  Evaluation e;
  e.dataset = dataset;
  for (const Policy& p : policies) {
    e.policies.push_back(p.name);
    e.descriptions.push_back(p.description);
  }
  e.shapes.reserve(shapes.size());
  for (const MeasuredShape& shape : shapes) {
    ShapeResult r{shape, oracle_choice(shape), {}};
    for (const Policy& p : policies) r.outcomes.push_back(outcome_for(shape, r.oracle, p));
    e.shapes.push_back(std::move(r));
  }
  return e;
}

std::vector<CrossValidationScheme> default_cross_validation_schemes() {
  return {
      {"context_len", [](const MeasuredShape& s) { return s.point.context_len; }},
      {"batch", [](const MeasuredShape& s) { return s.point.batch; }},
      // Holding out a power-of-two batch leaves its CTA counts measured through other head
      // counts; holding out a CTA count asks the table about a count it never saw.
      {"ctas", [](const MeasuredShape& s) { return s.point.batch * s.point.num_kv_heads; }},
  };
}

std::optional<Evaluation> cross_validate(const std::vector<MeasuredShape>& shapes,
                                         const CrossValidationScheme& scheme, int num_sms,
                                         const FitOptions& options, const std::vector<Policy>& more_tables) {
  std::map<int, std::vector<std::size_t>> folds;
  for (std::size_t i = 0; i < shapes.size(); ++i) folds[scheme.fold_key(shapes[i])].push_back(i);
  if (folds.size() < 2) return std::nullopt;

  std::vector<std::optional<ShapeResult>> results(shapes.size());
  Evaluation e;
  e.dataset = fmt::format("cv_leave_one_{}_out", scheme.name);
  std::vector<const std::vector<std::size_t>*> fold_list;
  for (const auto& [key, held_out] : folds) fold_list.push_back(&held_out);
  // Every fold has the same policies; fold 0 (and only it, so no other thread writes them) names
  // them in the evaluation. Names and descriptions only: the policies refer to the fold's fit.

  // Each fold refits the tables (with their own leave-one-batch-out choice of CTA resolution)
  // on everything else: minutes in one thread for a full grid, so folds run on every core. A
  // fold writes only its own held-out shapes' slots, and the output keeps the input order, so
  // the report is the same bytes at any thread count.
  auto run_fold = [&](std::size_t f) {
    const std::vector<std::size_t>& held_out = *fold_list[f];
    std::vector<MeasuredShape> training;
    std::vector<bool> is_held(shapes.size(), false);
    for (std::size_t i : held_out) is_held[i] = true;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (!is_held[i]) training.push_back(shapes[i]);
    }
    FitOptions fold_options = options;
    fold_options.diagnose_dtypes = false;  // only the tables matter for held-out regret
    const FittedHeuristic fit = fit_heuristic(training, fold_options);
    std::vector<Policy> tables = table_policies(fit);
    tables.insert(tables.end(), more_tables.begin(), more_tables.end());
    const std::vector<Policy> policies = all_policies(std::move(tables), num_sms, shapes.front().kernel);
    for (std::size_t i : held_out) {
      ShapeResult r{shapes[i], oracle_choice(shapes[i]), std::vector<PolicyOutcome>(policies.size())};
      for (std::size_t k = 0; k < policies.size(); ++k) {
        if (policies[k].fitted) r.outcomes[k] = outcome_for(shapes[i], r.oracle, policies[k]);
      }
      results[i] = std::move(r);
    }
    if (f == 0) {
      for (const Policy& p : policies) {
        e.policies.push_back(p.name);
        e.descriptions.push_back(p.description);
      }
    }
  };
  const std::string task = fmt::format("cross-validation, leave one {} out", scheme.name);
  tuner::report_progress(task, "fold", 0, fold_list.size());
  std::atomic<std::size_t> next_fold{0};
  std::size_t folds_done = 0;  // under `mutex`, so that the counts reach the sink in order
  std::exception_ptr first_error;
  std::mutex mutex;
  auto worker = [&] {
    for (std::size_t f; (f = next_fold.fetch_add(1)) < fold_list.size();) {
      try {
        run_fold(f);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      tuner::report_progress(task, "fold", ++folds_done, fold_list.size());
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(fold_list.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  for (auto& r : results) e.shapes.push_back(std::move(*r));
  return e;
}

RegretStats regret_stats(const std::vector<double>& regrets, int exact) {
  RegretStats s;
  s.shapes = int(regrets.size());
  if (regrets.empty()) return s;
  std::vector<double> sorted = regrets;
  std::sort(sorted.begin(), sorted.end());
  double log_sum = 0;
  int within = 0;
  for (double r : sorted) {
    log_sum += std::log(r);
    within += r <= kWithinRegret ? 1 : 0;
  }
  const std::size_t n = sorted.size();
  s.geomean = std::exp(log_sum / double(n));
  const std::size_t rank = std::size_t(std::ceil(0.95 * double(n)));  // 1-based nearest rank
  s.p95 = sorted[std::max<std::size_t>(rank, 1) - 1];
  s.max = sorted.back();
  s.within_5pct = double(within) / double(n);
  s.exact_share = exact < 0 ? 1.0 : double(exact) / double(n);
  return s;
}

std::vector<ShapeSubset> default_subsets() {
  return {
      {"all", "every shape", [](const MeasuredShape&) { return true; }},
      {"capacity_gt_length", "cache capacity above the real length (the FA2 capacity scenario)",
       [](const MeasuredShape& s) { return s.capacity_tokens() > s.point.context_len; }},
      {"capacity_eq_length", "cache sized to the real length (capacity rounded up to whole pages)",
       [](const MeasuredShape& s) { return s.capacity_tokens() <= s.point.context_len; }},
  };
}

ShapeSubset capacity_scenario_subset() {
  return {"capacity_131072", "fixed lengths 1024-32768 in a 131072-token cache: the capacity scenario",
          [](const MeasuredShape& s) {
            const tuner::SweepPoint& p = s.point;
            return p.length_distribution.kind == tuner::LengthKind::fixed && p.cache_capacity == 131072 &&
                   p.context_len >= 1024 && p.context_len <= 32768;
          }};
}

std::vector<ShapeSubset> report_subsets(const std::string& kernel) {
  std::vector<ShapeSubset> subsets = default_subsets();
  if (find_peer_kernel(kernel)) subsets.push_back(capacity_scenario_subset());
  return subsets;
}

std::vector<RegretSummaryRow> summarize(const Evaluation& evaluation, const std::vector<ShapeSubset>& subsets) {
  const std::size_t ours =
      std::size_t(std::find(evaluation.policies.begin(), evaluation.policies.end(), "ours") - evaluation.policies.begin());
  std::vector<RegretSummaryRow> rows;
  for (const ShapeSubset& subset : subsets) {
    for (std::size_t k = 0; k < evaluation.policies.size(); ++k) {
      std::vector<double> regrets;
      int exact = 0;
      double log_speedup = 0;
      int both = 0;
      for (const ShapeResult& r : evaluation.shapes) {
        if (!subset.contains(r.shape) || !r.outcomes[k].evaluated) continue;
        regrets.push_back(r.outcomes[k].regret);
        const SplitMatch match = r.outcomes[k].measured.match;
        exact += match == SplitMatch::exact || match == SplitMatch::policy_row ? 1 : 0;
        if (ours < r.outcomes.size() && r.outcomes[ours].evaluated) {
          log_speedup += std::log(r.outcomes[k].measured.time_us / r.outcomes[ours].measured.time_us);
          ++both;
        }
      }
      if (regrets.empty()) continue;
      RegretStats stats = regret_stats(regrets, exact);
      stats.ours_speedup = both > 0 ? std::exp(log_speedup / both) : 0;
      rows.push_back({evaluation.dataset, subset.name, evaluation.policies[k], stats});
    }
  }
  return rows;
}

std::string regret_summary_csv(const std::vector<RegretSummaryRow>& rows, bool with_speedup) {
  std::string out = "dataset,subset,policy,shapes,geomean_regret,p95_regret,max_regret,within_5pct,exact_split_share";
  out += with_speedup ? ",ours_speedup\n" : "\n";
  for (const RegretSummaryRow& r : rows) {
    out += fmt::format("{},{},{},{},{},{},{},{:.4f},{:.4f}", r.dataset, r.subset, r.policy, r.stats.shapes,
                       ratio(r.stats.geomean), ratio(r.stats.p95), ratio(r.stats.max), r.stats.within_5pct,
                       r.stats.exact_share);
    if (with_speedup) out += "," + (r.stats.ours_speedup > 0 ? ratio(r.stats.ours_speedup) : std::string());
    out += '\n';
  }
  return out;
}

std::string regret_points_csv(const std::vector<Evaluation>& evaluations) {
  // Column groups come from the first evaluation; every evaluation uses the same policy list.
  std::vector<std::string> policies;
  for (const Evaluation& e : evaluations) {
    if (!e.policies.empty()) {
      policies = e.policies;
      break;
    }
  }
  // The oracle's pick has its own columns only when no policy named "oracle" brings them: a
  // repeated column name is renamed by pandas (oracle_splits.1) and lost by csv.DictReader.
  const bool oracle_is_a_policy = std::find(policies.begin(), policies.end(), "oracle") != policies.end();
  std::string out =
      "dataset,kernel,layout,page_size,dtype,batch,num_heads,num_kv_heads,head_dim,context_len,cache_capacity,"
      "timed_counts,fastest_splits,fastest_time_us";
  if (!oracle_is_a_policy) out += ",oracle_splits,oracle_time_us";
  for (const std::string& p : policies) {
    out += fmt::format(",{0}_splits,{0}_timed_splits,{0}_match,{0}_time_us,{0}_regret", p);
  }
  out += '\n';
  for (const Evaluation& e : evaluations) {
    for (const ShapeResult& r : e.shapes) {
      const tuner::SweepPoint& p = r.shape.point;
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f}", e.dataset, r.shape.kernel,
                         tuner::to_string(p.layout), p.page_size, tuner::to_string(p.element_types()), p.batch, p.num_heads,
                         p.num_kv_heads, p.head_dim, p.context_len, p.cache_capacity, r.shape.timings.size(),
                         r.oracle.fastest_splits, r.oracle.fastest_time_us);
      if (!oracle_is_a_policy) out += fmt::format(",{},{:.3f}", r.oracle.num_splits, r.oracle.time_us);
      for (std::size_t k = 0; k < policies.size(); ++k) {
        const PolicyOutcome* o = k < r.outcomes.size() && r.outcomes[k].evaluated ? &r.outcomes[k] : nullptr;
        if (o == nullptr) {
          out += ",,,,,";
          continue;
        }
        // A policy row's count is the peer's own and not known: its splits columns stay empty.
        const bool row = o->measured.match == SplitMatch::policy_row;
        out += fmt::format(",{},{},{},{:.3f},{}", row ? std::string() : std::to_string(o->pick.splits),
                           row ? std::string() : std::to_string(o->measured.timed), to_string(o->measured.match),
                           o->measured.time_us, ratio(o->regret));
      }
      out += '\n';
    }
  }
  return out;
}

namespace {

std::string summary_table(const std::vector<RegretSummaryRow>& rows, const std::string& dataset,
                          const std::string& subset, bool with_speedup) {
  std::string out = with_speedup ? "| policy | shapes | geomean | p95 | max | within 5% | split timed exactly | "
                                   "ours' speedup |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
                                 : "| policy | shapes | geomean | p95 | max | within 5% | split timed exactly |\n"
                                   "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  bool any = false;
  for (const RegretSummaryRow& r : rows) {
    if (r.dataset != dataset || r.subset != subset) continue;
    any = true;
    const bool ours = r.policy == "ours" || r.policy == "ours_capacity_only";
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |", ours ? "**" + r.policy + "**" : r.policy,
                       r.stats.shapes, ratio(r.stats.geomean), ratio(r.stats.p95), ratio(r.stats.max),
                       percent(r.stats.within_5pct), percent(r.stats.exact_share));
    if (with_speedup) out += fmt::format(" {} |", r.stats.ours_speedup > 0 ? ratio(r.stats.ours_speedup) : "");
    out += '\n';
  }
  return any ? out : std::string();
}

const RegretSummaryRow* find_row(const std::vector<RegretSummaryRow>& rows, const std::string& dataset,
                                 const std::string& subset, const std::string& policy) {
  for (const RegretSummaryRow& r : rows) {
    if (r.dataset == dataset && r.subset == subset && r.policy == policy) return &r;
  }
  return nullptr;
}

// A peer's report: its own rule (the headline policy row) against our table fitted on its rows.
std::string peer_section(const PeerKernel& peer, const std::vector<Evaluation>& evaluations,
                         const std::vector<RegretSummaryRow>& rows) {
  std::string out = fmt::format(
      "\n## {}'s own rule against our table\n\n"
      "Both timed on `{}`'s rows: `ours` at the count our table, fitted on those rows, picks; `{}` as "
      "measured. *Speedup* = geomean over the shapes of `{}`'s time / ours' time.\n\n"
      "| dataset | subset | shapes | ours | {} | speedup of ours |\n| --- | --- | ---: | ---: | ---: | ---: |\n",
      peer.title, peer.name, peer.headline_policy, peer.headline_policy, peer.headline_policy);
  bool any = false;
  for (const Evaluation& e : evaluations) {
    for (const std::string& subset : {std::string("all"), capacity_scenario_subset().name}) {
      const RegretSummaryRow* ours = find_row(rows, e.dataset, subset, "ours");
      const RegretSummaryRow* theirs = find_row(rows, e.dataset, subset, peer.headline_policy);
      if (ours == nullptr || theirs == nullptr) continue;
      any = true;
      out += fmt::format("| {} | {} | {} | {} | {} | {}x |\n", e.dataset, subset, theirs->stats.shapes,
                         ratio(ours->stats.geomean), ratio(theirs->stats.geomean), ratio(theirs->stats.ours_speedup));
    }
  }
  return any ? out : fmt::format("\n## {}'s own rule against our table\n\nNo `{}` rows in the data.\n", peer.title,
                                 peer.headline_policy);
}

// With a reused 16-bit table: the table of these rows' cache against it, where both were scored.
std::string reused_table_section(const std::vector<Evaluation>& evaluations, const std::vector<RegretSummaryRow>& rows,
                                 const ReportContext& c) {
  const std::string reused = "reused_16bit_table";
  std::string out;
  for (const Evaluation& e : evaluations) {
    for (const std::string& subset : {std::string("all"), std::string("capacity_gt_length")}) {
      const RegretSummaryRow* ours = find_row(rows, e.dataset, subset, "ours");
      const RegretSummaryRow* theirs = find_row(rows, e.dataset, subset, reused);
      if (ours == nullptr || theirs == nullptr) continue;
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {}x |\n", e.dataset, subset, theirs->stats.shapes,
                         ratio(ours->stats.geomean), ratio(ours->stats.p95), ratio(theirs->stats.geomean),
                         ratio(theirs->stats.p95), ratio(theirs->stats.ours_speedup));
    }
  }
  if (out.empty()) return out;
  return fmt::format(
             "\n## The {0} table against the 16-bit table reused\n\n"
             "Both on the `{0}` rows: `ours` at the count of the table for this cache, `{1}` at the count the "
             "16-bit (bf16/fp16) table picks unchanged. *Speedup* = geomean over the shapes of `{1}`'s time / "
             "ours' time: what a table of its own gains over reusing the 16-bit one.\n\n"
             "| dataset | subset | shapes | ours | ours p95 | {1} | {1} p95 | speedup of ours |\n"
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
             to_string(c.kv_dtype), reused) +
         out;
}

}  // namespace

std::string regret_markdown(const std::vector<Evaluation>& evaluations, const std::vector<RegretSummaryRow>& rows,
                            const ReportContext& c) {
  std::string out = fmt::format(
      "# num_splits regret on {gpu} ({sms} SMs)\n\n"
      "Regret of a policy on a shape = the measured time at the split count it picks / the fastest measured\n"
      "time of that shape (so 1.0000 is the best the sweep found). Kernel timed: `{kernel}`.\n"
      "Training data: `{train}` (sha256 `{train_sha}`).\n",
      fmt::arg("gpu", c.gpu), fmt::arg("sms", c.sm_count), fmt::arg("kernel", c.kernel),
      fmt::arg("train", c.training_input), fmt::arg("train_sha", c.training_sha256));
  // A 16-bit report says nothing about its cache, as the committed ones never did.
  if (c.kv_dtype != KvDtypeClass::sixteen_bit) {
    out += fmt::format("KV cache: `{}` (the rows of that class; `ours` is the table for it).\n", to_string(c.kv_dtype));
  }
  if (!c.validation_input.empty()) {
    out += fmt::format("Validation data: `{}` (sha256 `{}`), never seen by the fit.\n", c.validation_input,
                       c.validation_sha256);
  }
  out +=
      "\n- geomean, p95 (nearest rank) and max are over shapes; *within 5%* is the share with regret <= 1.05.\n"
      "- *split timed exactly*: share of shapes where the sweep timed the policy's own split count. Otherwise\n"
      "  the time is that of the count doing the same work on our kernel (`same_partition`) or of the nearest\n"
      "  timed count in log2 (`nearest`); `regret_points.csv` names the rule per shape (heuristics/FIT.md).\n"
      "- `fa2_capacity` is timed at the splits of FA2's capacity partition that overlap the real length.\n"
      "- `oracle` picks the fewest splits within the noise of the fastest, so its regret is the noise it accepts.\n";
  const PeerKernel* peer = find_peer_kernel(c.kernel);
  if (peer != nullptr) {
    std::string names;
    for (const PolicyKernel& p : peer->policy_kernels) names += (names.empty() ? "`" : ", `") + p.name + "`";
    out += fmt::format(
        "- {}: {}'s own choice of split count, timed as rows of their own (the count it chose is not known); "
        "regret = that row's time / the fastest fixed-split time of the shape, below 1 where the choice beat "
        "every count the sweep fixed. Only the fixed-split rows are fitted.\n"
        "- *ours' speedup*: geomean over the same shapes of the policy's time / ours' time.\n",
        names, peer->title);
    out += peer_section(*peer, evaluations, rows);
  }
  out += reused_table_section(evaluations, rows, c);
  if (!evaluations.empty()) {
    out += "\n## Policies\n\n| policy | what it does |\n| --- | --- |\n";
    for (std::size_t k = 0; k < evaluations.front().policies.size(); ++k) {
      out += fmt::format("| {} | {} |\n", evaluations.front().policies[k], evaluations.front().descriptions[k]);
    }
  }
  const std::map<std::string, std::string> titles = {
      {"in_sample", "In sample (fitted and evaluated on the training shapes)"},
      {"validation", "Validation (off-grid shapes the fit never saw)"},
      {"cv_leave_one_context_len_out", "Cross-validation: leave one context length out"},
      {"cv_leave_one_batch_out", "Cross-validation: leave one batch size out"},
      {"cv_leave_one_ctas_out", "Cross-validation: leave one CTA count (batch x kv_heads) out"},
  };
  for (const Evaluation& e : evaluations) {
    const auto title = titles.count(e.dataset) ? titles.at(e.dataset) : e.dataset;
    out += fmt::format("\n## {}\n", title);
    if (e.dataset.rfind("cv_", 0) == 0) {
      out += "\nEach group of shapes sharing the held-out value is evaluated with tables fitted on all the other "
             "shapes.\n";
    }
    for (const ShapeSubset& subset : report_subsets(c.kernel)) {
      const std::string table = summary_table(rows, e.dataset, subset.name, peer != nullptr);
      if (table.empty()) continue;
      out += fmt::format("\n### {} ({})\n\n{}", subset.name, subset.description, table);
    }
  }
  return out;
}

std::string fit_markdown(const FittedHeuristic& fit, const Measurements& m) {
  const RowCounts& c = m.counts;
  std::string excluded;
  for (const auto& [status, n] : c.excluded) excluded += fmt::format("{}{} {}", excluded.empty() ? "" : ", ", n, status);
  std::string out = fmt::format(
      "# Fit of the num_splits tables\n\n"
      "- input: `{}` (sha256 `{}`){}\n"
      "- GPU: {} ({} SMs, from the {}); kernel fitted: `{}`\n"
      "- rows: {} read, {} ok and used; excluded by status: {}; {} throttled rows superseded by a re-measurement; "
      "{} ok rows of other kernels ignored\n"
      "- shapes: {} with at least one ok row; {} shapes had no ok row\n",
      m.source_display, m.sha256, m.measured_at.empty() ? "" : ", measured " + m.measured_at, m.gpu, m.sm_count,
      m.sm_count_source, m.kernel, c.rows, c.ok, excluded.empty() ? "none" : excluded, c.superseded,
      c.other_kernels, c.shapes, c.shapes_without_ok_rows);
  if (m.kv_dtype != KvDtypeClass::sixteen_bit || c.other_kv_dtypes > 0) {
    out += fmt::format("- KV cache: `{}` rows fitted; {} ok rows of another KV dtype class ignored\n",
                       to_string(m.kv_dtype), c.other_kv_dtypes);
  }

  const FitNotes& n = fit.notes;
  out += "\n## Decisions taken from the data\n\n";
  if (n.page_sizes.size() > 1) {
    out += fmt::format(
        "- page sizes {}: in-sample geomean regret of the paged shapes is {} with one paged table and {} with a "
        "table per page size; {} (a table per page size must gain more than 0.5%).\n",
        fmt::join(n.page_sizes, ", "), ratio(n.paged_geomean_pooled), ratio(n.paged_geomean_separate),
        n.page_sizes_separate ? "**a table per page size**" : "**one paged table**");
  } else if (n.page_sizes.size() == 1) {
    out += fmt::format("- page sizes: only {} in the data; one paged table serves every page size.\n", n.page_sizes[0]);
  } else {
    out += "- page sizes: no paged shapes; paged lookups use the contiguous table.\n";
  }
  if (n.dtype_checks.empty()) {
    out += fmt::format("- dtypes: only {} in the data.\n", fmt::join(n.dtypes, ", "));
  } else {
    out += "- dtypes share one table. What a table of its own would gain each dtype (in-sample geomean regret):\n";
    for (const auto& d : n.dtype_checks) {
      out += fmt::format("  - {} ({} shapes): {} with the shared table, {} with its own\n", d.dtype, d.shapes,
                         ratio(d.geomean_pooled), ratio(d.geomean_own_table));
    }
  }
  if (n.cta_resolution_checks.empty()) {
    out += fmt::format("- CTA buckets: {} per octave (fixed by the caller).\n", n.cta_buckets_per_octave);
  } else {
    std::string tried;
    for (const auto& c : n.cta_resolution_checks)
      tried += fmt::format("{}{} per octave {}", tried.empty() ? "" : ", ", c.buckets_per_octave,
                           ratio(c.leave_one_batch_out_geomean));
    out += fmt::format("- CTA buckets: **{} per octave**. Leave-one-batch-out geomean regret: {} (a finer "
                       "resolution must gain more than 0.2% to be chosen).\n",
                       n.cta_buckets_per_octave, tried);
  }
  for (const SplitTable* t : {&fit.real_length, &fit.capacity_only}) {
    const TableGrid& g = t->grid;
    int decided = 0;
    for (int v : t->shapes_in_cell) decided += v > 0 ? 1 : 0;
    out += fmt::format(
        "\n## Table `{}`\n\n- {} CTA buckets of 1/{} octave, centred on {}..{} CTAs; {} buckets 2^{}..2^{}\n"
        "- head_dim classes {}; layout classes {}\n"
        "- {} of {} cells decided by measured shapes, the rest copied from the nearest decided cell\n",
        to_string(t->axis), g.cta_buckets, g.cta_buckets_per_octave,
        cta_bucket_center(g.cta_bucket_min, g.cta_buckets_per_octave),
        cta_bucket_center(g.cta_bucket_min + g.cta_buckets - 1, g.cta_buckets_per_octave),
        t->axis == LengthAxis::real_length ? "real-length" : "capacity", g.length_log2_min,
        g.length_log2_min + g.length_buckets - 1, fmt::join(g.head_dims, ", "), g.layout_classes(), decided,
        t->shapes_in_cell.size());
  }
  return out;
}

}  // namespace splitkv::heuristics
