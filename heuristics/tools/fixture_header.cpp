// Build-time tool: fits the synthetic fixture and writes its header (argv[1]), which the
// generated-header checks compile with g++ and nvcc; argv[2], a peer's kernel (fa3,
// flashinfer), fits the same rows as that kernel's, for a header with its call site.
#include <exception>
#include <iostream>

#include "fixture_fit.hpp"
#include "splitkv/heuristics/atomic_file.hpp"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: heuristics_fixture_header OUT.hpp [KERNEL]\n";
    return 2;
  }
  try {
    namespace h = splitkv::heuristics;
    const h::Measurements m = h::fixture::measurements(argc == 3 ? argv[2] : "splitkv");
    const h::FittedHeuristic fit = h::fit_heuristic(m.shapes);
    const std::string name = "num_splits_" + h::table_short_name(m.kernel, h::fixture::kShortName) + ".hpp";
    h::write_file_atomically(argv[1], h::fixture::header(m, fit, "fixture/" + name));
  } catch (const std::exception& error) {
    std::cerr << "heuristics_fixture_header: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
