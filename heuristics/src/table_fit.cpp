#include "splitkv/heuristics/table_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "splitkv/heuristics/measured_time.hpp"
#include "splitkv/split_partition.hpp"
#include "splitkv/tuner/sweep_point.hpp"

namespace splitkv::heuristics {
namespace {

constexpr std::int64_t kBucketValueCap = std::int64_t(1) << 30;

double log_ratio(const MeasuredShape& shape, const OracleChoice& oracle, int splits) {
  return std::log(time_at_splits(shape, splits).time_us / oracle.fastest_time_us);
}

// Sum of the log ratios of `splits` over some of the shapes (indices into shapes and oracles);
// callers divide by the count where they need the mean.
double sum_log_ratio(const std::vector<MeasuredShape>& shapes, const std::vector<OracleChoice>& oracles,
                     const std::vector<std::size_t>& members, int splits) {
  double sum = 0;
  for (std::size_t i : members) sum += log_ratio(shapes[i], oracles[i], splits);
  return sum;
}

}  // namespace

int log2_bucket(std::int64_t value) {
  if (value <= 1) return 0;
  const std::uint64_t v = std::uint64_t(std::min(value, kBucketValueCap));
  const int i = floor_log2(static_cast<unsigned>(v));  // v <= 2^30
  // v >= 2^i * sqrt(2)  <=>  v^2 >= 2^(2i+1); v <= 2^30 keeps v^2 inside 64 bits.
  return i + (v * v >= (std::uint64_t(1) << (2 * i + 1)) ? 1 : 0);
}

std::vector<std::uint64_t> cta_bucket_thresholds(int buckets_per_octave) {
  if (buckets_per_octave < 1 || buckets_per_octave > 16)
    throw std::invalid_argument("cta_buckets_per_octave must be in 1..16");
  std::vector<std::uint64_t> out;
  for (int j = 1; j <= buckets_per_octave; ++j) {
    const long double exact = std::ldexp(std::pow(2.0L, (j - 0.5L) / buckets_per_octave), 30);
    out.push_back(std::uint64_t(std::ceil(exact)));
  }
  return out;
}

int cta_bucket(std::int64_t value, int buckets_per_octave) {
  if (buckets_per_octave == 1) return log2_bucket(value);
  static const std::vector<std::vector<std::uint64_t>> all_thresholds = [] {
    std::vector<std::vector<std::uint64_t>> out(17);
    for (int r = 1; r <= 16; ++r) out[std::size_t(r)] = cta_bucket_thresholds(r);
    return out;
  }();
  if (buckets_per_octave < 1 || buckets_per_octave > 16)
    throw std::invalid_argument("cta_buckets_per_octave must be in 1..16");
  const std::vector<std::uint64_t>& thresholds = all_thresholds[std::size_t(buckets_per_octave)];
  if (value <= 1) return 0;
  const std::uint64_t v = std::uint64_t(std::min(value, kBucketValueCap));
  const int i = floor_log2(static_cast<unsigned>(v));  // v <= 2^30
  const std::uint64_t mantissa = (v << 30) >> i;
  int bucket = buckets_per_octave * i;
  for (std::uint64_t t : thresholds) bucket += mantissa >= t ? 1 : 0;
  return bucket;
}

std::int64_t cta_bucket_center(int bucket, int buckets_per_octave) {
  return std::int64_t(std::llround(std::pow(2.0, double(bucket) / buckets_per_octave)));
}

int octaves_below(int buckets_below, int buckets_per_octave) {
  return buckets_below <= 0 ? 0 : (buckets_below + buckets_per_octave - 1) / buckets_per_octave;
}

namespace {

// `count` splits of `tiles` 64-token tiles over `ctas` rows: tiles per split, the splits that hold
// work, and the waves of `slots` resident CTAs they fill.
struct SplitWaves {
  std::int64_t per = 0, live = 0, waves = 0;
};
SplitWaves split_waves(std::int64_t count, std::int64_t ctas, std::int64_t tiles, std::int64_t slots) {
  SplitWaves w;
  w.per = (tiles + count - 1) / count;
  w.live = (tiles + w.per - 1) / w.per;
  w.waves = (ctas * w.live + slots - 1) / slots;
  return w;
}

std::int64_t tiles_of(std::int64_t tokens) { return (std::max<std::int64_t>(tokens, 0) + 63) / 64; }

}  // namespace

int scale_below_edge_and_cap(int cell_splits, int octaves_below, int max_splits, std::int64_t tokens) {
  const std::int64_t scaled =
      std::min<std::int64_t>(std::int64_t(cell_splits) << std::clamp(octaves_below, 0, 8), max_splits);
  const std::int64_t tiles = tiles_of(tokens);
  return int(std::max<std::int64_t>(1, std::min(scaled, tiles)));
}

int geometric_midpoint(int a, int b) {
  const std::int64_t product = std::int64_t(a) * b;
  std::int64_t t = std::int64_t(std::sqrt(double(product)));
  while (t * t < product) ++t;
  while (t > 0 && (t - 1) * (t - 1) >= product) --t;
  return int(t);
}

int resident_ctas_per_sm(int head_dim) { return KernelOccupancy{}.at(head_dim); }

int wave_guard(int splits, std::int64_t ctas, std::int64_t tokens, int slots, int margin_percent, int max_splits) {
  if (splits < 1 || ctas < 1 || slots < 1 || margin_percent < 0) return splits;
  const std::int64_t tiles = tiles_of(tokens);
  if (tiles < 1) return splits;
  // Waves of the splits that hold work, and their cost: waves x (tiles per split + a wave's overhead).
  auto waves_and_cost = [&](std::int64_t count, std::int64_t* cost) {
    const SplitWaves w = split_waves(count, ctas, tiles, slots);
    *cost = w.waves * (w.per + kWaveGuardWaveOverheadTiles);
    return w.waves;
  };
  auto cheaper = [&](std::int64_t candidate_cost, std::int64_t cost) {
    return candidate_cost * (100 + margin_percent) < cost * 100;
  };
  std::int64_t cost = 0;
  const std::int64_t waves = waves_and_cost(splits, &cost);
  // No count costs less than the work spread evenly, ctas x tiles / slots, plus the overhead of the
  // fewest waves any count needs, ceil(ctas / slots): when `splits` is within the margin of that,
  // nothing can beat it by more.
  const std::int64_t fewest_waves = (ctas + slots - 1) / slots;
  if (!cheaper(ctas * tiles + std::int64_t(kWaveGuardWaveOverheadTiles) * slots * fewest_waves, cost * slots))
    return splits;
  if (waves >= 2) {
    // The most splits that fit one wave fewer, rounded down to the counts sweeps time (2^k and
    // 3 x 2^(k-1): 1, 2, 3, 4, 6, 8, 12, ...), so that every answer is a measured one.
    const std::int64_t most = (waves - 1) * slots / ctas;  // < splits
    const std::int64_t power = most < 1 ? 0 : std::int64_t(1) << floor_log2(static_cast<unsigned>(most));
    const std::int64_t fewer = power >= 2 && power + power / 2 <= most ? power + power / 2 : power;
    std::int64_t fewer_cost = 0;
    if (fewer >= 1 && fewer < splits) {
      waves_and_cost(fewer, &fewer_cost);
      if (cheaper(fewer_cost, cost)) return int(fewer);
    }
  }
  // More splits, on the same ladder: a last wave that the count leaves poorly filled.
  std::int64_t best = splits, best_cost = cost;
  const std::int64_t reach = std::min<std::int64_t>(std::int64_t(splits) * kWaveGuardMoreFactor, max_splits);
  for (std::int64_t power = std::int64_t(1) << floor_log2(static_cast<unsigned>(splits)); power <= reach; power *= 2) {
    for (const std::int64_t candidate : {power, power + power / 2}) {
      if (candidate <= splits || candidate > reach || tiles <= (kWaveGuardMinTilesPerSplit - 1) * candidate) continue;
      std::int64_t candidate_cost = 0;
      waves_and_cost(candidate, &candidate_cost);
      if (cheaper(candidate_cost, cost) && candidate_cost < best_cost) {
        best = candidate;
        best_cost = candidate_cost;
      }
    }
  }
  return int(best);
}

std::string_view to_string(LengthAxis axis) {
  return axis == LengthAxis::real_length ? "real_length" : "capacity";
}

// ---- TableGrid ------------------------------------------------------------------------------

std::vector<int> TableGrid::head_dim_thresholds() const {
  std::vector<int> out;
  for (std::size_t k = 1; k < head_dims.size(); ++k) out.push_back(geometric_midpoint(head_dims[k - 1], head_dims[k]));
  return out;
}

std::vector<int> TableGrid::page_size_thresholds() const {
  std::vector<int> out;
  for (std::size_t k = 1; k < paged_classes.size(); ++k) {
    out.push_back(geometric_midpoint(paged_classes[k - 1].back(), paged_classes[k].front()));
  }
  return out;
}

int TableGrid::head_dim_class(int head_dim) const {
  int c = 0;
  for (int t : head_dim_thresholds()) c += head_dim >= t ? 1 : 0;
  return c;
}

int TableGrid::layout_class(int page_size) const {
  int c = page_size > 0 ? 1 : 0;
  for (int t : page_size_thresholds()) c += page_size >= t ? 1 : 0;
  return std::min(c, layout_classes() - 1);
}

int TableGrid::cta_index(std::int64_t ctas) const {
  return std::clamp(cta_bucket(ctas, cta_buckets_per_octave) - cta_bucket_min, 0, cta_buckets - 1);
}

int TableGrid::octaves_below(std::int64_t ctas) const {
  return heuristics::octaves_below(cta_bucket_min - cta_bucket(ctas, cta_buckets_per_octave), cta_buckets_per_octave);
}

int TableGrid::length_index(std::int64_t tokens) const {
  return std::clamp(log2_bucket(tokens) - length_log2_min, 0, length_buckets - 1);
}

// ---- SplitTable -----------------------------------------------------------------------------

std::size_t SplitTable::index(int hd, int lay, int y, int x) const {
  return ((std::size_t(hd) * grid.layout_classes() + lay) * grid.length_buckets + y) * grid.cta_buckets + x;
}

int SplitTable::lookup(int batch, int num_kv_heads, int head_dim, int tokens, int page_size) const {
  const std::int64_t ctas = std::int64_t(std::max(batch, 1)) * std::max(num_kv_heads, 1);
  const int cell = splits[index(grid.head_dim_class(head_dim), grid.layout_class(page_size),
                                grid.length_index(tokens), grid.cta_index(ctas))];
  const int splits = scale_below_edge_and_cap(cell, grid.octaves_below(ctas), max_splits, tokens);
  if (measured_ctas.empty()) return splits;
  return guard_unmeasured_ctas(splits, ctas, tokens, head_dim,
                               measured_ctas[std::size_t(grid.head_dim_class(head_dim)) * grid.layout_classes() +
                                             grid.layout_class(page_size)],
                               sm_count, wave_guard_margin_percent, max_splits, occupancy);
}

bool spills_sparse_wave_of_full_splits(int splits, std::int64_t ctas, std::int64_t tokens, int slots) {
  const std::int64_t tiles = tiles_of(tokens);
  if (splits < 1 || ctas < 1 || slots < 1 || tiles < 1) return false;
  const SplitWaves w = split_waves(splits, ctas, tiles, slots);
  if (w.waves < 2) return false;
  // Splits are the grid's slow axis, so the last wave starts inside split (waves - 1) x slots / ctas:
  // a split before the last one (full length), or the last one when the length divides evenly.
  const bool full_length = (w.waves - 1) * slots / ctas < w.live - 1 || tiles - (w.live - 1) * w.per == w.per;
  const std::int64_t in_last_wave = ctas * w.live - (w.waves - 1) * slots;
  return full_length && in_last_wave * 100 <= std::int64_t(slots) * kWaveGuardSparseWavePercent;
}

int guard_unmeasured_ctas(int splits, std::int64_t ctas, std::int64_t tokens, int head_dim,
                          const std::vector<std::int64_t>& measured_in_plane, int sm_count, int margin_percent,
                          int max_splits, const KernelOccupancy& occupancy) {
  if (sm_count <= 0 || margin_percent < 0) return splits;
  const int slots = sm_count * occupancy.at(head_dim);
  if (std::binary_search(measured_in_plane.begin(), measured_in_plane.end(), ctas) &&
      !spills_sparse_wave_of_full_splits(splits, ctas, tokens, slots))
    return splits;
  return wave_guard(splits, ctas, tokens, slots, margin_percent, max_splits);
}

int table_tokens(const MeasuredShape& shape, LengthAxis axis) {
  return axis == LengthAxis::real_length ? shape.point.context_len : shape.capacity_tokens();
}

int SplitTable::lookup(const MeasuredShape& shape) const {
  const auto& p = shape.point;
  return lookup(p.batch, p.num_kv_heads, p.head_dim, table_tokens(shape, axis),
                p.layout == KvLayout::paged ? p.page_size : 0);
}

// ---- fitting --------------------------------------------------------------------------------

namespace {

TableGrid grid_for(const std::vector<MeasuredShape>& shapes, LengthAxis axis,
                   const std::vector<std::vector<int>>& paged_classes, int cta_buckets_per_octave) {
  TableGrid grid;
  grid.cta_buckets_per_octave = cta_buckets_per_octave;
  std::set<int> head_dims;
  int cta_lo = std::numeric_limits<int>::max(), cta_hi = 0;
  int len_lo = std::numeric_limits<int>::max(), len_hi = 0;
  for (const MeasuredShape& s : shapes) {
    head_dims.insert(s.point.head_dim);
    const int cta = cta_bucket(std::int64_t(s.point.batch) * s.point.num_kv_heads, cta_buckets_per_octave);
    const int len = log2_bucket(table_tokens(s, axis));
    cta_lo = std::min(cta_lo, cta);
    cta_hi = std::max(cta_hi, cta);
    len_lo = std::min(len_lo, len);
    len_hi = std::max(len_hi, len);
  }
  grid.head_dims.assign(head_dims.begin(), head_dims.end());
  grid.paged_classes = paged_classes;
  grid.cta_bucket_min = cta_lo;
  grid.cta_buckets = cta_hi - cta_lo + 1;
  grid.length_log2_min = len_lo;
  grid.length_buckets = len_hi - len_lo + 1;
  return grid;
}

// Fills each empty cell of one (head_dim, layout) plane from the nearest decided cell:
// squared distance in octaves (a length bucket is one octave, a CTA bucket 1/R), ties to
// the larger split count (too few splits idles SMs, which costs more than one extra combine).
void fill_plane(SplitTable& table, const std::vector<char>& decided, int hd, int lay) {
  const TableGrid& g = table.grid;
  std::vector<int> filled(table.splits.size(), -1);
  for (int y = 0; y < g.length_buckets; ++y) {
    for (int x = 0; x < g.cta_buckets; ++x) {
      if (decided[table.index(hd, lay, y, x)]) continue;
      const int r = g.cta_buckets_per_octave;
      int best_d2 = std::numeric_limits<int>::max(), best_splits = 0;
      for (int yy = 0; yy < g.length_buckets; ++yy) {
        for (int xx = 0; xx < g.cta_buckets; ++xx) {
          const std::size_t i = table.index(hd, lay, yy, xx);
          if (!decided[i]) continue;
          const int d2 = r * r * (yy - y) * (yy - y) + (xx - x) * (xx - x);  // in (1/R octave)^2
          if (d2 < best_d2 || (d2 == best_d2 && table.splits[i] > best_splits)) {
            best_d2 = d2;
            best_splits = table.splits[i];
          }
        }
      }
      filled[table.index(hd, lay, y, x)] = best_splits;
    }
  }
  for (std::size_t i = 0; i < filled.size(); ++i) {
    if (filled[i] >= 0) table.splits[i] = filled[i];
  }
}

bool plane_has_data(const SplitTable& table, const std::vector<char>& decided, int hd, int lay) {
  const TableGrid& g = table.grid;
  for (int y = 0; y < g.length_buckets; ++y) {
    for (int x = 0; x < g.cta_buckets; ++x) {
      if (decided[table.index(hd, lay, y, x)]) return true;
    }
  }
  return false;
}

// The CTA counts measured in one (head_dim, layout, length) row of a table, with their shapes.
// A count sits in the windows of up to 2 x radius + 1 cells: its mean log ratio per split count
// is computed once and kept.
struct MeasuredCtas {
  std::int64_t ctas = 0;
  int bucket_index = 0;
  std::vector<std::size_t> shapes;
  std::map<int, double> score_by_splits;
};

// Mean log ratio of `splits` over the CTA counts a cell is asked about (heuristics/FIT.md,
// "Wave-aware cells"): the integer CTA counts lo <= c < hi cut into runs of equal waves,
// ceil(c x splits / slots); a run is scored by the measured CTA count nearest to it (log
// distance) that has the same number of waves, else by the nearest measured count; runs
// weigh their log extent. `point_score[p]` is the mean log ratio of `points[p]` at `splits`.
double wave_aware_score(const std::vector<MeasuredCtas*>& points, const std::vector<double>& point_score, double lo,
                        double hi, std::int64_t splits, std::int64_t slots) {
  const auto waves = [&](std::int64_t ctas) { return (ctas * splits + slots - 1) / slots; };
  // The log distance of c from [a, b], kept as its ratio exp(distance) >= 1: log is monotone, so
  // comparing ratios with a relative tolerance of 1e-12 picks the same nearest points as comparing
  // logs with an absolute one, without a log per point, run and split count (the fit's hot loop:
  // a third of `splitkv evaluate`'s time went to log here).
  const auto ratio_distance = [](double c, double a, double b) { return c < a ? a / c : (c > b ? c / b : 1.0); };
  static const double kCloser = std::exp(-1e-12), kTied = std::exp(1e-12);
  const std::int64_t c_min = std::max<std::int64_t>(1, std::int64_t(std::ceil(lo)));
  const std::int64_t c_max = std::max(c_min, std::int64_t(std::ceil(hi)) - 1);
  double sum = 0, total = 0;
  for (std::int64_t w = waves(c_min); w <= waves(c_max); ++w) {
    // The counts with w waves: (w - 1) slots / splits < c <= w slots / splits.
    const std::int64_t a = std::max(c_min, (w - 1) * slots / splits + 1);
    const std::int64_t b = std::min(c_max, w * slots / splits);
    if (b < a) continue;
    double same_d = std::numeric_limits<double>::infinity(), any_d = same_d, same_sum = 0, any_sum = 0;
    int same_n = 0, any_n = 0;
    for (std::size_t p = 0; p < points.size(); ++p) {
      const double d = ratio_distance(double(points[p]->ctas), double(a), double(b));
      if (d < any_d * kCloser) any_d = d, any_sum = 0, any_n = 0;
      if (d <= any_d * kTied) any_sum += point_score[p], ++any_n;
      if (waves(points[p]->ctas) != w) continue;
      if (d < same_d * kCloser) same_d = d, same_sum = 0, same_n = 0;
      if (d <= same_d * kTied) same_sum += point_score[p], ++same_n;
    }
    if (any_n == 0) continue;
    const double weight = std::log((double(b) + 0.5) / (double(a) - 0.5));
    sum += weight * (same_n > 0 ? same_sum / same_n : any_sum / any_n);
    total += weight;
  }
  return total > 0 ? sum / total : 0.0;
}

// The fewest splits whose score is within the tie tolerance of the best; scores ascend by splits.
int pick_with_tolerance(const std::vector<std::pair<int, double>>& scores, double tolerance) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [s, value] : scores) best = std::min(best, value);
  const double limit = best + std::log1p(tolerance);
  for (const auto& [s, value] : scores) {
    if (value <= limit) return s;
  }
  return scores.empty() ? 1 : scores.front().first;
}

}  // namespace

SplitTable fit_split_table(const std::vector<MeasuredShape>& shapes,
                           const std::vector<OracleChoice>& oracles, LengthAxis axis,
                           const std::vector<std::vector<int>>& paged_classes,
                           const FitOptions& options) {
  if (shapes.empty()) throw std::invalid_argument("fit_split_table: no shapes");
  if (shapes.size() != oracles.size()) throw std::invalid_argument("fit_split_table: oracles do not match shapes");
  SplitTable table;
  table.axis = axis;
  const int r = options.cta_buckets_per_octave > 0 ? options.cta_buckets_per_octave : std::end(kCtaResolutions)[-1];
  table.grid = grid_for(shapes, axis, paged_classes, r);
  const TableGrid& g = table.grid;
  const std::size_t cells = std::size_t(g.head_dim_classes()) * g.layout_classes() * g.length_buckets * g.cta_buckets;
  table.splits.assign(cells, 1);
  table.shapes_in_cell.assign(cells, 0);
  for (const MeasuredShape& shape : shapes) table.max_splits = std::max(table.max_splits, shape.timings.back().num_splits);
  table.measured_ctas.assign(std::size_t(g.head_dim_classes()) * g.layout_classes(), {});
  for (const MeasuredShape& shape : shapes) {
    const auto& p = shape.point;
    table.measured_ctas[std::size_t(g.head_dim_class(p.head_dim)) * g.layout_classes() +
                        g.layout_class(p.layout == KvLayout::paged ? p.page_size : 0)]
        .push_back(std::int64_t(p.batch) * p.num_kv_heads);
  }
  for (auto& plane : table.measured_ctas) {
    std::sort(plane.begin(), plane.end());
    plane.erase(std::unique(plane.begin(), plane.end()), plane.end());
  }
  table.sm_count = options.sm_count;
  table.wave_guard_margin_percent = options.wave_guard_margin_percent;
  table.occupancy = options.occupancy;

  // Shapes by cell, in input order (shapes come sorted, so the sums below are deterministic).
  std::vector<std::vector<std::size_t>> members(cells);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto& p = shapes[i].point;
    const std::size_t cell = table.index(
        g.head_dim_class(p.head_dim), g.layout_class(p.layout == KvLayout::paged ? p.page_size : 0),
        g.length_index(table_tokens(shapes[i], axis)),
        g.cta_index(std::int64_t(p.batch) * p.num_kv_heads));
    members[cell].push_back(i);
  }

  std::vector<char> decided(cells, 0);
  if (options.sm_count <= 0) {
    // No SM count: each cell on its own shapes only.
    for (std::size_t cell = 0; cell < cells; ++cell) {
      const auto& in_cell = members[cell];
      if (in_cell.empty()) continue;
      std::set<int> candidates;
      for (std::size_t i : in_cell) {
        for (const SplitTiming& t : shapes[i].timings) candidates.insert(t.num_splits);
      }
      std::vector<std::pair<int, double>> scores;  // (splits, mean log ratio), ascending splits
      for (int s : candidates) scores.emplace_back(s, sum_log_ratio(shapes, oracles, in_cell, s) / double(in_cell.size()));
      table.splits[cell] = pick_with_tolerance(scores, options.cell_tie_tolerance);
      table.shapes_in_cell[cell] = int(in_cell.size());
      decided[cell] = 1;
    }
  } else {
    // Wave-aware: a cell is asked about every CTA count of its range, and a split count that
    // exactly fills the waves at the one count measured there can spill a nearly empty wave a
    // few CTAs further (88 CTAs x 3 = 264 slots, 96 x 3 = 288 cost 1.3-1.5x on the H200). So a
    // cell scores each count on the measured CTA counts within wave_radius_octaves that share
    // its waves (wave_aware_score), mixed with its own shapes' mean; cells with no shapes of
    // their own but measured counts in reach are decided the same way.
    std::map<std::size_t, std::map<std::int64_t, MeasuredCtas>> rows;  // row (x = 0) -> CTA count -> shapes
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto& p = shapes[i].point;
      const std::int64_t ctas = std::int64_t(p.batch) * p.num_kv_heads;
      const std::size_t row = table.index(g.head_dim_class(p.head_dim),
                                          g.layout_class(p.layout == KvLayout::paged ? p.page_size : 0),
                                          g.length_index(table_tokens(shapes[i], axis)), 0);
      MeasuredCtas& m = rows[row][ctas];
      m.ctas = ctas;
      m.bucket_index = g.cta_index(ctas);
      m.shapes.push_back(i);
    }
    const int radius = int(std::lround(options.wave_radius_octaves * g.cta_buckets_per_octave));
    std::vector<char> timed(std::size_t(std::max(table.max_splits, 1)) + 1);
    for (auto& [row, by_ctas] : rows) {
      const int y = int((row / std::size_t(g.cta_buckets)) % std::size_t(g.length_buckets));
      const int hd = int(row / (std::size_t(g.cta_buckets) * g.length_buckets * g.layout_classes()));
      const std::int64_t slots = std::int64_t(options.occupancy.at(g.head_dims[std::size_t(hd)])) * options.sm_count;
      // Splits beyond the row's 64-token tiles leave CTAs empty: waves count the non-empty ones.
      const std::int64_t tiles = std::max<std::int64_t>(1, ((std::int64_t(1) << (g.length_log2_min + y)) + 63) / 64);
      for (int x = 0; x < g.cta_buckets; ++x) {
        const std::size_t cell = row + std::size_t(x);
        std::vector<MeasuredCtas*> window;
        for (auto& [ctas, m] : by_ctas) {
          if (std::abs(m.bucket_index - x) <= radius) window.push_back(&m);
        }
        if (window.empty()) continue;
        // The split counts timed on the window's shapes, ascending: marked in a flag per count (a
        // std::set here cost 8% of the fit, sorting the repeats 9%).
        std::fill(timed.begin(), timed.end(), 0);
        for (const MeasuredCtas* m : window) {
          for (std::size_t i : m->shapes) {
            for (const SplitTiming& t : shapes[i].timings) timed[std::size_t(t.num_splits)] = 1;
          }
        }
        std::vector<int> candidates;
        for (std::size_t c = 0; c < timed.size(); ++c) {
          if (timed[c]) candidates.push_back(int(c));
        }
        const int k = g.cta_bucket_min + x;
        const double lo = std::pow(2.0, (k - 0.5) / g.cta_buckets_per_octave);
        const double hi = std::pow(2.0, (k + 0.5) / g.cta_buckets_per_octave);
        const auto& own = members[cell];
        std::vector<double> point_score(window.size());
        std::vector<std::pair<int, double>> scores;
        for (int s : candidates) {
          for (std::size_t p = 0; p < window.size(); ++p) {
            const auto [known, added] = window[p]->score_by_splits.try_emplace(s, 0.0);
            if (added) known->second = sum_log_ratio(shapes, oracles, window[p]->shapes, s) / double(window[p]->shapes.size());
            point_score[p] = known->second;
          }
          const std::int64_t per_split = (tiles + s - 1) / s;
          const std::int64_t non_empty = (tiles + per_split - 1) / per_split;
          double value = wave_aware_score(window, point_score, lo, hi, non_empty, slots);
          if (!own.empty())
            value = options.wave_mix * value +
                    (1.0 - options.wave_mix) * sum_log_ratio(shapes, oracles, own, s) / double(own.size());
          scores.emplace_back(s, value);
        }
        table.splits[cell] = pick_with_tolerance(scores, options.cell_tie_tolerance);
        table.shapes_in_cell[cell] = int(own.size());
        decided[cell] = 1;
      }
    }
  }

  // Empty cells: from the nearest decided cell of the same plane; empty planes: a copy of
  // the same head_dim's nearest layout class that has data (ties to the lower class).
  for (int hd = 0; hd < g.head_dim_classes(); ++hd) {
    std::vector<bool> has(std::size_t(g.layout_classes()));
    for (int lay = 0; lay < g.layout_classes(); ++lay) has[std::size_t(lay)] = plane_has_data(table, decided, hd, lay);
    for (int lay = 0; lay < g.layout_classes(); ++lay) {
      if (has[std::size_t(lay)]) fill_plane(table, decided, hd, lay);
    }
    for (int lay = 0; lay < g.layout_classes(); ++lay) {
      if (has[std::size_t(lay)]) continue;
      int source = -1;
      for (int d = 1; d < g.layout_classes() && source < 0; ++d) {
        if (lay - d >= 0 && has[std::size_t(lay - d)]) source = lay - d;
        else if (lay + d < g.layout_classes() && has[std::size_t(lay + d)]) source = lay + d;
      }
      if (source < 0) continue;  // cannot happen: head_dim classes come from the data
      for (int y = 0; y < g.length_buckets; ++y) {
        for (int x = 0; x < g.cta_buckets; ++x) {
          table.splits[table.index(hd, lay, y, x)] = table.splits[table.index(hd, source, y, x)];
        }
      }
    }
  }
  return table;
}

double table_geomean_regret(const SplitTable& table, const std::vector<MeasuredShape>& shapes,
                            const std::vector<OracleChoice>& oracles) {
  if (shapes.empty()) return 1.0;
  double sum = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) sum += log_ratio(shapes[i], oracles[i], table.lookup(shapes[i]));
  return std::exp(sum / double(shapes.size()));
}

namespace {

std::vector<OracleChoice> oracles_of(const std::vector<MeasuredShape>& shapes) {
  std::vector<OracleChoice> out;
  out.reserve(shapes.size());
  for (const MeasuredShape& s : shapes) out.push_back(oracle_choice(s));
  return out;
}

template <typename Keep>
void subset(const std::vector<MeasuredShape>& shapes, const std::vector<OracleChoice>& oracles, Keep keep,
            std::vector<MeasuredShape>& out_shapes, std::vector<OracleChoice>& out_oracles) {
  out_shapes.clear();
  out_oracles.clear();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!keep(shapes[i])) continue;
    out_shapes.push_back(shapes[i]);
    out_oracles.push_back(oracles[i]);
  }
}

// Geomean regret of leaving each batch value out in turn: the shapes of that batch are looked
// up in a table fitted on all the other batches. Batch moves batch x kv_heads, the CTA axis,
// so this is how well a CTA resolution generalises to CTA counts the sweep did not measure.
double leave_one_batch_out_regret(const std::vector<MeasuredShape>& shapes, const std::vector<OracleChoice>& oracles,
                                  const std::vector<std::vector<int>>& classes, const FitOptions& options) {
  std::set<int> batches;
  for (const MeasuredShape& s : shapes) batches.insert(s.point.batch);
  if (batches.size() < 2) return table_geomean_regret(fit_split_table(shapes, oracles, LengthAxis::real_length,
                                                                      classes, options), shapes, oracles);
  double log_sum = 0;
  std::size_t count = 0;
  std::vector<MeasuredShape> train, held;
  std::vector<OracleChoice> train_oracles, held_oracles;
  for (int batch : batches) {
    subset(shapes, oracles, [&](const MeasuredShape& s) { return s.point.batch != batch; }, train, train_oracles);
    subset(shapes, oracles, [&](const MeasuredShape& s) { return s.point.batch == batch; }, held, held_oracles);
    const SplitTable table = fit_split_table(train, train_oracles, LengthAxis::real_length, classes, options);
    log_sum += std::log(table_geomean_regret(table, held, held_oracles)) * double(held.size());
    count += held.size();
  }
  return std::exp(log_sum / double(count));
}

}  // namespace

FittedHeuristic fit_heuristic(const std::vector<MeasuredShape>& shapes, const FitOptions& options) {
  if (shapes.empty()) throw std::invalid_argument("fit_heuristic: no shapes");
  const std::vector<OracleChoice> oracles = oracles_of(shapes);
  FittedHeuristic fit;
  FitNotes& notes = fit.notes;

  std::set<int> page_sizes;
  std::set<std::string> dtypes;
  for (const MeasuredShape& s : shapes) {
    if (s.point.layout == KvLayout::paged) page_sizes.insert(s.point.page_size);
    dtypes.insert(std::string(tuner::to_string(s.point.element_types())));
  }
  notes.page_sizes.assign(page_sizes.begin(), page_sizes.end());
  notes.dtypes.assign(dtypes.begin(), dtypes.end());

  // Page-size classes: all paged shapes in one class, unless a class per page size pays.
  std::vector<std::vector<int>> pooled, separate;
  if (!page_sizes.empty()) pooled.push_back(notes.page_sizes);
  for (int p : page_sizes) separate.push_back({p});
  std::vector<std::vector<int>> classes = pooled;
  if (page_sizes.size() > 1) {
    std::vector<MeasuredShape> paged;
    std::vector<OracleChoice> paged_oracles;
    subset(shapes, oracles, [](const MeasuredShape& s) { return s.point.layout == KvLayout::paged; },
           paged, paged_oracles);
    const SplitTable pooled_table = fit_split_table(shapes, oracles, LengthAxis::real_length, pooled, options);
    const SplitTable separate_table = fit_split_table(shapes, oracles, LengthAxis::real_length, separate, options);
    notes.paged_geomean_pooled = table_geomean_regret(pooled_table, paged, paged_oracles);
    notes.paged_geomean_separate = table_geomean_regret(separate_table, paged, paged_oracles);
    notes.page_sizes_separate =
        notes.paged_geomean_pooled > notes.paged_geomean_separate * (1.0 + options.page_size_split_min_gain);
    if (notes.page_sizes_separate) classes = separate;
  }

  // CTA resolution: a fixed R, or (R = 0) the finest of kCtaResolutions whose leave-one-batch-
  // out regret beats every coarser one by more than cta_resolution_min_gain.
  FitOptions chosen = options;
  if (options.cta_buckets_per_octave == 0) {
    int best_r = 0;
    double best = 0;
    for (int r : kCtaResolutions) {
      FitOptions trial = options;
      trial.cta_buckets_per_octave = r;
      const double regret = leave_one_batch_out_regret(shapes, oracles, classes, trial);
      notes.cta_resolution_checks.push_back({r, regret});
      if (best_r == 0 || regret * (1.0 + options.cta_resolution_min_gain) < best) {
        best_r = r;
        best = regret;
      }
    }
    chosen.cta_buckets_per_octave = best_r;
  }
  notes.cta_buckets_per_octave = chosen.cta_buckets_per_octave;

  fit.real_length = fit_split_table(shapes, oracles, LengthAxis::real_length, classes, chosen);
  fit.capacity_only = fit_split_table(shapes, oracles, LengthAxis::capacity, classes, chosen);

  // Dtype: tables pool dtypes (the kernels read two bytes per element either way); report
  // what a table of its own would gain each dtype, so the data can overrule that choice.
  if (options.diagnose_dtypes && dtypes.size() > 1) {
    for (const std::string& dtype : notes.dtypes) {
      std::vector<MeasuredShape> own;
      std::vector<OracleChoice> own_oracles;
      subset(shapes, oracles,
             [&](const MeasuredShape& s) { return tuner::to_string(s.point.element_types()) == dtype; }, own,
             own_oracles);
      const SplitTable own_table = fit_split_table(own, own_oracles, LengthAxis::real_length, classes, chosen);
      notes.dtype_checks.push_back({dtype, int(own.size()),
                                    table_geomean_regret(fit.real_length, own, own_oracles),
                                    table_geomean_regret(own_table, own, own_oracles)});
    }
  }
  return fit;
}

}  // namespace splitkv::heuristics
