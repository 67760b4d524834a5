// libFuzzer target: the results-CSV reader (tuner/CSV_SCHEMA.md), the resume bookkeeping
// built on it, and the writer's round trip.
//
// The contract under test: any byte string either parses, or fails with a CsvError whose
// message starts with the source name. What parses must survive write-then-read unchanged
// (up to the documented flattening of line breaks), and a torn tail must be exactly the
// bytes after the last complete line.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "splitkv/tuner/results_csv.hpp"

namespace {

using namespace splitkv::tuner;

constexpr const char* kSource = "fuzz.csv";

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_results_csv_reader: invariant broken: %s\n", what);
  std::abort();
}

std::string flattened(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

bool same_number(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_row(const ResultRow& a, const ResultRow& b) {
  return flattened(a.gpu) == b.gpu && flattened(a.kernel) == b.kernel && a.point == b.point &&
         same_number(a.time_us_median, b.time_us_median) && same_number(a.time_us_p10, b.time_us_p10) &&
         same_number(a.time_us_p90, b.time_us_p90) && same_number(a.cv, b.cv) &&
         a.repetitions == b.repetitions && a.kv_bytes == b.kv_bytes && same_number(a.tbps, b.tbps) &&
         a.status == b.status && flattened(a.message) == b.message && a.gpu_index == b.gpu_index &&
         flattened(a.gpu_uuid) == b.gpu_uuid;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ResultsCsv contents;
  try {
    contents = parse_results_csv(text, kSource);
    check_results_consistency(contents, kSource);
  } catch (const CsvError& error) {
    const std::string message = error.what();
    if (message.rfind(std::string(kSource) + ":", 0) != 0) fail("CsvError without the file name");
    return 0;
  }
  if (contents.rows.size() != contents.row_lines.size()) fail("rows and row_lines differ in length");

  if (contents.torn) {
    const TornTail& torn = *contents.torn;
    if (torn.offset < 0 || std::size_t(torn.offset) > size) fail("torn offset out of range");
    if (text.substr(std::size_t(torn.offset)) != torn.text) fail("torn text is not the file's tail");
    if (torn.text.empty()) fail("empty torn tail");
    // What --resume keeps after cutting the tail must read back as the same rows.
    const ResultsCsv kept = parse_results_csv(text.substr(0, std::size_t(torn.offset)), kSource);
    if (kept.torn) fail("the text before a torn tail is itself torn");
    if (kept.rows.size() != contents.rows.size()) fail("cutting the torn tail changed the rows");
  }

  // Write what was read and read it back.
  std::string written = format_results_header();
  for (const ResultRow& row : contents.rows) written += format_results_row(row);
  const ResultsCsv again = parse_results_csv(written, kSource);
  if (again.torn) fail("written text reads back torn");
  if (again.rows.size() != contents.rows.size()) fail("round trip changed the row count");
  for (std::size_t r = 0; r < again.rows.size(); ++r) {
    if (!same_row(contents.rows[r], again.rows[r])) fail("round trip changed a row");
  }
  const ResumeState state = resume_state_from(contents);
  if (state.rows_read != std::int64_t(contents.rows.size())) fail("resume state miscounted rows");
  return 0;
}
