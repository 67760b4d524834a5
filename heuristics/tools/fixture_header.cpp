// Build-time tool: fits the synthetic fixture and writes its header (argv[1]), which the
// generated-header checks compile with g++ and nvcc; argv[2], a peer's kernel (fa3,
// flashinfer), fits the same rows as that kernel's, for a header with its call site; argv[3],
// a KV dtype class (fp8_e4m3), as that cache's, for a header with its kKvDtype.
#include <exception>
#include <iostream>
#include <optional>

#include "fixture_fit.hpp"
#include "splitkv/heuristics/atomic_file.hpp"

int main(int argc, char** argv) {
  namespace h = splitkv::heuristics;
  const std::optional<h::KvDtypeClass> kv_dtype =
      argc == 4 ? h::parse_kv_dtype_class(argv[3]) : std::optional<h::KvDtypeClass>(h::KvDtypeClass::sixteen_bit);
  if (argc < 2 || argc > 4 || !kv_dtype) {
    std::cerr << "usage: heuristics_fixture_header OUT.hpp [KERNEL [16bit|fp8_e4m3]]\n";
    return 2;
  }
  try {
    const h::Measurements m = h::fixture::measurements(argc >= 3 ? argv[2] : "splitkv", *kv_dtype);
    h::FitOptions options;
    if (m.kv_dtype == h::KvDtypeClass::fp8_e4m3) options.occupancy = h::kFp8KernelOccupancy;  // as run_fit
    const h::FittedHeuristic fit = h::fit_heuristic(m.shapes, options);
    const std::string name =
        "num_splits_" + h::table_short_name(m.kernel, h::fixture::kShortName, m.kv_dtype) + ".hpp";
    h::write_file_atomically(argv[1], h::fixture::header(m, fit, "fixture/" + name));
  } catch (const std::exception& error) {
    std::cerr << "heuristics_fixture_header: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
