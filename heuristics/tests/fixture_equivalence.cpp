// The header the emitter wrote for the synthetic fixture answers exactly what the library's
// in-memory tables answer, for every input of a dense sweep (in range, between grid points,
// beyond the edges), and the runtime dispatch serves it when it is registered.
#include <cstdio>
#include <string>

#include "fixture_fit.hpp"
#include "num_splits_synthetic.hpp"
#include "splitkv/num_splits.hpp"

namespace h = splitkv::heuristics;
namespace table = splitkv::generated::synthetic;

int main() {
  const h::Measurements m = h::fixture::measurements();
  const h::FittedHeuristic fit = h::fit_heuristic(m.shapes);
  int failures = 0, checked = 0;
  // One input, both tables: the header's answer against the library's.
  const auto compare = [&](int b, int kv, int d, int len, int page) {
    ++checked;
    const int header[2] = {table::determine_num_splits_real_length(b, kv, d, len, page),
                           table::determine_num_splits_capacity_only(b, kv, d, len, page)};
    const int library[2] = {fit.real_length.lookup(b, kv, d, len, page), fit.capacity_only.lookup(b, kv, d, len, page)};
    for (int t = 0; t < 2; ++t) {
      if (header[t] != library[t] && ++failures <= 10) {
        std::printf("FAIL %s: batch %d kv %d d %d tokens %d page %d: header %d, library %d\n",
                    t == 0 ? "real length" : "capacity", b, kv, d, len, page, header[t], library[t]);
      }
    }
  };
  for (int b = 1; b <= 4096; b = b < 8 ? b + 1 : b * 3 / 2) {
    for (int kv : {1, 2, 5, 8, 32, 48}) {
      for (int d : {32, 64, 90, 91, 128, 181, 182, 256, 320}) {
        for (int len = 1; len <= (1 << 22); len = len < 200 ? len + 7 : len * 5 / 4) {
          for (int page : {0, 8, 16, 31, 32, 64, 128}) compare(b, kv, d, len, page);
        }
      }
    }
  }
  // Extremes the dense sweep does not reach: lengths up to INT_MAX at CTA counts up to and past
  // the 2^20 where the header's guard leaves 32-bit arithmetic.
  for (int b : {1, 7, 1000, 21845, 21846, 65536, 1 << 20}) {
    for (int kv : {1, 3, 48}) {
      for (int d : {64, 128, 256}) {
        for (int len : {1 << 22, 40000000, 1 << 27, 1 << 30, 2147483647}) {
          for (int page : {0, 16}) compare(b, kv, d, len, page);
        }
      }
    }
  }

  // The emitter is deterministic: fitting and emitting again gives the same bytes.
  const std::string a = h::fixture::header(m, fit, "fixture/num_splits_synthetic.hpp");
  const std::string b = h::fixture::header(h::fixture::measurements(), h::fit_heuristic(m.shapes),
                                           "fixture/num_splits_synthetic.hpp");
  if (a != b) {
    ++failures;
    std::printf("FAIL: emitting twice gave different bytes\n");
  }

  // Runtime dispatch: the table serves its own GPU and SM count, nothing else.
  const splitkv::GeneratedTable tables[] = {{"synthetic", table::kGpuName, table::kSmCount,
                                             &table::determine_num_splits_real_length,
                                             &table::determine_num_splits_capacity_only}};
  const splitkv::GeneratedTableList list{tables, 1};
  const auto policy = splitkv::NumSplitsPolicy::for_device(table::kGpuName, table::kSmCount, list);
  const splitkv::NumSplitsShape shape{4, 32, 8, 128, 8192, 131072, 16};
  const splitkv::NumSplitsChoice choice = policy.choose(shape);
  if (policy.table() == nullptr || choice.source != splitkv::NumSplitsSource::real_length_table ||
      choice.num_splits != fit.real_length.lookup(4, 8, 128, 8192, 16)) {
    ++failures;
    std::printf("FAIL: dispatch did not serve the registered table\n");
  }
  const auto other = splitkv::NumSplitsPolicy::for_device(table::kGpuName, table::kSmCount - 18, list);
  if (other.table() != nullptr || other.choose(shape).source != splitkv::NumSplitsSource::one_wave_fallback) {
    ++failures;
    std::printf("FAIL: a different SM count must fall back\n");
  }
  std::printf("%d lookups compared, %d failures\n", checked, failures);
  return failures == 0 ? 0 : 1;
}
