#include "fit_command.hpp"

#include "option_checks.hpp"
#include "output_paths.hpp"
#include "progress_printer.hpp"

#include <filesystem>
#include <map>
#include <ostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "splitkv/heuristics/atomic_file.hpp"
#include "splitkv/heuristics/fit_pipeline.hpp"
#include "splitkv/heuristics/generated_table.hpp"
#include "splitkv/heuristics/peer_kernels.hpp"
#include "splitkv/tuner/sha256.hpp"

namespace splitkv::cli {
namespace {

constexpr int kExitDifferent = 1;
constexpr int kExitBadInput = 2;

using namespace splitkv::heuristics;

void print_fit(const FitProducts& p, std::ostream& out) {
  const Measurements& m = p.training;
  out << fmt::format("input     {} ({} rows, {} ok, {} shapes; gpu {}, {} SMs from the {}; kernel {})\n",
                     m.source_display, m.counts.rows, m.counts.ok, m.counts.shapes, m.gpu, m.sm_count,
                     m.sm_count_source, m.kernel);
  if (!kv_dtype_argument(m).empty()) {
    out << fmt::format("kv cache  {} ({} ok rows of another class ignored)\n", to_string(m.kv_dtype),
                       m.counts.other_kv_dtypes);
  }
  for (const auto& [status, n] : m.counts.excluded) out << fmt::format("excluded  {} rows with status {}\n", n, status);
  const FitNotes& n = p.fit.notes;
  if (n.page_sizes.size() > 1) {
    out << fmt::format("pages     {} ({})\n", fmt::join(n.page_sizes, ", "),
                       n.page_sizes_separate ? "a table per page size" : "one paged table");
  }
}

// Reads the header --check compares against and checks that it claims to be this fit's:
// emitted by `splitkv fit` and complete, for this CSV's GPU and SM count, from this CSV's
// rows of this kernel.
GeneratedHeader check_committed_header(const FitProducts& p) {
  std::error_code error;
  if (!std::filesystem::exists(p.header_path, error)) {
    throw InputError(fmt::format("{}: no such file; run without --check to write it (or name the header with --out)",
                                 p.header_path));
  }
  GeneratedHeader h = read_generated_header(p.header_path);
  if (h.gpu_name != p.training.gpu || h.sm_count != p.training.sm_count) {
    throw InputError(fmt::format("{}: kGpuName/kSmCount: made for \"{}\" ({} SMs), but {} was measured on \"{}\" "
                                 "({} SMs); check it against that GPU's results",
                                 p.header_path, h.gpu_name, h.sm_count, p.training.source_display, p.training.gpu,
                                 p.training.sm_count));
  }
  const std::string arguments = kernel_argument(p.training.kernel) + kv_dtype_argument(p.training);
  if (h.input_sha256 != p.training.sha256) {
    throw InputError(fmt::format("{}: kInputSha256: fitted on a CSV with sha256 {}, not {} (sha256 {}); "
                                 "regenerate it with: splitkv fit {}{} --out {}",
                                 p.header_path, h.input_sha256.substr(0, 12), p.training.source_display,
                                 p.training.sha256.substr(0, 12), p.training.source, arguments, p.header_path));
  }
  if (h.kernel != p.training.kernel) {
    throw InputError(fmt::format("{}: kKernel: fitted on the rows of kernel {}, not {}; check it with --kernel {}",
                                 p.header_path, h.kernel, p.training.kernel, h.kernel));
  }
  // One CSV may hold both caches' rows, so the sha256 alone does not tell the tables apart.
  if (h.kv_dtype != p.training.kv_dtype) {
    throw InputError(fmt::format("{}: kKvDtype: a table for the {} KV cache, not {} (the rows this check fitted); "
                                 "check it with --kv-dtype {}",
                                 p.header_path, to_string(h.kv_dtype), to_string(p.training.kv_dtype),
                                 to_string(h.kv_dtype)));
  }
  return h;
}

}  // namespace

CLI::App* add_fit_command(CLI::App& app, FitCommandOptions& options) {
  CLI::App* fit = app.add_subcommand(
      "fit",
      "Fit the num_splits lookup tables on a results CSV's rows of one kernel and KV cache class and emit the "
      "generated header (plus a regret "
      "report with --report). Exit codes: 0 done (--check: up to date), 1 --check found a difference or an "
      "output could not be written, 2 invalid input.");
  fit->add_option("results", options.results_csvs,
                  "Results CSV of a sweep (tuner/CSV_SCHEMA.md), e.g. results/h200/full.csv; its .json sidecar is "
                  "read when present. Several CSVs of one GPU and kernel are fitted together (a shape may be "
                  "measured in only one of them); the header's provenance then names them all.")
      ->required();
  fit->add_option("--out", options.out_path,
                  "Generated header to write. Default: heuristics/generated/num_splits_<gpu>.hpp");
  fit->add_option("--report", options.report_dir,
                  "Folder for the report: regret.csv, regret_points.csv, regret.md (with cross-validation) and "
                  "fit.md. Created when missing.");
  fit->add_flag("--no-cross-validation", options.no_cross_validation,
                "With --report: skip the cross-validation (a refit of the table per context length, batch and CTA "
                "count held out); regret.md then reports the in-sample regret only. "
                "scripts/report.sh uses it because `splitkv evaluate` rewrites the same files with them.");
  fit->add_flag("--check", options.check,
                "Write nothing; regenerate the header in memory and compare it byte for byte with --out. "
                "Exit 1 (with the first differing line) when they differ; exit 2 when --out is missing, is "
                "not a complete generated header, was made for another GPU or from another CSV (its sha256), "
                "or has tables edited by hand.");
  fit->add_option("--gpu-name", options.gpu_name,
                  "Short name of the GPU: the C++ namespace splitkv::generated::<name> and the file suffix "
                  "(<kernel>_<name> for another kernel than splitkv, fp8_<name> for an fp8_e4m3 KV cache). Default: "
                  "from the CSV's gpu column (\"NVIDIA H200\" -> h200).");
  fit->add_option("--kernel", options.kernel,
                  "Kernel whose rows to fit when the CSV holds several. Default: the only one, or splitkv. A "
                  "peer's kernel (fa3, flashinfer) is fitted on its fixed-split rows only, into "
                  "num_splits_<kernel>_<gpu>.hpp with a lookup taking that peer's call-site arguments; its "
                  "policy rows (fa3_heuristic_capacity, fa3_heuristic_maxlen, flashinfer_heuristic) go to the "
                  "--report.");
  fit->add_option("--kv-dtype", options.kv_dtype,
                  "KV cache class whose rows to fit: 16bit (dtype bf16 and fp16, one table for both) or fp8_e4m3. "
                  "Default: the only class the kernel's ok rows hold; a CSV holding both is refused without it. An "
                  "fp8_e4m3 table goes to num_splits_fp8_<gpu>.hpp, namespace splitkv::generated::fp8_<gpu>, with "
                  "kKvDtype = \"fp8_e4m3\" (a 16-bit header has no kKvDtype).")
      ->check(CLI::IsMember({"16bit", "fp8_e4m3"}));
  fit->add_option("--num-sms", options.num_sms,
                  "SM count of the GPU, for CSVs without a sidecar naming it (also overrides the sidecar).")
      ->check(positive_count());
  return fit;
}

int run_fit_command(const FitCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (!output_not_special(options.out_path, "fit", "--out", err) ||
      (!options.check && !output_folder_exists(options.out_path, "fit", "--out", err)))
    return 2;
  FitRequest request;
  request.results_csv = options.results_csvs.front();
  request.more_results_csvs.assign(options.results_csvs.begin() + 1, options.results_csvs.end());
  request.header_path = options.out_path.empty() ? "default" : options.out_path;
  request.gpu_short_name = options.gpu_name;
  request.kernel = options.kernel;
  if (!options.kv_dtype.empty()) request.kv_dtype = parse_kv_dtype_class(options.kv_dtype);
  request.num_sms = options.num_sms;
  request.cross_validate = !options.check && !options.report_dir.empty() && !options.no_cross_validation;

  FitProducts products;
  try {
    const ProgressPrinter progress(err, "fit");
    products = run_fit(request);
  } catch (const InputError& error) {
    err << "splitkv fit: " << error.what() << "\n";
    return kExitBadInput;
  }

  if (options.check) {
    // A header that is not one `splitkv fit` emitted, or not from this CSV and GPU, is bad
    // input (exit 2); one that differs only where the emitter's text or code changed is stale (1).
    GeneratedHeader parsed;
    try {
      parsed = check_committed_header(products);
    } catch (const InputError& error) {
      err << "splitkv fit --check: " << error.what() << "\n";
      return kExitBadInput;
    }
    const FileContents committed = read_file_if_exists(products.header_path);
    const TextDifference difference = first_difference(committed.bytes, products.header_text);
    if (difference.line == 0) {
      out << fmt::format("{} is up to date with {} (sha256 {})\n", products.header_path,
                         products.training.source_display, products.training.sha256);
      return 0;
    }
    // Same CSV (sha256) and GPU, so a difference inside a table is a hand edit: bad input.
    const bool table_edited = parsed.is_table_line(difference.line);
    const std::string heading =
        table_edited ? fmt::format("{}:{}: table edited: the header says it was fitted on {} (sha256 matches), but "
                                   "its tables differ from what that CSV gives",
                                   products.header_path, difference.line, products.training.source_display)
                     : fmt::format("{} differs from what {} produces, first at line {}", products.header_path,
                                   products.training.source_display, difference.line);
    err << fmt::format(
        "splitkv fit --check: {}:\n"
        "  committed: {}\n"
        "  generated: {}\n"
        "Regenerate it with: splitkv fit {}{} --out {}\n",
        heading, difference.expected, difference.actual, fmt::join(options.results_csvs, " "),
        kernel_argument(products.training.kernel) + kv_dtype_argument(products.training), products.header_path);
    return table_edited ? kExitBadInput : kExitDifferent;
  }

  // Everything is computed; write each file atomically (complete or absent).
  std::map<std::string, std::string> files;
  files[products.header_path] = products.header_text;
  if (!options.report_dir.empty()) {
    const std::string regret_csv = (std::filesystem::path(options.report_dir) / "regret.csv").string();
    for (auto& [path, bytes] : report_files(products, regret_csv, true)) files[path] = std::move(bytes);
  }
  std::map<std::string, tuner::WriteResult> written;
  try {
    // The report folder is an output of its own, so it is created; the header's folder must exist.
    if (!options.report_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(options.report_dir, error);
      if (error) throw OutputError(options.report_dir + ": cannot create the report folder: " + error.message());
    }
    written = tuner::write_files_atomically(files);
  } catch (const OutputError& error) {
    err << "splitkv fit: " << error.what() << "\n";
    return kExitDifferent;
  }

  print_fit(products, out);
  // An unchanged header keeps its mtime, so the targets including it are not rebuilt; say why.
  const bool header_unchanged = written[products.header_path] == tuner::WriteResult::unchanged;
  out << fmt::format("header    {} ({} bytes, sha256 {}){}\n", products.header_path, products.header_text.size(),
                     tuner::sha256_hex(products.header_text),
                     header_unchanged ? ": unchanged, it already held these bytes, not rewritten" : "");
  out << fmt::format("          namespace splitkv::generated::{}: determine_num_splits(ShapeInfo), "
                     "determine_num_splits_capacity_only(...), {}(...)\n",
                     products.short_name, call_site_function(products.training.kernel));
  if (!options.report_dir.empty()) {
    for (const auto& [path, bytes] : files) {
      if (path == products.header_path) continue;
      const bool unchanged = written[path] == tuner::WriteResult::unchanged;
      out << fmt::format("report    {}{}\n", path, unchanged ? " (unchanged)" : "");
    }
  }
  out << console_summary(products);
  return 0;
}

}  // namespace splitkv::cli
