// Build-time tool: fits the synthetic fixture and writes its header (argv[1]), which the
// generated-header checks compile with g++ and nvcc.
#include <exception>
#include <iostream>

#include "fixture_fit.hpp"
#include "splitkv/heuristics/atomic_file.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: heuristics_fixture_header OUT.hpp\n";
    return 2;
  }
  try {
    namespace h = splitkv::heuristics;
    const h::Measurements m = h::fixture::measurements();
    const h::FittedHeuristic fit = h::fit_heuristic(m.shapes);
    h::write_file_atomically(argv[1], h::fixture::header(m, fit, "fixture/num_splits_synthetic.hpp"));
  } catch (const std::exception& error) {
    std::cerr << "heuristics_fixture_header: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
