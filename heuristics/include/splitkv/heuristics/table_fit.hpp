// The fitted lookup table behind `determine_num_splits`. Its axes are the quantities that
// drive a split-KV decode, not the raw grid axes, so that shapes the sweep never saw land
// on measured neighbours (heuristics/FIT.md, "Table"):
//   x: CTAs before splitting, batch * num_kv_heads, in buckets of 1/R octave (R =
//      cta_buckets_per_octave, 4 by default): how many CTAs a grid has against the SM count
//      decides how whole its waves are, and that moves the best split count between powers
//      of two (heuristics/FIT.md, "Why quarter-octave CTA buckets");
//   y: tokens per sequence in log2 buckets: the real length (table `real_length`) or the
//      cache capacity (table `capacity`, for callers that know no real length);
//   one plane per head_dim class and per layout class (contiguous, then paged page-size
//   classes), because those change the per-token cost and the CTAs per SM.
// Length bucket i holds values in [2^(i-1/2), 2^(i+1/2)) and CTA bucket k values in
// [2^((k-1/2)/R), 2^((k+1/2)/R)): boundaries sit at geometric midpoints. Beyond the table's edges a lookup clamps to the edge bucket, with one
// exception: below the fewest CTAs measured, the split count doubles per missing octave (up
// to the most splits measured), which keeps batch * kv_heads * splits, the CTAs that fill
// the GPU, what it was at the edge (cross-validation showed clamping there under-splits
// 4x: heuristics/FIT.md, "Beyond the edges").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "splitkv/heuristics/kernel_occupancy.hpp"
#include "splitkv/heuristics/measurements.hpp"
#include "splitkv/heuristics/oracle.hpp"

namespace splitkv::heuristics {

// Nearest power of two in log space: round(log2(value)), halves rounding up (value >=
// 2^i * sqrt(2) goes to i + 1). Values <= 1 give 0; values above 2^30 count as 2^30.
// Integer-exact; the generated header does the same arithmetic.
int log2_bucket(std::int64_t value);

// round(R * log2(value)) with halves up, integer-exact: value >= 2^((k + 1/2) / R) goes to
// bucket k + 1. R = 1 is log2_bucket. Values <= 1 give 0; values above 2^30 count as 2^30.
int cta_bucket(std::int64_t value, int buckets_per_octave);
// The R threshold mantissas cta_bucket compares against: ceil(2^30 * 2^((j - 1/2) / R)) for
// j = 1..R. A value v = 2^i * f (1 <= f < 2) passes threshold j when (v << 30) >> i >= it.
std::vector<std::uint64_t> cta_bucket_thresholds(int buckets_per_octave);
// The CTA count at the centre of bucket k, rounded: what the header labels a column with.
std::int64_t cta_bucket_center(int bucket, int buckets_per_octave);

// Whole octaves (rounded up) that `buckets_below` CTA buckets of 1/R octave make; 0 when <= 0.
int octaves_below(int buckets_below, int buckets_per_octave);

// What a lookup does after reading its cell (the generated header's scale_below_edge and
// cap_at_tiles): double the cell's split count per octave below the fewest CTAs measured (at
// most 8 doublings, at most max_splits), then cap at the 64-token tiles of `tokens`, at least 1.
int scale_below_edge_and_cap(int cell_splits, int octaves_below, int max_splits, std::int64_t tokens);

// Smallest integer t with t * t >= a * b: the geometric midpoint between two class values
// (head_dims 64 and 128 -> 91; page sizes 16 and 64 -> 32). Values >= t join the upper class.
int geometric_midpoint(int a, int b);

// Resident CTAs per SM of our decode kernel: KernelOccupancy{}.at(head_dim).
int resident_ctas_per_sm(int head_dim);

// How far the wave guard looks above the table's count: at most this many times as many splits,
// and only counts that leave every split more than this many 64-token tiles less one (each extra
// split's combine traffic and epilogue must stay small against its tiles). Chosen by
// cross-validation (heuristics/FIT.md, "Wave guard"); the generated header holds the same values.
inline constexpr int kWaveGuardMoreFactor = 4;
inline constexpr int kWaveGuardMinTilesPerSplit = 16;
// What a wave costs beyond its tiles, in 64-token tiles: a wave of CTAs pays its prologue (the
// query and the first tiles' latency) and its epilogue before and after it streams, so a split
// count that adds a wave of short splits costs more than its tiles alone. Chosen by
// cross-validation with the margin (heuristics/FIT.md, "Per-wave overhead").
inline constexpr int kWaveGuardWaveOverheadTiles = 4;
// At a CTA count the training shapes measured, the table's answer stands unless its split count
// spills a last wave that holds at most this share of the slots, in percent, and whose splits are
// full length (the length divides evenly, so the spilled CTAs cost a whole split): the lengths that
// decided the cell split otherwise (heuristics/FIT.md, "What the 48-CTA family is"). Chosen by
// cross-validation and the off-centre sets.
inline constexpr int kWaveGuardSparseWavePercent = 25;

// The wave guard (heuristics/FIT.md, "Wave guard"), in waves of `slots` resident CTAs x (64-token
// tiles per split + kWaveGuardWaveOverheadTiles): when `splits` spills `ctas` into one more wave
// than needed and the count with one wave fewer is cheaper by more than `margin_percent`, that
// count; else the cheapest timed
// count above `splits` (2^k and 3 x 2^(k-1), up to kWaveGuardMoreFactor times and `max_splits`,
// with kWaveGuardMinTilesPerSplit tiles per split), when cheaper by more than the margin; else
// `splits`. Integer-exact; the generated header does the same arithmetic.
int wave_guard(int splits, std::int64_t ctas, std::int64_t tokens, int slots, int margin_percent, int max_splits);

// Whether `splits` of `tokens` over `ctas` rows put a last wave of at most
// kWaveGuardSparseWavePercent of `slots` CTAs behind the others, every one of them a full-length
// split.
bool spills_sparse_wave_of_full_splits(int splits, std::int64_t ctas, std::int64_t tokens, int slots);

// A lookup's last step (SplitTable::lookup and the parsed header's): the wave guard, unless the
// plane measured this exact CTA count (`measured_in_plane`, ascending) and the count does not
// spill a sparse wave of full-length splits, sm_count is 0 or the margin < 0. What the generated
// header's guard_unmeasured computes.
int guard_unmeasured_ctas(int splits, std::int64_t ctas, std::int64_t tokens, int head_dim,
                          const std::vector<std::int64_t>& measured_in_plane, int sm_count, int margin_percent,
                          int max_splits, const KernelOccupancy& occupancy = {});

enum class LengthAxis { real_length, capacity };
std::string_view to_string(LengthAxis axis);

// The classes and extents of a table's grid.
struct TableGrid {
  std::vector<int> head_dims;                   // one class per value, ascending
  std::vector<std::vector<int>> paged_classes;  // page sizes of each paged class, ascending
  int cta_buckets_per_octave = 1;  // R
  int cta_bucket_min = 0;          // cta_bucket() of the fewest CTAs measured
  int cta_buckets = 1;
  int length_log2_min = 0;
  int length_buckets = 1;

  int head_dim_classes() const { return int(head_dims.size()); }
  int layout_classes() const { return 1 + int(paged_classes.size()); }  // 0 = contiguous
  std::vector<int> head_dim_thresholds() const;   // head_dim >= t[k] -> class k + 1
  std::vector<int> page_size_thresholds() const;  // page_size >= t[k] -> paged class k + 2
  int head_dim_class(int head_dim) const;
  int layout_class(int page_size) const;          // 0 for contiguous (page_size <= 0)
  int cta_index(std::int64_t ctas) const;         // clamped bucket index
  int octaves_below(std::int64_t ctas) const;     // whole octaves below the first CTA bucket, rounded up (0 inside)
  int length_index(std::int64_t tokens) const;    // clamped bucket index
};

struct SplitTable {
  LengthAxis axis = LengthAxis::real_length;
  TableGrid grid;
  // [head_dim class][layout class][length bucket][cta bucket], row-major.
  std::vector<int> splits;
  // Measured shapes that decided each cell; 0 marks a cell filled from a neighbour.
  std::vector<int> shapes_in_cell;
  // The most splits any measured shape was timed with: the ceiling of the extrapolation
  // below the first CTA bucket.
  int max_splits = 1;
  // The wave guard, applied only where a plane's training shapes never measured that exact
  // batch x kv_heads: `measured_ctas[head_dim class * layout classes + layout class]` holds them,
  // ascending. Off when sm_count is 0 or wave_guard_margin_percent < 0.
  std::vector<std::vector<std::int64_t>> measured_ctas;
  int sm_count = 0;
  int wave_guard_margin_percent = -1;
  KernelOccupancy occupancy;  // the waves' slots: sm_count x occupancy.at(head_dim)

  std::size_t index(int head_dim_class, int layout_class, int length_index, int cta_index) const;
  // The table's answer for a shape, capped at the 64-token tiles of `tokens` (more splits
  // than tiles cannot hold work). `tokens` is the real length or the capacity per `axis`.
  // The generated header computes exactly this.
  int lookup(int batch, int num_kv_heads, int head_dim, int tokens, int page_size) const;
  // The same for a measured shape, taking its real length or capacity per `axis`.
  int lookup(const MeasuredShape& shape) const;
};

// Tokens a table keys on for a measured shape: context_len or capacity_tokens().
int table_tokens(const MeasuredShape& shape, LengthAxis axis);

// CTA resolutions fit_heuristic tries when FitOptions::cta_buckets_per_octave is 0, coarse first.
inline constexpr int kCtaResolutions[] = {1, 2, 4};

struct FitOptions {
  // A cell takes the fewest splits whose geomean time/oracle ratio is within this of the
  // cell's best; below the run-to-run noise, fewer splits are the safer pick.
  double cell_tie_tolerance = 0.002;
  // Page sizes get tables of their own only when that lowers the in-sample geomean regret
  // of the paged shapes by more than this; otherwise one paged table serves all page sizes.
  double page_size_split_min_gain = 0.005;
  // R: CTA buckets per octave. 1 gives power-of-two buckets; finer buckets only pay where the
  // sweep measured CTA counts between the powers of two (sweeps/full.json's ladder block).
  // 0 (the default) lets fit_heuristic choose among kCtaResolutions by leave-one-batch-out
  // regret; fit_split_table alone, with nothing to compare, takes the finest of them.
  int cta_buckets_per_octave = 0;
  // A finer CTA resolution must lower the leave-one-batch-out geomean regret by more than this.
  double cta_resolution_min_gain = 0.002;
  // Wave-aware cells (heuristics/FIT.md, "Wave-aware cells"): the GPU's SM count, 0 to decide
  // each cell on its own shapes only. run_fit passes the measurements' count.
  int sm_count = 0;
  // The fitted kernel's resident CTAs per SM, which size its waves (fit_pipeline sets a peer's).
  KernelOccupancy occupancy;
  // How far, in octaves of CTAs, a cell looks for measured CTA counts with the same waves.
  double wave_radius_octaves = 1.0;
  // A cell's score: wave_mix x its range's wave-aware score + (1 - wave_mix) x its own shapes'
  // mean log ratio. 0.25: the lowest leave-one-CTA-count-out and leave-one-batch-out regret of
  // {0, 0.25, 0.5, 0.75, 1} on the H200 data (heuristics/FIT.md, "Wave-aware cells").
  double wave_mix = 0.25;
  // The wave guard's margin at unmeasured CTA counts, in percent, for fewer splits and for more
  // (kWaveGuardMoreFactor); < 0 turns it off. 5, with kWaveGuardWaveOverheadTiles: chosen by
  // cross-validation, equal in sample and leaving one length out, better leaving one batch and one
  // CTA count out than the alternatives (heuristics/FIT.md, "Wave guard", "Upward too" and
  // "Per-wave overhead").
  int wave_guard_margin_percent = 5;
  // Fit per-dtype tables only to report what they would gain (FitNotes::dtype_checks).
  bool diagnose_dtypes = true;
};

// Fits one table with fixed classes. The grid's extents come from `shapes`; `oracles[i]`
// is oracle_choice(shapes[i]).
SplitTable fit_split_table(const std::vector<MeasuredShape>& shapes,
                           const std::vector<OracleChoice>& oracles, LengthAxis axis,
                           const std::vector<std::vector<int>>& paged_classes,
                           const FitOptions& options = {});

// Decisions the fit took from the data, for the fit report.
struct FitNotes {
  std::vector<int> page_sizes;             // paged page sizes in the data
  bool page_sizes_separate = false;        // one paged class per page size?
  double paged_geomean_pooled = 0;         // in-sample geomean regret of paged shapes, pooled
  double paged_geomean_separate = 0;       // ... with a class per page size
  std::vector<std::string> dtypes;         // dtypes in the data (tables always pool them)
  // For each dtype other than the pooled fit: in-sample geomean of its shapes with the
  // pooled table vs with a table fitted on that dtype alone.
  struct DtypeCheck {
    std::string dtype;
    int shapes = 0;
    double geomean_pooled = 0;
    double geomean_own_table = 0;
  };
  std::vector<DtypeCheck> dtype_checks;
  int cta_buckets_per_octave = 1;  // R the tables use
  // With R chosen from the data: each tried R and its leave-one-batch-out geomean regret.
  struct CtaResolutionCheck {
    int buckets_per_octave = 1;
    double leave_one_batch_out_geomean = 0;
  };
  std::vector<CtaResolutionCheck> cta_resolution_checks;
};

struct FittedHeuristic {
  SplitTable real_length;    // `ours`: keyed on the real (max) length
  SplitTable capacity_only;  // `ours_capacity_only`: keyed on the capacity, fitted on the same rows
  FitNotes notes;
};

FittedHeuristic fit_heuristic(const std::vector<MeasuredShape>& shapes, const FitOptions& options = {});

// Geometric mean of time(table's pick) / fastest time over `shapes` (in-sample regret).
double table_geomean_regret(const SplitTable& table, const std::vector<MeasuredShape>& shapes,
                            const std::vector<OracleChoice>& oracles);

}  // namespace splitkv::heuristics
