// The float64 reference is what every GPU test is judged against, so it is checked here
// against hand-computed numbers, against itself across layouts, and split + combine
// against unsplit attention. The split partition it shares with the kernels is checked
// exhaustively over small lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference_attention.hpp"
#include "splitkv/split_partition.hpp"

namespace {

namespace ref = splitkv::reference;
using splitkv::KvLayout;
using splitkv::kMaxSplits;
using splitkv::kTokensPerTile;

constexpr double kInf = std::numeric_limits<double>::infinity();

// max |got - want| / max |want|. Infinities must sit at the same places with the same
// sign (an empty sequence's lse is -inf on both sides); anything else there, or a NaN
// anywhere, is an infinite error.
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return kInf;
  double max_diff = 0.0;
  double max_ref = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) return kInf;
    if (std::isinf(got[i]) || std::isinf(want[i])) {
      if (got[i] != want[i]) return kInf;
      continue;
    }
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
    max_ref = std::max(max_ref, std::abs(want[i]));
  }
  return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

std::string describe(const ref::HostProblem& p, int num_splits) {
  std::ostringstream os;
  os << (p.layout == KvLayout::paged ? "paged" : "contiguous") << " B=" << p.batch
     << " Hq=" << p.num_heads << " Hkv=" << p.num_kv_heads << " D=" << p.head_dim
     << " cap=" << p.capacity_tokens() << " page=" << p.page_size << " S=" << num_splits
     << " lens=";
  for (int32_t l : p.seqlens) os << l << ',';
  return os.str();
}

// Unsplit attention against split + combine of the same problem; returns the larger of
// the two relative errors (out, lse).
double split_combine_error(const ref::HostProblem& p, int num_splits) {
  std::vector<double> out, lse, split_out, split_lse;
  ref::attention(p, out, lse);
  ref::combine(p, ref::split_attention(p, num_splits), split_out, split_lse);
  return std::max(rel_error(split_out, out), rel_error(split_lse, lse));
}

ref::ProblemShape shape_with_lengths(std::vector<int32_t> seqlens, int capacity,
                                     KvLayout layout = KvLayout::contiguous) {
  ref::ProblemShape s;
  s.layout = layout;
  s.batch = static_cast<int>(seqlens.size());
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.capacity = capacity;
  s.page_size = 32;
  s.lengths = ref::LengthMode::explicit_;
  s.seqlens = std::move(seqlens);
  return s;
}

// ---------------------------------------------------------------------------------
// Hand-computed examples

TEST(ReferenceAttention, HandComputedContiguous) {
  // q = (1, 1), keys (0,0) (1,0) (1,1) with scale 1 give scores 0, 1, 2, so the weights
  // are 1, e, e^2 over Z = 1 + e + e^2:
  //   out = ((1 + e^2) / Z, (e + e^2) / Z),  lse = log Z.
  ref::HostProblem p;
  p.layout = KvLayout::contiguous;
  p.batch = 1;
  p.num_heads = 1;
  p.num_kv_heads = 1;
  p.head_dim = 2;
  p.cache_capacity = 4;  // one slot past the length, holding junk that must be ignored
  p.softmax_scale = 1.0;
  p.q = {1, 1};
  p.k = {0, 0, 1, 0, 1, 1, 50, 50};
  p.v = {1, 0, 0, 1, 1, 1, 9, 9};
  p.seqlens = {3};

  std::vector<double> out, lse;
  ref::attention(p, out, lse);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(lse.size(), 1u);
  EXPECT_NEAR(out[0], 0.7552715289452022, 1e-14);
  EXPECT_NEAR(out[1], 0.9099694268296196, 1e-14);
  EXPECT_NEAR(lse[0], 2.40760596444438, 1e-14);
}

TEST(ReferenceAttention, HandComputedPagedDefaultScale) {
  // Scale 0 means 1/sqrt(2). q = (2, 0) against keys (1,1) (0.5,-1) (-1,0.25) gives dot
  // products 2, 1, -2, so scores sqrt(2), 1/sqrt(2), -sqrt(2). Values were worked out
  // from those weights independently of this code.
  // Pages of 2 tokens: tokens 0,1 live in page 2 and token 2 in page 0; page 1 is junk.
  ref::HostProblem p;
  p.layout = KvLayout::paged;
  p.batch = 1;
  p.num_heads = 1;
  p.num_kv_heads = 1;
  p.head_dim = 2;
  p.page_size = 2;
  p.max_pages_per_seq = 2;
  p.num_pages = 3;
  p.block_table = {2, 0};
  p.q = {2, 0};
  //        page 0 (token 2, junk)   page 1 (junk)       page 2 (tokens 0, 1)
  p.k = {-1, 0.25, 7, 7,           30, 30, 30, 30,     1, 1, 0.5, -1};
  p.v = {-1, 3, 7, 7,              30, 30, 30, 30,     0.5, -0.5, 1, 2};
  p.seqlens = {3};

  std::vector<double> out, lse;
  ref::attention(p, out, lse);
  EXPECT_NEAR(out[0], 0.6017126181142788, 1e-14);
  EXPECT_NEAR(out[1], 0.42743560662519064, 1e-14);
  EXPECT_NEAR(lse[0], 1.8538703734091875, 1e-14);
}

TEST(ReferenceCombine, HandComputedTwoSplits) {
  // Split 0: out (1,0), denominator 1 (lse 0). Split 1: out (0,1), denominator 3
  // (lse log 3). Together: out = (1*(1,0) + 3*(0,1)) / 4, lse = log 4.
  ref::HostProblem p;
  p.batch = 1;
  p.num_heads = 1;
  p.num_kv_heads = 1;
  p.head_dim = 2;
  p.cache_capacity = 2 * kTokensPerTile;
  p.seqlens = {2 * kTokensPerTile};  // exactly two active splits of one tile
  p.q = {0, 0};
  p.k.assign(static_cast<std::size_t>(p.cache_capacity) * 2, 0.0);
  p.v = p.k;
  ASSERT_EQ(splitkv::active_splits(p.seqlens[0], 2), 2);

  ref::SplitPartials parts;
  parts.num_splits = 2;
  parts.out = {1, 0, 0, 1};
  parts.lse = {0.0, std::log(3.0)};
  std::vector<double> out, lse;
  ref::combine(p, parts, out, lse);
  EXPECT_NEAR(out[0], 0.25, 1e-15);
  EXPECT_NEAR(out[1], 0.75, 1e-15);
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-15);
}

// ---------------------------------------------------------------------------------
// Split + combine equals unsplit attention

TEST(ReferenceSplit, MatchesUnsplitOnRandomShapes) {
  std::mt19937_64 rng(0x5eed5eedULL);
  const int head_dims[] = {64, 128, 256};
  const int groups[] = {1, 2, 4, 8, 16};
  const int pow2_pages[] = {16, 32, 64, 128, 256};
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  for (int i = 0; i < 300; ++i) {
    ref::ProblemShape s;
    s.layout = pick(0, 1) ? KvLayout::paged : KvLayout::contiguous;
    s.batch = pick(1, 3);
    s.num_kv_heads = pick(1, 2);
    s.num_heads = s.num_kv_heads * groups[pick(0, 4)];
    s.head_dim = head_dims[pick(0, 2)];
    s.capacity = pick(1, 2048);
    s.page_size = pick(0, 1) ? pow2_pages[pick(0, 4)] : pick(16, 256);
    s.lengths = pick(0, 3) == 0 ? ref::LengthMode::full : ref::LengthMode::ragged;
    // Log-uniform, so small split counts are as well covered as the large ones.
    const int num_splits = std::clamp(
        static_cast<int>(std::lround(std::exp(std::uniform_real_distribution<double>(
            0.0, std::log(static_cast<double>(kMaxSplits)))(rng)))),
        1, kMaxSplits);

    const ref::HostProblem p = ref::random_problem(s, rng());
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }
}

TEST(ReferenceSplit, EverySplitCountOnOneProblem) {
  ref::ProblemShape s = shape_with_lengths({1, 63, 64, 65, 700, 1999}, 2000, KvLayout::paged);
  const ref::HostProblem p = ref::random_problem(s, 7);
  for (int num_splits = 1; num_splits <= kMaxSplits; ++num_splits) {
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }
}

TEST(ReferenceSplit, ManyActiveSplitsOnLongSequences) {
  // Long enough that all kMaxSplits splits hold work (16384 = 256 tiles), and just past
  // it, where tiles_per_split jumps to 2 and only 129 splits are active.
  const int full = kMaxSplits * kTokensPerTile;
  ref::ProblemShape s = shape_with_lengths({full, full + 1, 20000}, 20000);
  s.num_heads = 2;
  s.num_kv_heads = 1;
  const ref::HostProblem p = ref::random_problem(s, 11);
  for (int num_splits : {kMaxSplits, 200, 128}) {
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }
  const ref::SplitPartials parts = ref::split_attention(p, kMaxSplits);
  for (int s_idx = 0; s_idx < kMaxSplits; ++s_idx) {
    EXPECT_TRUE(std::isfinite(parts.lse[s_idx])) << "seq 0 split " << s_idx;
  }
  EXPECT_EQ(splitkv::active_splits(full + 1, kMaxSplits), 129);
}

TEST(ReferenceSplit, StableUnderLargeScores) {
  // Scores in the thousands overflow exp() without max-subtraction, in the unsplit
  // softmax and in the combine alike.
  ref::ProblemShape s = shape_with_lengths({500, 1000}, 1000, KvLayout::paged);
  s.softmax_scale = 1000.0;
  const ref::HostProblem p = ref::random_problem(s, 13);
  std::vector<double> out, lse;
  ref::attention(p, out, lse);
  for (double x : out) ASSERT_TRUE(std::isfinite(x));
  for (double x : lse) ASSERT_TRUE(std::isfinite(x));
  for (int num_splits : {2, 5, 16}) {
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }

  // With scores this far apart the softmax is one-hot on the best key.
  const int b = 0, h = 0, kv_head = 0;
  const double* q = &p.q[ref::q_offset(p, b, h)];
  int best = 0;
  double best_dot = -kInf;
  for (int t = 0; t < p.seqlens[b]; ++t) {
    const double* k = &p.k[ref::kv_offset(p, b, t, kv_head)];
    double dot = 0.0;
    for (int i = 0; i < p.head_dim; ++i) dot += q[i] * k[i];
    if (dot > best_dot) best_dot = dot, best = t;
  }
  const double* v = &p.v[ref::kv_offset(p, b, best, kv_head)];
  for (int i = 0; i < p.head_dim; ++i) EXPECT_NEAR(out[i], v[i], 1e-9) << "dim " << i;
}

// ---------------------------------------------------------------------------------
// Edge cases

TEST(ReferenceEdge, LengthOneIsTheOnlyValue) {
  const ref::HostProblem p = ref::random_problem(shape_with_lengths({1, 1}, 300), 17);
  std::vector<double> out, lse;
  ref::attention(p, out, lse);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.num_heads; ++h) {
      const int kv_head = h / p.group_size();
      const double* q = &p.q[ref::q_offset(p, b, h)];
      const double* k = &p.k[ref::kv_offset(p, b, 0, kv_head)];
      const double* v = &p.v[ref::kv_offset(p, b, 0, kv_head)];
      double dot = 0.0;
      for (int i = 0; i < p.head_dim; ++i) dot += q[i] * k[i];
      EXPECT_NEAR(lse[b * p.num_heads + h], p.scale() * dot, 1e-14);
      for (int i = 0; i < p.head_dim; ++i) {
        EXPECT_NEAR(out[ref::q_offset(p, b, h) + i], v[i], 1e-15);
      }
    }
  }
  for (int num_splits : {1, 2, 7, kMaxSplits}) {
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_EQ(splitkv::active_splits(1, num_splits), 1);
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }
}

TEST(ReferenceEdge, LengthShorterThanSplitCount) {
  const ref::HostProblem p =
      ref::random_problem(shape_with_lengths({2, 5, 63, 64, 65, 127}, 128), 19);
  for (int num_splits : {8, 100, kMaxSplits}) {
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }
}

TEST(ReferenceEdge, MoreSplitsThanTilesLeavesEmptySplits) {
  // 300 tokens are 5 tiles: with 16 splits each active split holds one tile and the
  // other 11 are empty.
  const ref::HostProblem p = ref::random_problem(shape_with_lengths({300}, 300), 23);
  const int num_splits = 16;
  ASSERT_EQ(splitkv::active_splits(300, num_splits), 5);
  const ref::SplitPartials parts = ref::split_attention(p, num_splits);
  for (int h = 0; h < p.num_heads; ++h) {
    for (int s = 0; s < num_splits; ++s) {
      const std::size_t row = static_cast<std::size_t>(h) * num_splits + s;
      if (s < 5) {
        EXPECT_TRUE(std::isfinite(parts.lse[row])) << "head " << h << " split " << s;
      } else {
        EXPECT_EQ(parts.lse[row], -kInf) << "head " << h << " split " << s;
        for (int i = 0; i < p.head_dim; ++i) {
          ASSERT_EQ(parts.out[row * p.head_dim + i], 0.0) << "head " << h << " split " << s;
        }
      }
    }
  }
  EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
}

TEST(ReferenceEdge, CombineIgnoresWhateverEmptySplitsHold) {
  // The kernel never writes the workspace slots of empty splits, so they hold stale data;
  // the combine must not read them. Sequences of different lengths have different
  // numbers of active splits in the same partials.
  const ref::HostProblem p =
      ref::random_problem(shape_with_lengths({0, 10, 200, 1000}, 1000, KvLayout::paged), 29);
  const int num_splits = 32;
  ref::SplitPartials parts = ref::split_attention(p, num_splits);
  std::vector<double> clean_out, clean_lse;
  ref::combine(p, parts, clean_out, clean_lse);

  for (int b = 0; b < p.batch; ++b) {
    const int active = splitkv::active_splits(p.seqlens[b], num_splits);
    for (int h = 0; h < p.num_heads; ++h) {
      for (int s = active; s < num_splits; ++s) {
        const std::size_t row = (static_cast<std::size_t>(b) * p.num_heads + h) * num_splits + s;
        parts.lse[row] = (s % 2) ? std::nan("") : 1e6;
        for (int i = 0; i < p.head_dim; ++i) parts.out[row * p.head_dim + i] = std::nan("");
      }
    }
  }
  std::vector<double> out, lse;
  ref::combine(p, parts, out, lse);
  EXPECT_EQ(rel_error(out, clean_out), 0.0);
  EXPECT_EQ(rel_error(lse, clean_lse), 0.0);
}

TEST(ReferenceEdge, GroupOf16UsesItsOwnKvHead) {
  // Every query head must attend with kv head h / group. Rebuild each (sequence, head)
  // as a one-head problem holding only its kv head's tokens, and compare.
  ref::ProblemShape s = shape_with_lengths({77, 300}, 300, KvLayout::paged);
  s.num_kv_heads = 2;
  s.num_heads = 32;
  s.head_dim = 128;
  const ref::HostProblem p = ref::random_problem(s, 31);
  ASSERT_EQ(p.group_size(), 16);
  std::vector<double> out, lse;
  ref::attention(p, out, lse);

  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.num_heads; ++h) {
      const int kv_head = h / 16;
      ref::HostProblem one;
      one.batch = one.num_heads = one.num_kv_heads = 1;
      one.head_dim = p.head_dim;
      one.cache_capacity = p.seqlens[b];
      one.seqlens = {p.seqlens[b]};
      one.q.assign(p.q.begin() + ref::q_offset(p, b, h),
                   p.q.begin() + ref::q_offset(p, b, h) + p.head_dim);
      for (int t = 0; t < p.seqlens[b]; ++t) {
        const std::size_t at = ref::kv_offset(p, b, t, kv_head);
        one.k.insert(one.k.end(), p.k.begin() + at, p.k.begin() + at + p.head_dim);
        one.v.insert(one.v.end(), p.v.begin() + at, p.v.begin() + at + p.head_dim);
      }
      std::vector<double> one_out, one_lse;
      ref::attention(one, one_out, one_lse);
      const std::vector<double> got(out.begin() + ref::q_offset(p, b, h),
                                    out.begin() + ref::q_offset(p, b, h) + p.head_dim);
      EXPECT_LT(rel_error(got, one_out), 1e-15) << "seq " << b << " head " << h;
      EXPECT_NEAR(lse[b * p.num_heads + h], one_lse[0], 1e-14) << "seq " << b << " head " << h;
    }
  }
  for (int num_splits : {1, 3, 5}) {
    SCOPED_TRACE(describe(p, num_splits));
    EXPECT_LT(split_combine_error(p, num_splits), 1e-12);
  }
}

TEST(ReferenceEdge, LengthZeroGivesZerosAndNegativeInfinity) {
  for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
    const ref::HostProblem p = ref::random_problem(shape_with_lengths({0, 100, 0}, 128, layout), 37);
    SCOPED_TRACE(describe(p, 0));
    std::vector<double> out, lse;
    ref::attention(p, out, lse);
    for (int b : {0, 2}) {
      for (int h = 0; h < p.num_heads; ++h) {
        EXPECT_EQ(lse[b * p.num_heads + h], -kInf);
        for (int i = 0; i < p.head_dim; ++i) EXPECT_EQ(out[ref::q_offset(p, b, h) + i], 0.0);
      }
    }
    for (int h = 0; h < p.num_heads; ++h) EXPECT_TRUE(std::isfinite(lse[p.num_heads + h]));

    for (int num_splits : {1, 4, kMaxSplits}) {
      EXPECT_EQ(splitkv::active_splits(0, num_splits), 0);
      const ref::SplitPartials parts = ref::split_attention(p, num_splits);
      for (int h = 0; h < p.num_heads; ++h) {
        for (int s = 0; s < num_splits; ++s) {
          EXPECT_EQ(parts.lse[static_cast<std::size_t>(h) * num_splits + s], -kInf);
        }
      }
      std::vector<double> split_out, split_lse;
      ref::combine(p, parts, split_out, split_lse);
      for (int b : {0, 2}) {
        for (int h = 0; h < p.num_heads; ++h) {
          EXPECT_EQ(split_lse[b * p.num_heads + h], -kInf) << "S=" << num_splits;
          for (int i = 0; i < p.head_dim; ++i) {
            EXPECT_EQ(split_out[ref::q_offset(p, b, h) + i], 0.0) << "S=" << num_splits;
          }
        }
      }
      EXPECT_LT(rel_error(split_out, out), 1e-12) << "S=" << num_splits;
      EXPECT_LT(rel_error(split_lse, lse), 1e-12) << "S=" << num_splits;
    }
  }
}

TEST(ReferenceEdge, RejectsSplitCountsOutsideTheKernelRange) {
  const ref::HostProblem p = ref::random_problem(shape_with_lengths({10}, 64), 41);
  EXPECT_THROW(ref::split_attention(p, 0), std::invalid_argument);
  EXPECT_THROW(ref::split_attention(p, kMaxSplits + 1), std::invalid_argument);
}

// ---------------------------------------------------------------------------------
// The split partition shared with the kernels

TEST(SplitPartition, DisjointCoveringTileAlignedForAllSmallCases) {
  for (int seqlen = 0; seqlen <= 2000; ++seqlen) {
    for (int num_splits = 1; num_splits <= 300; ++num_splits) {
      const int active = splitkv::active_splits(seqlen, num_splits);
      ASSERT_GE(active, seqlen > 0 ? 1 : 0) << seqlen << '/' << num_splits;
      ASSERT_LE(active, num_splits) << seqlen << '/' << num_splits;

      int next = 0;  // where the next non-empty split must begin
      int non_empty = 0;
      for (int s = 0; s < num_splits; ++s) {
        const splitkv::SplitRange r = splitkv::split_range(seqlen, num_splits, s);
        ASSERT_LE(r.begin, r.end) << seqlen << '/' << num_splits << " split " << s;
        ASSERT_GE(r.begin, 0);
        ASSERT_LE(r.end, seqlen);
        const bool empty = r.begin == r.end;
        // Active splits are exactly the leading non-empty ones.
        ASSERT_EQ(!empty, s < active) << seqlen << '/' << num_splits << " split " << s;
        if (empty) continue;
        ++non_empty;
        // Ranges in split order abut: together with begin 0 and end seqlen below, they
        // are disjoint and cover [0, seqlen).
        ASSERT_EQ(r.begin, next) << seqlen << '/' << num_splits << " split " << s;
        ASSERT_EQ(r.begin % kTokensPerTile, 0) << seqlen << '/' << num_splits << " split " << s;
        if (s + 1 < active) {
          ASSERT_EQ(r.end % kTokensPerTile, 0) << seqlen << '/' << num_splits << " split " << s;
        }
        next = r.end;
      }
      ASSERT_EQ(next, seqlen) << seqlen << '/' << num_splits;
      ASSERT_EQ(non_empty, active) << seqlen << '/' << num_splits;
      // Splits past the launched count (a graph captured with more) are empty too.
      const splitkv::SplitRange past = splitkv::split_range(seqlen, num_splits, num_splits);
      ASSERT_EQ(past.begin, past.end) << seqlen << '/' << num_splits;
    }
  }
}

// ---------------------------------------------------------------------------------
// Layouts and the random generator

TEST(ReferenceLayout, PagedAndContiguousHoldingTheSameTokensAgree) {
  ref::ProblemShape s = shape_with_lengths({1, 100, 513, 1000}, 1000);
  s.num_heads = 8;
  s.num_kv_heads = 2;
  const ref::HostProblem contiguous = ref::random_problem(s, 43);
  std::vector<double> want_out, want_lse;
  ref::attention(contiguous, want_out, want_lse);

  for (int page_size : {16, 48, 64, 256}) {
    const ref::HostProblem paged = ref::relayout(contiguous, KvLayout::paged, page_size, 47);
    SCOPED_TRACE(describe(paged, 1));
    ASSERT_EQ(paged.layout, KvLayout::paged);
    std::vector<double> out, lse;
    ref::attention(paged, out, lse);
    // Same tokens in the same order through the same arithmetic: bit for bit equal.
    EXPECT_EQ(out, want_out);
    EXPECT_EQ(lse, want_lse);

    const ref::HostProblem back = ref::relayout(paged, KvLayout::contiguous, 0, 53);
    ref::attention(back, out, lse);
    EXPECT_EQ(out, want_out);
    EXPECT_EQ(lse, want_lse);

    std::vector<double> split_c, lse_c, split_p, lse_p;
    ref::combine(contiguous, ref::split_attention(contiguous, 6), split_c, lse_c);
    ref::combine(paged, ref::split_attention(paged, 6), split_p, lse_p);
    EXPECT_EQ(split_p, split_c);
    EXPECT_EQ(lse_p, lse_c);
  }
}

TEST(ReferenceLayout, KvOffsetFollowsTheKernelLayouts) {
  // The GPU tests upload k/v as these vectors, so the offsets must be exactly the layouts
  // of decode_params.hpp; numbers worked out by hand.
  ref::ProblemShape s = shape_with_lengths({40, 40}, 64);  // Hkv = 2, D = 64
  ref::HostProblem p = ref::random_problem(s, 73);
  // contiguous [B, cap, Hkv, D]: ((1 * 64 + 37) * 2 + 1) * 64
  EXPECT_EQ(ref::kv_offset(p, 1, 37, 1), 12992u);

  s.layout = KvLayout::paged;
  s.page_size = 16;
  p = ref::random_problem(s, 73);
  ASSERT_EQ(p.max_pages_per_seq, 4);
  p.block_table[1 * 4 + 2] = 5;  // token 37 of sequence 1 is slot 5 of its page 2
  // paged [num_pages, page_size, Hkv, D]: ((5 * 16 + 5) * 2 + 1) * 64
  EXPECT_EQ(ref::kv_offset(p, 1, 37, 1), 10944u);
}

TEST(ReferenceLayout, IgnoresSlotsPastTheRealLength) {
  for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged}) {
    const ref::HostProblem p = ref::random_problem(shape_with_lengths({70, 5}, 200, layout), 59);
    SCOPED_TRACE(describe(p, 1));
    std::vector<double> out, lse;
    ref::attention(p, out, lse);

    ref::HostProblem past = p;
    for (int b = 0; b < p.batch; ++b) {
      for (int t = p.seqlens[b]; t < p.capacity_tokens(); ++t) {
        for (int h = 0; h < p.num_kv_heads; ++h) {
          const std::size_t at = ref::kv_offset(p, b, t, h);
          std::fill_n(past.k.begin() + at, p.head_dim, 100.0);
          std::fill_n(past.v.begin() + at, p.head_dim, 100.0);
        }
      }
    }
    std::vector<double> out2, lse2;
    ref::attention(past, out2, lse2);
    EXPECT_EQ(out2, out);
    EXPECT_EQ(lse2, lse);

    // And the last real token does count.
    ref::HostProblem last = p;
    const std::size_t at = ref::kv_offset(p, 0, p.seqlens[0] - 1, 0);
    last.v[at] += 1.0;
    ref::attention(last, out2, lse2);
    EXPECT_NE(out2[0], out[0]);
  }
}

TEST(ReferenceGenerator, PagedTablesArePermutationsAndValuesAreNonZero) {
  ref::ProblemShape s;
  s.layout = KvLayout::paged;
  s.batch = 4;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.capacity = 1000;
  s.page_size = 64;
  const ref::HostProblem p = ref::random_problem(s, 61);

  EXPECT_EQ(p.max_pages_per_seq, 16);  // 1000 tokens round up to 16 pages of 64
  EXPECT_GT(p.num_pages, p.batch * p.max_pages_per_seq);
  ASSERT_EQ(p.block_table.size(), static_cast<std::size_t>(p.batch * p.max_pages_per_seq));
  const std::set<int32_t> distinct(p.block_table.begin(), p.block_table.end());
  EXPECT_EQ(distinct.size(), p.block_table.size()) << "a page is shared between slots";
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LT(*distinct.rbegin(), p.num_pages);
  int adjacent = 0;
  for (std::size_t i = 0; i + 1 < p.block_table.size(); ++i) {
    adjacent += p.block_table[i + 1] == p.block_table[i] + 1;
  }
  EXPECT_LT(adjacent, 8) << "block table looks like the identity";

  for (int32_t l : p.seqlens) {
    EXPECT_GE(l, 1);
    EXPECT_LE(l, s.capacity);
  }
  for (const std::vector<double>* values : {&p.q, &p.k, &p.v}) {
    for (double x : *values) {
      ASSERT_NE(x, 0.0);
      ASSERT_GE(x, -1.0);
      ASSERT_LE(x, 1.0);
    }
  }

  const ref::HostProblem same = ref::random_problem(s, 61);
  EXPECT_EQ(same.block_table, p.block_table);
  EXPECT_EQ(same.seqlens, p.seqlens);
  EXPECT_EQ(same.k, p.k);
  const ref::HostProblem other = ref::random_problem(s, 62);
  EXPECT_NE(other.k, p.k);
}

TEST(ReferenceGenerator, ShapeParamsDescribeTheSameProblem) {
  ref::ProblemShape s = shape_with_lengths({3, 40}, 100, KvLayout::paged);
  s.softmax_scale = 0.5;
  const ref::HostProblem p = ref::random_problem(s, 67);
  const splitkv::DecodeParams params = ref::shape_params(p);
  EXPECT_EQ(params.layout, KvLayout::paged);
  EXPECT_EQ(params.batch, 2);
  EXPECT_EQ(params.group_size(), p.group_size());
  EXPECT_EQ(params.capacity_tokens(), p.capacity_tokens());
  EXPECT_EQ(params.num_pages, p.num_pages);
  EXPECT_EQ(params.softmax_scale, 0.5f);
  EXPECT_EQ(params.q, nullptr);
}

TEST(ReferenceValidate, RejectsInconsistentProblems) {
  const ref::HostProblem good = ref::random_problem(shape_with_lengths({50, 90}, 100, KvLayout::paged), 71);
  EXPECT_NO_THROW(ref::validate(good));

  ref::HostProblem bad = good;
  bad.block_table[0] = good.num_pages;
  EXPECT_THROW(ref::validate(bad), std::invalid_argument);

  bad = good;
  bad.seqlens[1] = good.capacity_tokens() + 1;
  EXPECT_THROW(ref::validate(bad), std::invalid_argument);

  bad = good;
  bad.num_heads = 3;  // not a multiple of 2 kv heads
  EXPECT_THROW(ref::validate(bad), std::invalid_argument);

  bad = good;
  bad.v.pop_back();
  EXPECT_THROW(ref::validate(bad), std::invalid_argument);

  // Entries past a sequence's real pages are never read, so they may hold anything.
  bad = good;
  const int used = splitkv::ceil_div(good.seqlens[0], good.page_size);
  ASSERT_LT(used, good.max_pages_per_seq);
  bad.block_table[used] = -1;
  EXPECT_NO_THROW(ref::validate(bad));
}

}  // namespace
