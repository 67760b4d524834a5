#include "splitkv/heuristics/header_emitter.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "splitkv/heuristics/peer_kernels.hpp"

namespace splitkv::heuristics {
namespace {

// Lower bound (inclusive) of log2 bucket i in tokens or CTAs: the smallest v with v^2 >= 2^(2i-1).
std::int64_t bucket_lower(int i) {
  if (i <= 0) return 0;
  return geometric_midpoint(1 << (i - 1), 1 << i);
}

std::string compact_count(std::int64_t v) {
  if (v >= 1024 && v % 1024 == 0) return fmt::format("{}K", v / 1024);
  return fmt::format("{}", v);
}

std::string join_ints(const std::vector<int>& values, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? std::string(sep) : "") + std::to_string(values[i]);
  return out;
}

std::string counts_line(const RowCounts& c) {
  std::string excluded;
  for (const auto& [status, n] : c.excluded) excluded += fmt::format("{}{} {}", excluded.empty() ? "" : ", ", n, status);
  std::string line = fmt::format("{} rows, {} ok and fitted", c.rows, c.ok);
  line += excluded.empty() ? "; none excluded" : "; excluded " + excluded;
  if (c.superseded) line += fmt::format("; {} throttled rows superseded", c.superseded);
  if (c.policy_rows) line += fmt::format("; {} policy rows kept for evaluation, not fitted", c.policy_rows);
  if (c.other_kernels) line += fmt::format("; {} rows of other kernels ignored", c.other_kernels);
  if (c.other_kv_dtypes) line += fmt::format("; {} rows of another KV dtype class ignored", c.other_kv_dtypes);
  return line;
}

std::string layout_class_name(const TableGrid& g, int lay) {
  if (lay == 0) return "contiguous";
  const auto& pages = g.paged_classes[std::size_t(lay - 1)];
  if (g.paged_classes.size() == 1) return fmt::format("paged (every page size; fitted on {})", join_ints(pages, ", "));
  return fmt::format("paged, page size {}", join_ints(pages, "/"));
}

std::string bucket_range(const TableGrid& g, int first, int last, std::string_view unit) {
  const int lo_bucket = g.length_log2_min + first, hi_bucket = g.length_log2_min + last;
  const bool open_low = first == 0, open_high = last == g.length_buckets - 1;
  const std::int64_t lo = bucket_lower(lo_bucket), hi = bucket_lower(hi_bucket + 1) - 1;
  if (open_low && open_high) return fmt::format("any {}", unit);
  if (open_low) return fmt::format("{} <= {}", unit, hi);
  if (open_high) return fmt::format("{} >= {}", unit, lo);
  return fmt::format("{} {}..{}", unit, lo, hi);
}

// One table: rows of split counts (identical neighbouring length buckets of a plane merged
// into one row) and the row index of every (head_dim class, layout class, length bucket).
struct EmittedTable {
  std::string function_name;  // detail::<name>(hd, lay, y, x)
  std::string text;
};

// The slots of `ctas_per_sm` resident CTAs per SM as the header spells them: kSmCount, or
// "2LL * kSmCount" (`suffix` LL) where a 64-bit product is wanted. The parser reads them back.
std::string slots_expression(int ctas_per_sm, std::string_view suffix) {
  return ctas_per_sm == 1 ? std::string("kSmCount") : fmt::format("{}{} * kSmCount", ctas_per_sm, suffix);
}

// Each plane's measured CTA counts (the wave guard leaves those to the table) and the guard itself.
// Row p of kMeasuredCtas is plane p = head_dim class x kLayoutClasses + layout class: its length,
// then its counts ascending, then zeros.
std::string emit_measured_ctas(const SplitTable& table) {
  std::size_t widest = 0;
  for (const auto& plane : table.measured_ctas) widest = std::max(widest, plane.size());
  std::string rows;
  for (const auto& plane : table.measured_ctas) {
    std::vector<std::int64_t> row(widest + 1, 0);
    row[0] = std::int64_t(plane.size());
    std::copy(plane.begin(), plane.end(), row.begin() + 1);
    std::string values;
    for (std::size_t i = 0; i < row.size(); ++i) values += (i ? ", " : "") + std::to_string(row[i]);
    rows += "      {" + values + "},\n";
  }
  return fmt::format(
      "// The CTA counts (batch * kv_heads) each plane's training shapes measured: where a lookup's count\n"
      "// is one of them the table's answer stands; elsewhere the wave guard may move it.\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline bool measured_ctas(int plane, long long ctas) {{\n"
      "  static constexpr int kMeasuredCtas[{planes}][{width}] = {{\n"
      "{rows}"
      "  }};\n"
      "  int low = 1, high = kMeasuredCtas[plane][0];\n"
      "  while (low <= high) {{\n"
      "    const int middle = (low + high) / 2;\n"
      "    if (kMeasuredCtas[plane][middle] == ctas) return true;\n"
      "    if (kMeasuredCtas[plane][middle] < ctas) low = middle + 1;\n"
      "    else high = middle - 1;\n"
      "  }}\n"
      "  return false;\n"
      "}}\n"
      "\n"
      "// Waves of `slots` resident CTAs that the splits holding work fill, times (64-token tiles per split\n"
      "// + kWaveGuardWaveOverheadTiles, what a wave costs beyond its tiles), for `count` splits of `per`\n"
      "// tiles. The splits holding work, ceil(tiles / per), are count - (count * per - tiles) / per, and\n"
      "// that remainder is below count: the division is needed only when per < count.\n"
      "template <typename Int, Int slots>\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr Int wave_cost_per(Int count, Int per, Int ctas, Int tiles, Int& waves) {{\n"
      "  const Int excess = count * per - tiles;\n"
      "  const Int live = excess < per ? count : count - excess / per;\n"
      "  waves = (ctas * live + slots - 1) / slots;\n"
      "  return waves * (per + Int(kWaveGuardWaveOverheadTiles));\n"
      "}}\n"
      "\n"
      "template <typename Int, Int slots>\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr Int wave_cost(Int count, Int ctas, Int tiles, Int& waves) {{\n"
      "  return wave_cost_per<Int, slots>(count, (tiles + count - 1) / count, ctas, tiles, waves);\n"
      "}}\n"
      "\n"
      "// The same for a count on the sweeps' ladder, m << shift with m = 1 or 3 (1, 2, 3, 4, 6, 8, 12, ...):\n"
      "// tiles per split by a shift and a division by the constant 3, no runtime division.\n"
      "template <typename Int, Int slots>\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr Int ladder_wave_cost(int shift, bool times_three, Int ctas, Int tiles,\n"
      "                                                             Int& waves) {{\n"
      "  const Int count = (times_three ? Int(3) : Int(1)) << shift;\n"
      "  const Int rounded_up = (tiles + count - 1) >> shift;\n"
      "  return wave_cost_per<Int, slots>(count, times_three ? rounded_up / 3 : rounded_up, ctas, tiles, waves);\n"
      "}}\n"
      "\n"
      "// The wave guard (heuristics/FIT.md, \"Wave guard\"), in wave_cost: when the splits\n"
      "// spill the CTAs into one more wave than needed and the most splits with one wave fewer (rounded\n"
      "// down to the counts sweeps time, 2^k and 3 x 2^(k-1)) cost less by more than the margin, those;\n"
      "// else the cheapest timed count above (up to kWaveGuardMoreFactor times and max_splits, keeping\n"
      "// kWaveGuardMinTilesPerSplit tiles per split) when it costs less by more than the margin.\n"
      "// In 32-bit unsigned arithmetic when every value fits (CTA counts up to 2^20, splits up to 2^9,\n"
      "// max_splits up to 2^11, CTAs x tiles up to 2^30: no product exceeds 2^32), else 64-bit: the same\n"
      "// answers, and 64-bit divisions cost the host several times more. The slots are a constant, so\n"
      "// dividing by them is a multiplication.\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr bool cheaper(unsigned long long candidate_cost, unsigned long long cost) {{\n"
      "  return candidate_cost * (100 + kWaveGuardMarginPercent) < cost * 100;\n"
      "}}\n"
      "\n"
      "template <typename Int, Int slots>\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int wave_guard_in(int splits, Int ctas, Int tiles, int max_splits) {{\n"
      "  Int waves = 0, other_waves = 0;\n"
      "  const Int cost = wave_cost<Int, slots>(Int(splits), ctas, tiles, waves);\n"
      "  // No count costs less than the work spread evenly, ctas x tiles / slots, plus the overhead of the\n"
      "  // fewest waves any count needs, ceil(ctas / slots): when `splits` is within the margin of that,\n"
      "  // nothing can beat it by more (an exact bound: the answer is the same).\n"
      "  const unsigned long long fewest_waves = (ctas + slots - 1) / slots;\n"
      "  if (!cheaper((unsigned long long)ctas * tiles + (unsigned long long)kWaveGuardWaveOverheadTiles * slots * fewest_waves,\n"
      "               (unsigned long long)cost * slots))\n"
      "    return splits;\n"
      "  if (waves >= 2) {{\n"
      "    const Int most = (waves - 1) * slots / ctas;\n"
      "    if (most >= 1) {{\n"
      "      const int shift = floor_log2(most);\n"
      "      const bool times_three = shift >= 1 && (Int(3) << (shift - 1)) <= most;\n"
      "      const Int fewer = times_three ? Int(3) << (shift - 1) : Int(1) << shift;\n"
      "      if (fewer < Int(splits) &&\n"
      "          cheaper(ladder_wave_cost<Int, slots>(times_three ? shift - 1 : shift, times_three, ctas, tiles, other_waves),\n"
      "                  cost))\n"
      "        return (int)fewer;\n"
      "    }}\n"
      "  }}\n"
      "  // Counts above: at most kWaveGuardMoreFactor times and max_splits, and each split more than\n"
      "  // kWaveGuardMinTilesPerSplit - 1 tiles.\n"
      "  const Int by_factor = Int(splits * kWaveGuardMoreFactor < max_splits ? splits * kWaveGuardMoreFactor : max_splits);\n"
      "  const Int by_tiles = (tiles - 1) / Int(kWaveGuardMinTilesPerSplit - 1);\n"
      "  const Int reach = by_factor < by_tiles ? by_factor : by_tiles;\n"
      "  int best = splits;\n"
      "  Int best_cost = cost;\n"
      "  for (int shift = floor_log2(Int(splits)); (Int(1) << shift) <= reach; ++shift) {{\n"
      "    for (int times_three = 0; times_three < 2; ++times_three) {{  // 2^shift, then 3 x 2^(shift - 1)\n"
      "      if (times_three && shift == 0) continue;\n"
      "      const Int candidate = times_three ? Int(3) << (shift - 1) : Int(1) << shift;\n"
      "      if (candidate <= Int(splits) || candidate > reach) continue;\n"
      "      const Int candidate_cost =\n"
      "          ladder_wave_cost<Int, slots>(times_three ? shift - 1 : shift, times_three != 0, ctas, tiles, other_waves);\n"
      "      if (cheaper(candidate_cost, cost) && candidate_cost < best_cost) {{\n"
      "        best = (int)candidate;\n"
      "        best_cost = candidate_cost;\n"
      "      }}\n"
      "    }}\n"
      "  }}\n"
      "  return best;\n"
      "}}\n"
      "\n"
      "template <int kSlots>\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int wave_guard(int splits, long long ctas, long long tokens, int max_splits) {{\n"
      "  const long long tiles = tokens <= 0 ? 0 : (tokens + 63) / 64;\n"
      "  if (splits < 1 || ctas < 1 || tiles < 1) return splits;\n"
      "  // One wave, and too few tiles for more splits: nothing to guard (most lookups end here).\n"
      "  if (ctas * splits <= kSlots && tiles <= (long long)(kWaveGuardMinTilesPerSplit - 1) * (splits + 1)) return splits;\n"
      "  if (splits == 1) {{\n"
      "    // One split, the commonest answer at many CTAs: no count below it, so the search above alone,\n"
      "    // without the general path's bound and fewer-splits step, gives the same answers in fewer\n"
      "    // instructions (the bound only ever skips a search that finds nothing).\n"
      "    using Int = unsigned long long;\n"
      "    const Int by_tiles = Int(tiles - 1) / Int(kWaveGuardMinTilesPerSplit - 1);\n"
      "    const Int by_factor = Int(kWaveGuardMoreFactor < max_splits ? kWaveGuardMoreFactor : max_splits);\n"
      "    const Int reach = by_factor < by_tiles ? by_factor : by_tiles;\n"
      "    const Int cost = (Int(ctas) + kSlots - 1) / kSlots * (Int(tiles) + kWaveGuardWaveOverheadTiles);\n"
      "    int best = 1;\n"
      "    Int best_cost = cost;\n"
      "    for (int shift = 1; (Int(1) << shift) <= reach; ++shift) {{\n"
      "      for (int times_three = 0; times_three < 2; ++times_three) {{  // 2^shift, then 3 x 2^(shift - 1)\n"
      "        const Int candidate = times_three ? Int(3) << (shift - 1) : Int(1) << shift;\n"
      "        if (candidate > reach) break;\n"
      "        Int waves = 0;\n"
      "        const Int candidate_cost = ladder_wave_cost<Int, Int(kSlots)>(times_three ? shift - 1 : shift,\n"
      "                                                                      times_three != 0, Int(ctas), Int(tiles), waves);\n"
      "        if (cheaper(candidate_cost, cost) && candidate_cost < best_cost) {{\n"
      "          best = (int)candidate;\n"
      "          best_cost = candidate_cost;\n"
      "        }}\n"
      "      }}\n"
      "    }}\n"
      "    return best;\n"
      "  }}\n"
      "  return ctas <= (1LL << 20) && splits <= (1 << 9) && max_splits <= (1 << 11) && ctas * tiles <= (1LL << 30)\n"
      "             ? wave_guard_in<unsigned, unsigned(kSlots)>(splits, (unsigned)ctas, (unsigned)tiles, max_splits)\n"
      "             : wave_guard_in<unsigned long long, (unsigned long long)kSlots>(\n"
      "                   splits, (unsigned long long)ctas, (unsigned long long)tiles, max_splits);\n"
      "}}\n"
      "\n"
      "// Whether `splits` put a last wave of at most kWaveGuardSparseWavePercent of the slots behind the\n"
      "// others, every CTA of it a full-length split (splits are the grid's slow axis: the last wave\n"
      "// starts inside split (waves - 1) x slots / ctas). At a measured CTA count only such a spill is\n"
      "// guarded: the lengths that decided the cell split otherwise.\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr bool spills_sparse_wave_of_full_splits(int splits, long long ctas,\n"
      "                                                                            long long tokens, long long slots) {{\n"
      "  const long long tiles = tokens <= 0 ? 0 : (tokens + 63) / 64;\n"
      "  if (splits < 1 || ctas < 1 || tiles < 1) return false;\n"
      "  const long long per = (tiles + splits - 1) / splits;\n"
      "  const long long live = (tiles + per - 1) / per;\n"
      "  const long long waves = (ctas * live + slots - 1) / slots;\n"
      "  if (waves < 2) return false;\n"
      "  const bool full_length = (waves - 1) * slots / ctas < live - 1 || tiles - (live - 1) * per == per;\n"
      "  return full_length && (ctas * live - (waves - 1) * slots) * 100 <= slots * kWaveGuardSparseWavePercent;\n"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int guard_unmeasured(int splits, long long ctas, int head_dim, int page_size,\n"
      "                                                          long long tokens, int max_splits) {{\n"
      "  if (kWaveGuardMarginPercent < 0) return splits;\n"
      "  // The arithmetic first: it leaves most answers alone, and then the search is not needed.\n"
      "  const long long slots = head_dim <= 128 ? {slots_small} : {slots_large};  // resident CTAs per SM\n"
      "  const int guarded = head_dim <= 128 ? wave_guard<{guard_small}>(splits, ctas, tokens, max_splits)\n"
      "                                      : wave_guard<{guard_large}>(splits, ctas, tokens, max_splits);\n"
      "  if (guarded == splits) return splits;\n"
      "  if (measured_ctas(head_dim_class(head_dim) * kLayoutClasses + layout_class(page_size), ctas) &&\n"
      "      !spills_sparse_wave_of_full_splits(splits, ctas, tokens, slots))\n"
      "    return splits;\n"
      "  return guarded;\n"
      "}}\n"
      "\n",
      fmt::arg("planes", table.measured_ctas.size()), fmt::arg("width", widest + 1), fmt::arg("rows", rows),
      fmt::arg("slots_small", slots_expression(table.occupancy.up_to_head_dim_128, "LL")),
      fmt::arg("slots_large", slots_expression(table.occupancy.above_head_dim_128, "LL")),
      fmt::arg("guard_small", slots_expression(table.occupancy.up_to_head_dim_128, "")),
      fmt::arg("guard_large", slots_expression(table.occupancy.above_head_dim_128, "")));
}

EmittedTable emit_table(const SplitTable& table, std::string_view name, std::string_view unit) {
  const TableGrid& g = table.grid;
  int max_value = 0;
  for (int v : table.splits) max_value = std::max(max_value, v);
  const char* value_type = max_value <= 255 ? "std::uint8_t" : "std::uint16_t";

  std::string rows;
  std::vector<int> row_of(std::size_t(g.head_dim_classes()) * g.layout_classes() * g.length_buckets);
  int row_count = 0;
  std::string column_header = "      //  CTAs:";
  for (int x = 0; x < g.cta_buckets; ++x) {
    column_header += fmt::format("{:>4}", compact_count(cta_bucket_center(g.cta_bucket_min + x, g.cta_buckets_per_octave)));
    if (x + 1 < g.cta_buckets) column_header += ",";
  }
  for (int hd = 0; hd < g.head_dim_classes(); ++hd) {
    for (int lay = 0; lay < g.layout_classes(); ++lay) {
      rows += fmt::format("      // head_dim {}, {}\n", g.head_dims[std::size_t(hd)], layout_class_name(g, lay));
      rows += column_header + "\n";
      int y = 0;
      while (y < g.length_buckets) {
        int end = y;
        const auto same_row = [&](int a, int b) {
          for (int x = 0; x < g.cta_buckets; ++x) {
            if (table.splits[table.index(hd, lay, a, x)] != table.splits[table.index(hd, lay, b, x)]) return false;
          }
          return true;
        };
        while (end + 1 < g.length_buckets && same_row(y, end + 1)) ++end;
        std::string values;
        for (int x = 0; x < g.cta_buckets; ++x) {
          values += fmt::format("{:>3}{}", table.splits[table.index(hd, lay, y, x)], x + 1 < g.cta_buckets ? ", " : "");
        }
        rows += fmt::format("      {{ {}}},  // row {}: {}\n", values, row_count, bucket_range(g, y, end, unit));
        for (int yy = y; yy <= end; ++yy) {
          row_of[(std::size_t(hd) * g.layout_classes() + lay) * g.length_buckets + yy] = row_count;
        }
        ++row_count;
        y = end + 1;
      }
    }
  }

  const char* index_type = row_count <= 255 ? "std::uint8_t" : "std::uint16_t";
  std::string row_index;
  for (int hd = 0; hd < g.head_dim_classes(); ++hd) {
    row_index += fmt::format("      {{  // head_dim {}\n", g.head_dims[std::size_t(hd)]);
    for (int lay = 0; lay < g.layout_classes(); ++lay) {
      std::vector<int> ids;
      for (int y = 0; y < g.length_buckets; ++y) {
        ids.push_back(row_of[(std::size_t(hd) * g.layout_classes() + lay) * g.length_buckets + y]);
      }
      row_index += fmt::format("          {{{}}},  // {}\n", join_ints(ids, ", "), lay == 0 ? "contiguous" : layout_class_name(g, lay));
    }
    row_index += "      },\n";
  }

  EmittedTable out;
  out.function_name = std::string(name) + "_splits";
  out.text = fmt::format(
      "// Split counts of the `{name}` table. kRows holds one row per run of identical\n"
      "// neighbouring {unit} buckets of a plane, one column per CTA bucket; kRowOf maps\n"
      "// [head_dim class][layout class][{unit} bucket] to its row.\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int {fn}(int head_dim_class, int layout_class, int length_index,\n"
      "{indent}int cta_index) {{\n"
      "  static constexpr {vt} kRows[{rows}][{cols}] = {{\n"
      "{row_text}"
      "  }};\n"
      "  static constexpr {it} kRowOf[{hdc}][{lc}][{lb}] = {{\n"
      "{index_text}"
      "  }};\n"
      "  return kRows[kRowOf[head_dim_class][layout_class][length_index]][cta_index];\n"
      "}}\n",
      fmt::arg("name", name), fmt::arg("unit", unit), fmt::arg("fn", out.function_name),
      fmt::arg("indent", std::string(std::string_view("SPLITKV_GENERATED_HOST_DEVICE inline int (").size() +
                                         out.function_name.size(), ' ')),
      fmt::arg("vt", value_type), fmt::arg("rows", row_count), fmt::arg("cols", g.cta_buckets),
      fmt::arg("row_text", rows), fmt::arg("it", index_type), fmt::arg("hdc", g.head_dim_classes()),
      fmt::arg("lc", g.layout_classes()), fmt::arg("lb", g.length_buckets),
      fmt::arg("index_text", row_index));
  return out;
}

std::string sum_of_comparisons(std::string_view variable, const std::vector<int>& thresholds) {
  std::string out;
  for (int t : thresholds) out += fmt::format(" + ({} >= {} ? 1 : 0)", variable, t);
  return out;
}

// R threshold comparisons of cta_bucket's mantissa, as literals (device code reads no arrays).
std::string mantissa_comparisons(int buckets_per_octave) {
  std::string out;
  for (std::uint64_t t : cta_bucket_thresholds(buckets_per_octave)) out += fmt::format(" + (m >= {}ULL ? 1 : 0)", t);
  return out;
}

// Body of head_dim_class: a sum of comparisons, or a single class that ignores its argument.
std::string head_dim_class_body(const std::vector<int>& thresholds) {
  if (thresholds.empty()) return "  static_cast<void>(head_dim);  // one head_dim class\n  return 0;\n";
  return fmt::format("  return 0{};\n", sum_of_comparisons("head_dim", thresholds));
}

// A call site's CTAs rescaled to this table's SM count, so that the table sees as many CTAs per SM.
constexpr std::string_view kRescaledCtas =
    "  const long long ctas = num_SMs > 0 ? (work * kSmCount + num_SMs / 2) / num_SMs : work;\n";

// The lookup with the arguments of the call site the table's kernel is called from
// (peer_kernels.hpp): FlashAttention 2's for our own kernel, else the peer's.
std::string call_site_text(const HeaderProvenance& p) {
  const PeerKernel* peer = find_peer_kernel(p.kernel);
  switch (peer ? peer->call_site : CallSite::flash_attention) {
    case CallSite::flash_attention_3:
      return fmt::format(
          "// Drop-in for FlashAttention 3's get_num_splits(params) / num_splits_heuristic: this table,\n"
          "// fitted on FA3's own decode kernel at fixed split counts, asked about max_seqlen_k. Pass the\n"
          "// batch's REAL max length: the table is keyed on it, while FA3's rule sees seqlen_k, the cache\n"
          "// capacity, unless told otherwise (with only the capacity known, call\n"
          "// determine_num_splits_capacity_only). CTAs before splitting are batch * num_heads_k (FA3 packs\n"
          "// a query group into one CTA, so num_heads does not enter), rescaled to this table's SM count\n"
          "// when num_SMs differs ({sms}). The contiguous plane is used: the signature carries no page\n"
          "// size. FA3's prepare kernel may still give a sequence shorter than max_seqlen_k fewer splits.\n"
          "SPLITKV_GENERATED_HOST_DEVICE inline int num_splits_heuristic_fa3(int batch, int num_heads, int num_heads_k,\n"
          "                                                                  int head_size, int max_seqlen_k,\n"
          "                                                                  int num_SMs) {{\n"
          "  static_cast<void>(num_heads);  // the table keys on batch * num_heads_k\n"
          "  const long long work = detail::ctas_before_splitting(batch, num_heads_k);\n"
          "{rescaled}"
          "  return detail::real_length_lookup(ctas, head_size, max_seqlen_k, 0);\n"
          "}}\n",
          fmt::arg("sms", p.sm_count), fmt::arg("rescaled", kRescaledCtas));
    case CallSite::flashinfer:
      return fmt::format(
          "// What num_splits_flashinfer returns: the table's split count for the longest sequence and the\n"
          "// kv chunk size in pages that cuts it so, ceil(max_pages / num_splits) (with that chunk the\n"
          "// longest sequence gets ceil(max_pages / kv_chunk_pages) <= num_splits chunks).\n"
          "struct FlashInferSplitKv {{\n"
          "  int num_splits = 1;\n"
          "  int kv_chunk_pages = 1;\n"
          "}};\n"
          "\n"
          "// Drop-in for FlashInfer's decode planning, which splits the KV cache into chunks of pages: this\n"
          "// table, fitted on FlashInfer's decode kernel at fixed split counts, asked about the batch's\n"
          "// longest kv length in tokens (max_kv_len; its pages are ceil(max_kv_len / page_size)). CTAs\n"
          "// before splitting are batch * num_kv_heads (a CTA holds a query group, so num_qo_heads does not\n"
          "// enter), rescaled to this table's SM count when num_SMs differs ({sms}). Give kv_chunk_pages to\n"
          "// the plan as its fixed split size (pages) where the FlashInfer version takes one.\n"
          "SPLITKV_GENERATED_HOST_DEVICE inline FlashInferSplitKv num_splits_flashinfer(int batch, int num_qo_heads,\n"
          "                                                                            int num_kv_heads, int head_dim,\n"
          "                                                                            int page_size, int max_kv_len,\n"
          "                                                                            int num_SMs) {{\n"
          "  static_cast<void>(num_qo_heads);  // the table keys on batch * num_kv_heads\n"
          "  const long long work = detail::ctas_before_splitting(batch, num_kv_heads);\n"
          "{rescaled}"
          "  const int page = page_size > 0 ? page_size : 1;\n"
          "  const long long pages = max_kv_len > 0 ? ((long long)max_kv_len + page - 1) / page : 1;\n"
          "  FlashInferSplitKv out;\n"
          "  out.num_splits = detail::real_length_lookup(ctas, head_dim, max_kv_len, page);\n"
          "  out.kv_chunk_pages = (int)((pages + out.num_splits - 1) / out.num_splits);\n"
          "  return out;\n"
          "}}\n",
          fmt::arg("sms", p.sm_count), fmt::arg("rescaled", kRescaledCtas));
    case CallSite::flash_attention:
      break;
  }
  return fmt::format(
      "// Drop-in for FlashAttention's num_splits heuristic call site. seqlen_k is taken as the\n"
      "// cache CAPACITY, because that is what FlashAttention passes from its KV-cache path\n"
      "// (kcache.size(1), or block_table.size(1) * page_size); callers that pass a real max length\n"
      "// should call determine_num_splits_real_length instead. The work count follows FA: with one\n"
      "// query token and grouped heads the group folds into M (batch * num_heads_k * ceil(group / 64)),\n"
      "// otherwise batch * num_heads * ceil(seqlen_q / 64). It is rescaled to this table's SM\n"
      "// count when num_SMs differs ({sms}), so that the table sees the same CTAs per SM. The\n"
      "// contiguous plane is used: FA's signature carries no page size.\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int num_splits_heuristic_fa(int batch, int num_heads, int num_heads_k,\n"
      "                                                                 int head_size, int seqlen_q, int seqlen_k,\n"
      "                                                                 int num_SMs) {{\n"
      "  const int heads_k = num_heads_k > 0 ? num_heads_k : 1;\n"
      "  const int group = num_heads > heads_k ? num_heads / heads_k : 1;\n"
      "  const long long rows = seqlen_q > 0 ? seqlen_q : 1;\n"
      "  const long long work = (rows == 1 && group > 1)\n"
      "                             ? detail::ctas_before_splitting(batch, heads_k) * ((group + 63) / 64)\n"
      "                             : detail::ctas_before_splitting(batch, num_heads > 0 ? num_heads : 1) * ((rows + 63) / 64);\n"
      "{rescaled}"
      "  return detail::capacity_lookup(ctas, head_size, seqlen_k, 0);\n"
      "}}\n",
      fmt::arg("sms", p.sm_count), fmt::arg("rescaled", kRescaledCtas));
}

}  // namespace

std::string short_gpu_name(std::string_view gpu_name) {
  std::string lower;
  for (char c : gpu_name) lower += char(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view vendor : {"nvidia ", "amd "}) {
    if (lower.rfind(vendor, 0) == 0) lower = lower.substr(vendor.size());
  }
  std::string out;
  for (char c : lower) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) out += c;
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty()) out = "gpu";
  if (out.front() >= '0' && out.front() <= '9') out = "gpu_" + out;
  return out;
}

void check_short_name(const std::string& name) {
  bool ok = !name.empty() && !(name.front() >= '0' && name.front() <= '9');
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) {
    throw InputError(fmt::format("--gpu-name \"{}\": must be lower case letters, digits and '_', not "
                                 "starting with a digit (it names a C++ namespace and the header file)",
                                 name));
  }
}

std::string default_header_path(const std::string& short_name) {
  return fmt::format("heuristics/generated/num_splits_{}.hpp", short_name);
}

HeaderProvenance provenance_of(const Measurements& m, const std::string& short_name,
                               const std::string& output_path, const std::string& tool_version) {
  HeaderProvenance p;
  p.gpu_name = m.gpu;
  p.short_name = short_name;
  p.sm_count = m.sm_count;
  p.sm_count_source = m.sm_count_source;
  p.input_path = m.source_display;
  p.input_arguments = command_line_inputs(m);
  p.input_sha256 = m.sha256;
  p.measured_at = m.measured_at;
  p.kernel = m.kernel;
  p.kv_dtype = m.kv_dtype;
  p.kv_dtype_argument = kv_dtype_argument(m);
  p.tool_version = tool_version;
  p.output_path = display_path(output_path);
  p.counts = m.counts;
  return p;
}

std::string emit_num_splits_header(const FittedHeuristic& fit, const HeaderProvenance& p) {
  const SplitTable& real = fit.real_length;
  const SplitTable& cap = fit.capacity_only;
  const EmittedTable real_table = emit_table(real, "real_length", "length");
  const EmittedTable cap_table = emit_table(cap, "capacity", "capacity");

  const std::string& input_arguments = p.input_arguments.empty() ? p.input_path : p.input_arguments;
  const PeerKernel* peer = find_peer_kernel(p.kernel);
  std::string out;
  out += fmt::format(
      "// num_splits_{short}.hpp: {subject}.\n"
      "//\n"
      "// GENERATED by `splitkv fit`; do not edit. Regenerate (or verify with --check) with\n"
      "//   splitkv fit {input_arguments}{kernel_argument}{kv_dtype_argument} --out {output}\n"
      "//\n"
      "// Provenance\n"
      "//   gpu        {gpu}, {sms} SMs (SM count from the {sms_source})\n"
      "//   input      {input}\n"
      "//   sha256     {sha}\n"
      "//   measured   {measured}\n"
      "//   kernel     {kernel} (the kernel whose timings were fitted)\n"
      "{kv_cache_line}"
      "//   tool       splitkv {version}\n"
      "//   rows       {rows}\n"
      "//   shapes     {shapes} measured shapes\n"
      "//\n"
      "// How a lookup works (rules: heuristics/FIT.md)\n"
      "//   x = CTAs before splitting, batch * num_kv_heads, in buckets of 1/{r} octave:\n"
      "//       round({r} * log2(x)), halves up (boundaries at geometric midpoints), because how\n"
      "//       whole the CTA waves are on the SMs moves the best split between powers of two;\n"
      "//   y = tokens per sequence as a log2 bucket: the max real length (table `real_length`)\n"
      "//       or, when the caller knows none, the cache capacity (table `capacity`);\n"
      "//   the plane is picked by head_dim class ({hd_list}; boundaries at geometric\n"
      "//       midpoints) and layout class (contiguous, or paged);\n"
      "//   x and y beyond the table's edges clamp to the edge bucket, except that below the fewest\n"
      "//       CTAs measured the answer doubles per missing octave (same CTAs after splitting);\n"
      "//   the answer is capped at the 64-token tiles of the length (more splits hold no work);\n"
      "//   at a batch * kv_heads the sweep never measured, the wave guard may lower it to the most\n"
      "//   splits that need one wave of resident CTAs fewer, or raise it (up to kWaveGuardMoreFactor\n"
      "//   times) where that fills the last wave better (kWaveGuardMarginPercent), counting each\n"
      "//   wave as its tiles per split plus kWaveGuardWaveOverheadTiles; at a measured batch *\n"
      "//   kv_heads it does so only where the answer spills a last wave of full-length splits\n"
      "//   holding at most kWaveGuardSparseWavePercent of the resident CTAs.\n"
      "// Each cell holds the split count with the lowest geometric-mean time over the measured\n"
      "// shapes in that cell (relative to each shape's fastest); cells no shape fell in copy\n"
      "// their nearest measured neighbour.\n"
      "#pragma once\n"
      "\n"
      "#include <cstdint>\n"
      "\n"
      "#ifndef SPLITKV_GENERATED_HOST_DEVICE\n"
      "#if defined(__CUDACC__)\n"
      "#define SPLITKV_GENERATED_HOST_DEVICE __host__ __device__\n"
      "#else\n"
      "#define SPLITKV_GENERATED_HOST_DEVICE\n"
      "#endif\n"
      "#endif\n"
      "\n"
      "namespace splitkv::generated::{short} {{\n"
      "\n"
      "inline constexpr char kGpuName[] = \"{gpu}\";\n"
      "inline constexpr int kSmCount = {sms};\n"
      "inline constexpr char kInputSha256[] = \"{sha}\";\n"
      "{kernel_constant}"
      "{kv_dtype_constant}"
      "\n"
      "// What the host knows about one decode step.\n"
      "struct ShapeInfo {{\n"
      "  int batch = 1;\n"
      "  int num_heads = 1;       // query heads\n"
      "  int num_kv_heads = 1;\n"
      "  int head_dim = 128;\n"
      "  int max_seqlen = 0;      // longest real length in the batch; 0 = unknown: use the capacity\n"
      "  int cache_capacity = 0;  // tokens addressable per sequence (FlashAttention's seqlen_k)\n"
      "  int page_size = 0;       // tokens per page; 0 = contiguous cache\n"
      "}};\n"
      "\n",
      fmt::arg("short", p.short_name), fmt::arg("gpu", p.gpu_name), fmt::arg("sms", p.sm_count),
      fmt::arg("subject", (peer ? fmt::format("num_splits for {}'s decode kernel (`{}` rows) on {} ({} SMs)",
                                              peer->title, p.kernel, p.gpu_name, p.sm_count)
                                : fmt::format("split-KV decode num_splits heuristic for {} ({} SMs)", p.gpu_name,
                                              p.sm_count)) +
                              (p.kv_dtype == KvDtypeClass::sixteen_bit
                                   ? std::string()
                                   : fmt::format(", {} KV cache", to_string(p.kv_dtype)))),
      fmt::arg("kernel_argument", kernel_argument(p.kernel)), fmt::arg("kv_dtype_argument", p.kv_dtype_argument),
      // A 16-bit table says nothing about its cache: every header written before the fp8 cache
      // existed is one, and stays byte for byte what its CSV gives.
      fmt::arg("kv_cache_line",
               p.kv_dtype == KvDtypeClass::sixteen_bit
                   ? std::string()
                   : fmt::format("//   kv cache   {} (the K/V element type of the rows fitted; q and out bf16)\n",
                                 to_string(p.kv_dtype))),
      fmt::arg("kv_dtype_constant",
               p.kv_dtype == KvDtypeClass::sixteen_bit
                   ? std::string()
                   : fmt::format("inline constexpr char kKvDtype[] = \"{}\";  // the KV cache this table is for; "
                                 "none: bf16 or fp16\n",
                                 to_string(p.kv_dtype))),
      fmt::arg("kernel_constant",
               is_own_kernel(p.kernel)
                   ? std::string()
                   : fmt::format("inline constexpr char kKernel[] = \"{}\";  // the kernel whose rows were fitted\n",
                                 p.kernel)),
      fmt::arg("sms_source", p.sm_count_source.empty() ? "caller" : p.sm_count_source),
      fmt::arg("input", p.input_path), fmt::arg("input_arguments", input_arguments), fmt::arg("output", p.output_path),
      fmt::arg("sha", p.input_sha256),
      fmt::arg("measured", p.measured_at.empty() ? "unknown (no sidecar next to the CSV)" : p.measured_at + " (sidecar)"),
      fmt::arg("kernel", p.kernel), fmt::arg("version", p.tool_version), fmt::arg("rows", counts_line(p.counts)),
      fmt::arg("shapes", p.counts.shapes), fmt::arg("hd_list", join_ints(real.grid.head_dims, ", ")),
      fmt::arg("r", real.grid.cta_buckets_per_octave));

  // Axes. Both tables share head_dim and layout classes and the CTA axis by construction
  // (fit_heuristic fits them on the same shapes), but each carries its own constants.
  const auto axis_constants = [&](const SplitTable& t, std::string_view prefix) {
    return fmt::format(
        "inline constexpr int k{p}CtaBucketMin = {a};   // first CTA bucket: {a0} CTAs\n"
        "inline constexpr int k{p}CtaBuckets = {b};\n"
        "inline constexpr int k{p}LengthLog2Min = {c};  // first length bucket: {c0} tokens\n"
        "inline constexpr int k{p}LengthBuckets = {d};\n"
        "inline constexpr int k{p}MaxSplits = {m};       // most splits measured\n",
        fmt::arg("p", prefix), fmt::arg("a", t.grid.cta_bucket_min),
        fmt::arg("a0", cta_bucket_center(t.grid.cta_bucket_min, t.grid.cta_buckets_per_octave)),
        fmt::arg("b", t.grid.cta_buckets), fmt::arg("c", t.grid.length_log2_min),
        fmt::arg("c0", std::int64_t(1) << t.grid.length_log2_min), fmt::arg("d", t.grid.length_buckets),
        fmt::arg("m", t.max_splits));
  };
  if (real.grid.cta_buckets_per_octave != cap.grid.cta_buckets_per_octave)
    throw std::logic_error("emit_num_splits_header: the two tables bucket CTAs differently");
  out += "namespace detail {\n\n";
  out += fmt::format("inline constexpr int kCtaBucketsPerOctave = {};  // R: CTA buckets per doubling\n",
                     real.grid.cta_buckets_per_octave);
  out += axis_constants(real, "Real");
  out += axis_constants(cap, "Capacity");
  out += fmt::format("inline constexpr int kHeadDimClasses = {};  // head_dim {}\n", real.grid.head_dim_classes(),
                     join_ints(real.grid.head_dims, ", "));
  std::string layout_names;
  for (int lay = 0; lay < real.grid.layout_classes(); ++lay) {
    layout_names += (lay ? "; " : "") + layout_class_name(real.grid, lay);
  }
  out += fmt::format("inline constexpr int kLayoutClasses = {};   // {}\n", real.grid.layout_classes(), layout_names);
  const int guard_margin = real.sm_count > 0 && real.wave_guard_margin_percent >= 0 ? real.wave_guard_margin_percent : -1;
  out += fmt::format("inline constexpr int kWaveGuardMarginPercent = {};  // < 0: no wave guard (heuristics/FIT.md)\n",
                     guard_margin);
  out += fmt::format("inline constexpr int kWaveGuardMoreFactor = {};  // the guard asks up to this many times the splits\n",
                     kWaveGuardMoreFactor);
  out += fmt::format("inline constexpr int kWaveGuardMinTilesPerSplit = {};  // ... keeping this many 64-token tiles each\n",
                     kWaveGuardMinTilesPerSplit);
  out += fmt::format("inline constexpr int kWaveGuardWaveOverheadTiles = {};  // a wave's cost beyond its tiles, in tiles\n",
                     kWaveGuardWaveOverheadTiles);
  out += fmt::format(
      "inline constexpr int kWaveGuardSparseWavePercent = {};  // at measured CTA counts: a last wave this sparse\n\n",
      kWaveGuardSparseWavePercent);

  out += fmt::format(
      "// floor(log2(v)), 0 for v = 0: one __builtin_clzll on GCC and Clang hosts, portable shifts on the\n"
      "// device and elsewhere (the same results).\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int floor_log2(unsigned long long v) {{\n"
      "#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__))\n"
      "  // One instruction on the host (GCC and Clang evaluate it in constant expressions too).\n"
      "  return v == 0 ? 0 : 63 - __builtin_clzll(v);\n"
      "#else\n"
      "  int r = 0;\n"
      "  const int s32 = (v >> 32) != 0 ? 32 : 0; v >>= s32; r += s32;\n"
      "  const int s16 = (v >> 16) != 0 ? 16 : 0; v >>= s16; r += s16;\n"
      "  const int s8 = (v >> 8) != 0 ? 8 : 0; v >>= s8; r += s8;\n"
      "  const int s4 = (v >> 4) != 0 ? 4 : 0; v >>= s4; r += s4;\n"
      "  const int s2 = (v >> 2) != 0 ? 2 : 0; v >>= s2; r += s2;\n"
      "  return r + ((v >> 1) != 0 ? 1 : 0);\n"
      "#endif\n"
      "}}\n"
      "\n"
      "// round(log2(value)) with halves up: value >= 2^i * sqrt(2) belongs to bucket i + 1.\n"
      "// Values <= 1 give 0; values above 2^30 count as 2^30 (far beyond every table edge).\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int log2_bucket(long long value) {{\n"
      "  const unsigned long long v = value <= 1 ? 1ULL\n"
      "                               : (value >= (1LL << 30) ? (1ULL << 30) : (unsigned long long)value);\n"
      "  const int i = floor_log2(v);\n"
      "  return i + (v * v >= (1ULL << (2 * i + 1)) ? 1 : 0);\n"
      "}}\n"
      "\n"
      "// round(R * log2(value)) with halves up, for R = kCtaBucketsPerOctave: with value = 2^i * f\n"
      "// (1 <= f < 2), f's 30-bit mantissa is compared with 2^((j - 1/2) / R) for j = 1..R. Values\n"
      "// <= 1 give 0; values above 2^30 count as 2^30.\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int cta_bucket(long long value) {{\n"
      "  const unsigned long long v = value <= 1 ? 1ULL\n"
      "                               : (value >= (1LL << 30) ? (1ULL << 30) : (unsigned long long)value);\n"
      "  const int i = floor_log2(v);\n"
      "  const unsigned long long m = (v << 30) >> i;\n"
      "  return kCtaBucketsPerOctave * i{cta_sum};\n"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int clamp_index(int value, int count) {{\n"
      "  return value < 0 ? 0 : (value >= count ? count - 1 : value);\n"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int head_dim_class(int head_dim) {{\n"
      "{hd_body}"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int layout_class(int page_size) {{\n"
      "  return clamp_index((page_size > 0 ? 1 : 0){page_sum}, kLayoutClasses);\n"
      "}}\n"
      "\n"
      "// Below the fewest CTAs measured, keep batch * kv_heads * splits (the CTAs that fill the GPU)\n"
      "// where the table's edge had it: double the edge's answer per missing octave (rounded up), at\n"
      "// most max_splits.\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int scale_below_edge(int splits, int buckets_below, int max_splits) {{\n"
      "  const int octaves = buckets_below <= 0 ? 0 : (buckets_below + kCtaBucketsPerOctave - 1) / kCtaBucketsPerOctave;\n"
      "  const int shift = octaves >= 8 ? 8 : octaves;\n"
      "  return (splits << shift) < max_splits ? (splits << shift) : max_splits;\n"
      "}}\n"
      "\n"
      "// More splits than 64-token tiles hold no work; at least one split.\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr int cap_at_tiles(int splits, long long tokens) {{\n"
      "  const long long tiles = tokens <= 0 ? 0 : (tokens + 63) / 64;\n"
      "  return splits <= tiles ? splits : (tiles > 1 ? (int)tiles : 1);\n"
      "}}\n"
      "\n",
      fmt::arg("hd_body", head_dim_class_body(real.grid.head_dim_thresholds())),
      fmt::arg("page_sum", sum_of_comparisons("page_size", real.grid.page_size_thresholds())),
      fmt::arg("cta_sum", mantissa_comparisons(real.grid.cta_buckets_per_octave)));

  out += real_table.text + "\n" + cap_table.text + "\n";
  out += emit_measured_ctas(real);
  out += fmt::format(
      "SPLITKV_GENERATED_HOST_DEVICE inline int real_length_lookup(long long ctas, int head_dim, int max_seqlen,\n"
      "                                                            int page_size) {{\n"
      "  const int x = cta_bucket(ctas) - kRealCtaBucketMin;\n"
      "  const int y = clamp_index(log2_bucket(max_seqlen) - kRealLengthLog2Min, kRealLengthBuckets);\n"
      "  const int splits = real_length_splits(head_dim_class(head_dim), layout_class(page_size), y,\n"
      "                                        clamp_index(x, kRealCtaBuckets));\n"
      "  return guard_unmeasured(cap_at_tiles(scale_below_edge(splits, -x, kRealMaxSplits), max_seqlen), ctas,\n"
      "                          head_dim, page_size, max_seqlen, kRealMaxSplits);\n"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int capacity_lookup(long long ctas, int head_dim, int cache_capacity,\n"
      "                                                         int page_size) {{\n"
      "  const int x = cta_bucket(ctas) - kCapacityCtaBucketMin;\n"
      "  const int y = clamp_index(log2_bucket(cache_capacity) - kCapacityLengthLog2Min, kCapacityLengthBuckets);\n"
      "  const int splits = capacity_splits(head_dim_class(head_dim), layout_class(page_size), y,\n"
      "                                     clamp_index(x, kCapacityCtaBuckets));\n"
      "  return guard_unmeasured(cap_at_tiles(scale_below_edge(splits, -x, kCapacityMaxSplits), cache_capacity), ctas,\n"
      "                          head_dim, page_size, cache_capacity, kCapacityMaxSplits);\n"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE constexpr long long ctas_before_splitting(int batch, int num_kv_heads) {{\n"
      "  return (long long)(batch > 1 ? batch : 1) * (num_kv_heads > 1 ? num_kv_heads : 1);\n"
      "}}\n"
      "\n"
      "}}  // namespace detail\n"
      "\n"
      "// num_splits when the host knows the longest real length of the batch (max_seqlen > 0).\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int determine_num_splits_real_length(int batch, int num_kv_heads, int head_dim,\n"
      "                                                                          int max_seqlen, int page_size) {{\n"
      "  return detail::real_length_lookup(detail::ctas_before_splitting(batch, num_kv_heads), head_dim, max_seqlen,\n"
      "                                    page_size);\n"
      "}}\n"
      "\n"
      "// num_splits from the cache capacity alone, for hosts that know no real length. Fitted on\n"
      "// the same measurements keyed by capacity, so it is as good as capacity can be, not better.\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int determine_num_splits_capacity_only(int batch, int num_kv_heads,\n"
      "                                                                            int head_dim, int cache_capacity,\n"
      "                                                                            int page_size) {{\n"
      "  return detail::capacity_lookup(detail::ctas_before_splitting(batch, num_kv_heads), head_dim, cache_capacity,\n"
      "                                 page_size);\n"
      "}}\n"
      "\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int determine_num_splits_capacity_only(const ShapeInfo& shape) {{\n"
      "  return determine_num_splits_capacity_only(shape.batch, shape.num_kv_heads, shape.head_dim,\n"
      "                                            shape.cache_capacity, shape.page_size);\n"
      "}}\n"
      "\n"
      "// The entry point: the real-length table when max_seqlen is known, else the capacity table.\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline int determine_num_splits(const ShapeInfo& shape) {{\n"
      "  return shape.max_seqlen > 0\n"
      "             ? determine_num_splits_real_length(shape.batch, shape.num_kv_heads, shape.head_dim,\n"
      "                                                shape.max_seqlen, shape.page_size)\n"
      "             : determine_num_splits_capacity_only(shape);\n"
      "}}\n"
      "\n"
      "// One row of the num_splits = auto table (DecodeParams::auto_splits, the row of a batch of\n"
      "// `batch` max-length sequences): the real-length table's answer for every length bucket i\n"
      "// (lengths nearest 2^i in log scale, the kernels' length_bucket()), clamped to [1, 255].\n"
      "SPLITKV_GENERATED_HOST_DEVICE inline void fill_splits_by_length(int batch, int num_kv_heads, int head_dim,\n"
      "                                                                int page_size, unsigned char* splits,\n"
      "                                                                int buckets) {{\n"
      "  for (int i = 0; i < buckets; ++i) {{\n"
      "    const int length = i < 30 ? (1 << i) : (1 << 30);\n"
      "    const int s = determine_num_splits_real_length(batch, num_kv_heads, head_dim, length, page_size);\n"
      "    splits[i] = (unsigned char)(s > 255 ? 255 : s);\n"
      "  }}\n"
      "}}\n"
      "\n"
      "{call_site}"
      "\n"
      "}}  // namespace splitkv::generated::{short}\n",
      fmt::arg("call_site", call_site_text(p)), fmt::arg("short", p.short_name));
  return out;
}

TextDifference first_difference(std::string_view expected, std::string_view actual) {
  // Split into lines; a final line without '\n' is marked so that a missing last newline
  // shows as a difference too.
  const auto lines = [](std::string_view text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) {
        out.emplace_back(std::string(text.substr(start)) + " <no newline at end of file>");
        break;
      }
      out.emplace_back(text.substr(start, end - start));
      start = end + 1;
    }
    return out;
  };
  const std::vector<std::string> a = lines(expected), b = lines(actual);
  TextDifference d;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string la = i < a.size() ? a[i] : "<end of file>";
    const std::string lb = i < b.size() ? b[i] : "<end of file>";
    if (la != lb) {
      d.line = int(i) + 1;
      d.expected = la;
      d.actual = lb;
      return d;
    }
  }
  return d;
}

}  // namespace splitkv::heuristics
