#include "reference_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "splitkv/fp8_e4m3.hpp"
#include "splitkv/split_partition.hpp"

namespace splitkv::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("splitkv::reference: " + what);
}

std::size_t kv_elements(const HostProblem& p) {
  const std::size_t rows = p.layout == KvLayout::paged
                               ? static_cast<std::size_t>(p.num_pages) * p.page_size
                               : static_cast<std::size_t>(p.batch) * p.cache_capacity;
  return rows * p.num_kv_heads * p.head_dim;
}

// Softmax attention of one query over tokens [begin, end) of sequence b, normalized over
// that range only. Both the unsplit reference and every split go through here, so they
// differ only in which ranges they ask for and in how the combine merges them.
void attend_range(const HostProblem& p, int b, int h, int begin, int end, double* out,
                  double* lse) {
  const int d = p.head_dim;
  std::fill(out, out + d, 0.0);
  if (begin >= end) {
    *lse = kNegInf;
    return;
  }
  const double* q = p.q.data() + q_offset(p, b, h);
  const int kv_head = h / p.group_size();
  const bool fp8 = p.kv_dtype == KvDtype::fp8_e4m3;
  const std::size_t descale_index = static_cast<std::size_t>(b) * p.num_kv_heads + kv_head;
  const double k_descale = fp8 ? p.k_descale[descale_index] : 1.0;
  const double v_descale = fp8 ? p.v_descale[descale_index] : 1.0;
  const double scale = p.scale();

  std::vector<double> scores(static_cast<std::size_t>(end - begin));
  for (int t = begin; t < end; ++t) {
    const double* k = p.k.data() + kv_offset(p, b, t, kv_head);
    double dot = 0.0;
    for (int i = 0; i < d; ++i) dot += q[i] * (k[i] * k_descale);
    scores[t - begin] = scale * dot;
  }
  // Subtracting the max keeps exp() in range for any scale; it cancels in the ratio and
  // is added back to the lse.
  const double max_score = *std::max_element(scores.begin(), scores.end());
  double sum = 0.0;
  for (int t = begin; t < end; ++t) {
    const double w = std::exp(scores[t - begin] - max_score);
    sum += w;
    const double* v = p.v.data() + kv_offset(p, b, t, kv_head);
    for (int i = 0; i < d; ++i) out[i] += w * (v[i] * v_descale);
  }
  for (int i = 0; i < d; ++i) out[i] /= sum;
  *lse = max_score + std::log(sum);
}

void check_num_splits(int num_splits) {
  if (num_splits < 1 || num_splits > kMaxSplits) {
    fail("num_splits " + std::to_string(num_splits) + " outside [1, " +
         std::to_string(kMaxSplits) + "]");
  }
}

}  // namespace

double HostProblem::scale() const {
  return softmax_scale != 0.0 ? softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

void validate(const HostProblem& p) {
  if (p.batch < 1 || p.num_heads < 1 || p.num_kv_heads < 1 || p.head_dim < 1) {
    fail("batch, num_heads, num_kv_heads and head_dim must be positive");
  }
  if (p.num_heads % p.num_kv_heads != 0) {
    fail("num_heads " + std::to_string(p.num_heads) + " is not a multiple of num_kv_heads " +
         std::to_string(p.num_kv_heads));
  }
  if (p.layout == KvLayout::paged) {
    if (p.page_size < 1 || p.max_pages_per_seq < 1 || p.num_pages < 1) {
      fail("paged layout needs positive page_size, max_pages_per_seq and num_pages");
    }
    if (p.block_table.size() != static_cast<std::size_t>(p.batch) * p.max_pages_per_seq) {
      fail("block_table must hold batch * max_pages_per_seq entries");
    }
  } else if (p.cache_capacity < 0) {
    fail("negative cache_capacity");
  }
  if (p.q.size() != static_cast<std::size_t>(p.batch) * p.num_heads * p.head_dim) {
    fail("q must hold batch * num_heads * head_dim values");
  }
  if (p.k.size() != kv_elements(p) || p.v.size() != kv_elements(p)) {
    fail("k and v must each hold " + std::to_string(kv_elements(p)) + " values");
  }
  if (p.seqlens.size() != static_cast<std::size_t>(p.batch)) {
    fail("seqlens must hold batch entries");
  }
  if (p.kv_dtype == KvDtype::fp8_e4m3) {
    const std::size_t descales = static_cast<std::size_t>(p.batch) * p.num_kv_heads;
    if (p.k_descale.size() != descales || p.v_descale.size() != descales) {
      fail("fp8 k_descale and v_descale must each hold batch * num_kv_heads values");
    }
  } else if (p.kv_dtype != KvDtype::same_as_q) {
    fail("unknown kv_dtype");
  }
  for (int b = 0; b < p.batch; ++b) {
    const int len = p.seqlens[b];
    if (len < 0 || len > p.capacity_tokens()) {
      fail("seqlens[" + std::to_string(b) + "] = " + std::to_string(len) + " outside [0, " +
           std::to_string(p.capacity_tokens()) + "]");
    }
    if (p.layout != KvLayout::paged) continue;
    // Only pages that hold real tokens must be valid; the rest of a row is never read.
    for (int i = 0; i < ceil_div(len, p.page_size); ++i) {
      const int page = p.block_table[static_cast<std::size_t>(b) * p.max_pages_per_seq + i];
      if (page < 0 || page >= p.num_pages) {
        fail("block_table[" + std::to_string(b) + "][" + std::to_string(i) + "] = " +
             std::to_string(page) + " outside the pool of " + std::to_string(p.num_pages));
      }
    }
  }
}

std::size_t kv_offset(const HostProblem& p, int b, int t, int kv_head) {
  std::size_t row;  // index over the [.., num_kv_heads, head_dim] token rows of k/v
  if (p.layout == KvLayout::paged) {
    const int page = p.block_table[static_cast<std::size_t>(b) * p.max_pages_per_seq +
                                   t / p.page_size];
    row = static_cast<std::size_t>(page) * p.page_size + t % p.page_size;
  } else {
    row = static_cast<std::size_t>(b) * p.cache_capacity + t;
  }
  return (row * p.num_kv_heads + kv_head) * p.head_dim;
}

DecodeParams shape_params(const HostProblem& p) {
  DecodeParams params;
  params.layout = p.layout;
  params.batch = p.batch;
  params.num_heads = p.num_heads;
  params.num_kv_heads = p.num_kv_heads;
  params.head_dim = p.head_dim;
  params.cache_capacity = p.cache_capacity;
  params.page_size = p.page_size;
  params.max_pages_per_seq = p.max_pages_per_seq;
  params.num_pages = p.num_pages;
  params.num_splits = 1;
  params.softmax_scale = static_cast<float>(p.softmax_scale);
  params.kv_dtype = p.kv_dtype;
  return params;
}

void attention(const HostProblem& p, std::vector<double>& out, std::vector<double>& lse) {
  validate(p);
  out.assign(static_cast<std::size_t>(p.batch) * p.num_heads * p.head_dim, 0.0);
  lse.assign(static_cast<std::size_t>(p.batch) * p.num_heads, kNegInf);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.num_heads; ++h) {
      const std::size_t bh = static_cast<std::size_t>(b) * p.num_heads + h;
      attend_range(p, b, h, 0, p.seqlens[b], &out[bh * p.head_dim], &lse[bh]);
    }
  }
}

SplitPartials split_attention(const HostProblem& p, int num_splits) {
  validate(p);
  check_num_splits(num_splits);
  SplitPartials parts;
  parts.num_splits = num_splits;
  const std::size_t rows = static_cast<std::size_t>(p.batch) * p.num_heads * num_splits;
  parts.out.assign(rows * p.head_dim, 0.0);
  parts.lse.assign(rows, kNegInf);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.num_heads; ++h) {
      for (int s = 0; s < num_splits; ++s) {
        const SplitRange r = split_range(p.seqlens[b], num_splits, s);
        const std::size_t row = (static_cast<std::size_t>(b) * p.num_heads + h) * num_splits + s;
        attend_range(p, b, h, r.begin, r.end, &parts.out[row * p.head_dim], &parts.lse[row]);
      }
    }
  }
  return parts;
}

void combine(const HostProblem& p, const SplitPartials& parts, std::vector<double>& out,
             std::vector<double>& lse) {
  validate(p);
  check_num_splits(parts.num_splits);
  const int S = parts.num_splits;
  const int d = p.head_dim;
  const std::size_t rows = static_cast<std::size_t>(p.batch) * p.num_heads * S;
  if (parts.out.size() != rows * d || parts.lse.size() != rows) {
    fail("partials do not match the problem's batch, num_heads, head_dim and num_splits");
  }
  out.assign(static_cast<std::size_t>(p.batch) * p.num_heads * d, 0.0);
  lse.assign(static_cast<std::size_t>(p.batch) * p.num_heads, kNegInf);
  for (int b = 0; b < p.batch; ++b) {
    const int active = active_splits(p.seqlens[b], S);
    for (int h = 0; h < p.num_heads; ++h) {
      const std::size_t bh = static_cast<std::size_t>(b) * p.num_heads + h;
      if (active == 0) continue;  // empty sequence: zeros and -inf, like attention()
      const double* split_lse = &parts.lse[bh * S];
      const double* split_out = &parts.out[bh * S * d];
      // Each split's output is normalized by its own denominator exp(lse_s); weighting by
      // exp(lse_s - max) restores the shared denominator without overflow.
      const double max_lse = *std::max_element(split_lse, split_lse + active);
      double sum = 0.0;
      double* o = &out[bh * d];
      for (int s = 0; s < active; ++s) {
        const double w = std::exp(split_lse[s] - max_lse);
        sum += w;
        for (int i = 0; i < d; ++i) o[i] += w * split_out[static_cast<std::size_t>(s) * d + i];
      }
      for (int i = 0; i < d; ++i) o[i] /= sum;
      lse[bh] = max_lse + std::log(sum);
    }
  }
}

namespace {

void fill_uniform(std::vector<double>& values, std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  values.resize(n);
  for (double& x : values) x = dist(rng);
}

// Block table rows for `batch` sequences drawn from a shuffled pool, so a sequence's
// pages are scattered and the spare pages are scattered among them.
void shuffled_block_table(HostProblem& p, std::mt19937_64& rng) {
  std::vector<int32_t> pool(static_cast<std::size_t>(p.num_pages));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  p.block_table.assign(pool.begin(),
                       pool.begin() + static_cast<std::ptrdiff_t>(p.batch) * p.max_pages_per_seq);
}

void set_paged_geometry(HostProblem& p, int capacity, int page_size, int spare_pages) {
  if (page_size < 1) fail("page_size must be positive");
  if (spare_pages < 0) fail("spare_pages must be non-negative");
  p.layout = KvLayout::paged;
  p.cache_capacity = 0;
  p.page_size = page_size;
  p.max_pages_per_seq = std::max(1, ceil_div(capacity, page_size));
  p.num_pages = p.batch * p.max_pages_per_seq + spare_pages;
}

}  // namespace

HostProblem random_problem(const ProblemShape& shape, uint64_t seed) {
  if (shape.batch < 1 || shape.num_heads < 1 || shape.num_kv_heads < 1 || shape.head_dim < 1) {
    fail("batch, num_heads, num_kv_heads and head_dim must be positive");
  }
  std::mt19937_64 rng(seed);
  HostProblem p;
  p.batch = shape.batch;
  p.num_heads = shape.num_heads;
  p.num_kv_heads = shape.num_kv_heads;
  p.head_dim = shape.head_dim;
  p.softmax_scale = shape.softmax_scale;
  if (shape.capacity < 1) fail("capacity must be positive");
  if (shape.layout == KvLayout::paged) {
    set_paged_geometry(p, shape.capacity, shape.page_size, shape.spare_pages);
  } else {
    p.layout = KvLayout::contiguous;
    p.cache_capacity = shape.capacity;
  }

  switch (shape.lengths) {
    case LengthMode::full:
      p.seqlens.assign(static_cast<std::size_t>(p.batch), shape.capacity);
      break;
    case LengthMode::ragged: {
      std::uniform_int_distribution<int32_t> len(1, shape.capacity);
      p.seqlens.resize(static_cast<std::size_t>(p.batch));
      for (int32_t& l : p.seqlens) l = len(rng);
      break;
    }
    case LengthMode::explicit_:
      if (shape.seqlens.size() != static_cast<std::size_t>(p.batch)) {
        fail("explicit lengths need one seqlen per sequence");
      }
      // Lengths must fit the requested capacity, not just the page-rounded one, so the
      // same shape is valid in both layouts.
      for (int32_t l : shape.seqlens) {
        if (l < 0 || l > shape.capacity) fail("explicit seqlen outside [0, capacity]");
      }
      p.seqlens = shape.seqlens;
      break;
  }

  if (p.layout == KvLayout::paged) shuffled_block_table(p, rng);
  fill_uniform(p.q, static_cast<std::size_t>(p.batch) * p.num_heads * p.head_dim, rng);
  fill_uniform(p.k, kv_elements(p), rng);
  fill_uniform(p.v, kv_elements(p), rng);
  validate(p);
  return p;
}

HostProblem relayout(const HostProblem& src, KvLayout layout, int page_size, uint64_t seed) {
  validate(src);
  std::mt19937_64 rng(seed);
  HostProblem dst;
  dst.batch = src.batch;
  dst.num_heads = src.num_heads;
  dst.num_kv_heads = src.num_kv_heads;
  dst.head_dim = src.head_dim;
  dst.softmax_scale = src.softmax_scale;
  dst.kv_dtype = src.kv_dtype;
  dst.k_descale = src.k_descale;
  dst.v_descale = src.v_descale;
  dst.q = src.q;
  dst.seqlens = src.seqlens;
  const int capacity = std::max(1, src.capacity_tokens());
  if (layout == KvLayout::paged) {
    set_paged_geometry(dst, capacity, page_size, /*spare_pages=*/3);
    shuffled_block_table(dst, rng);
  } else {
    dst.layout = KvLayout::contiguous;
    dst.cache_capacity = capacity;
  }
  // Start from random values so slots past the real lengths are not copies of anything (for an
  // fp8 cache, random e4m3 values, so the copy is an fp8 cache too).
  fill_uniform(dst.k, kv_elements(dst), rng);
  fill_uniform(dst.v, kv_elements(dst), rng);
  if (dst.kv_dtype == KvDtype::fp8_e4m3) {
    for (double& x : dst.k) x = e4m3_to_double(double_to_e4m3(x));
    for (double& x : dst.v) x = e4m3_to_double(double_to_e4m3(x));
  }
  for (int b = 0; b < src.batch; ++b) {
    for (int t = 0; t < src.seqlens[b]; ++t) {
      for (int h = 0; h < src.num_kv_heads; ++h) {
        const std::size_t from = kv_offset(src, b, t, h);
        const std::size_t to = kv_offset(dst, b, t, h);
        std::copy_n(src.k.begin() + from, src.head_dim, dst.k.begin() + to);
        std::copy_n(src.v.begin() + from, src.head_dim, dst.v.begin() + to);
      }
    }
  }
  validate(dst);
  return dst;
}

Fp8Codes make_fp8_cache(HostProblem& p, uint64_t seed, double code_range, double descale_low,
                        double descale_high) {
  validate(p);
  if (!(descale_low > 0.0) || !(descale_high >= descale_low)) fail("descales must be positive, low <= high");
  std::mt19937_64 rng(seed);
  Fp8Codes codes;
  auto quantize = [&](std::vector<double>& values, std::vector<std::uint8_t>& out) {
    out.resize(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      out[i] = double_to_e4m3(values[i] * code_range);
      values[i] = e4m3_to_double(out[i]);
    }
  };
  quantize(p.k, codes.k);
  quantize(p.v, codes.v);
  std::uniform_real_distribution<double> descale(descale_low, descale_high);
  const std::size_t descales = static_cast<std::size_t>(p.batch) * p.num_kv_heads;
  p.k_descale.resize(descales);
  p.v_descale.resize(descales);
  // Rounded to float: the device holds fp32 descales, and the reference must use the same ones.
  for (double& x : p.k_descale) x = static_cast<float>(descale(rng));
  for (double& x : p.v_descale) x = static_cast<float>(descale(rng));
  p.kv_dtype = KvDtype::fp8_e4m3;
  validate(p);
  return codes;
}

}  // namespace splitkv::reference
