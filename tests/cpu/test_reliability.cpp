// Regression tests for the fixes made while building the reliability suite (RELIABILITY.md): each
// one is a bad input or a fault that used to crash, hang, overflow or write where it must
// not. The end-to-end versions live in tests/reliability/ (bad-input catalogue, kill -9 /
// resume) and fuzz/ (the fuzz targets and their corpora).
#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "fake_kernel.hpp"
#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using testing::contains;
using testing::ScopedTempDir;

std::string grid_with(const std::string& replace, const std::string& with) {
  std::string text = R"({
  "name": "tiny",
  "memory_budget_gb": 1,
  "protocol": {"repetitions": 3, "min_working_set_l2_multiple": 1, "warmup_replays": 1, "min_time_s": 0.001},
  "layouts": [{"layout": "contiguous"}],
  "dtypes": ["bf16"],
  "batch": [1],
  "heads": [[8, 8]],
  "head_dim": [128],
  "context_len": [1024],
  "cache_capacity": ["x1"],
  "num_splits": [1, 2, 4]
})";
  if (!replace.empty()) {
    const std::size_t at = text.find(replace);
    EXPECT_NE(at, std::string::npos) << replace;
    text.replace(at, replace.size(), with);
  }
  return text;
}

std::string grid_error(const std::string& text) {
  try {
    parse_grid(text, "g.json");
  } catch (const GridError& error) {
    return error.what();
  }
  return "(no error)";
}

// ---- grid reader -------------------------------------------------------------------------

TEST(ReliabilityGrid, NumberBeyondDoubleIsAGridErrorNotAnAbort) {
  // fuzz/regressions/grid_reader/number_overflow.json: nlohmann throws out_of_range (not
  // parse_error) for 1e400, which escaped parse_grid and ended the CLI in std::terminate.
  const std::string message = grid_error(grid_with("\"memory_budget_gb\": 1", "\"memory_budget_gb\": 1e400"));
  EXPECT_EQ(message, "g.json:3:23: invalid JSON: number overflow parsing '1e400'");
  EXPECT_TRUE(contains(grid_error("{\"batch\": [1, -2e999]}"), "g.json:1:15: invalid JSON: number overflow"))
      << grid_error("{\"batch\": [1, -2e999]}");
}

TEST(ReliabilityGrid, ShapesWhoseBytesOverflowInt64AreRejected) {
  // kv_bytes() = 2 * 2^20 * 2^30 * 2^16 * 256 * 2 wrapped int64 (undefined behaviour) and
  // the planner then kept a negative-size shape.
  std::string text = grid_with("\"batch\": [1]", "\"batch\": [1048576]");
  text = text.replace(text.find("[[8, 8]]"), 8, "[[65536, 65536]]");
  text = text.replace(text.find("[128]"), 5, "[256]");
  text = text.replace(text.find("[1024]"), 6, "[1073741824]");
  const std::string message = grid_error(text);
  EXPECT_TRUE(contains(message, "g.json: (top level): its largest shape (batch 1048576, cache_capacity "
                                "1073741824, num_kv_heads 65536, head_dim 256) needs"))
      << message;
}

TEST(ReliabilityGrid, TokenCountsAndBudgetHaveCeilings) {
  // ceil_div(context_len, 64) overflowed int for context_len near INT_MAX.
  EXPECT_EQ(grid_error(grid_with("[1024]", "[2147483647]")),
            "g.json: context_len[0]: 2147483647 is out of range [1, 1073741824]");
  EXPECT_EQ(grid_error(grid_with("[\"x1\"]", "[2147483647]")),
            "g.json: cache_capacity[0]: 2147483647 is out of range [1, 1073741824]");
  EXPECT_TRUE(contains(grid_error(grid_with("[1024]", "[1073741824]").replace(
                           grid_with("[1024]", "[1073741824]").find("[\"x1\"]"), 6, "[\"x2\"]")),
                       "g.json: cache_capacity[0]: x2 x context_len 1073741824 (context_len[0]) is "
                       "2147483648 tokens, more than the limit of 1073741824"));
  // memory_budget_bytes() converted 1e300 GB to int64: undefined behaviour.
  EXPECT_EQ(grid_error(grid_with("\"memory_budget_gb\": 1", "\"memory_budget_gb\": 1e300")),
            "g.json: memory_budget_gb: 1e+300 is more than any device holds (at most 10000 GB)");
  EXPECT_EQ(grid_error(grid_with("", "")), "(no error)");
}

TEST(ReliabilityGrid, FoldersAndPipesAreNotGridFiles) {
  ScopedTempDir dir;
  try {
    load_grid_file(dir.path().string());
    FAIL() << "a folder was read as a grid";
  } catch (const GridError& error) {
    EXPECT_EQ(std::string(error.what()), dir.path().string() + ": is a folder, not a grid file");
  }
  // Reading a FIFO would block until someone writes to it.
  const std::string fifo = dir.file("pipe.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    load_grid_file(fifo);
    FAIL() << "a FIFO was read as a grid";
  } catch (const GridError& error) {
    EXPECT_EQ(std::string(error.what()), fifo + ": is not a regular file");
  }
}

// ---- results CSV -------------------------------------------------------------------------

// The layout of files written before the device columns (rows spelled out below have 22 fields).
const std::string kHeader = format_results_header(false);

std::string row_text(int splits, const std::string& gpu = "NVIDIA H200",
                     const std::string& status = "ok", const std::string& message = "") {
  return gpu + ",splitkv,contiguous,0,bf16,1,8,8,128,1024,1024,fixed," + std::to_string(splits) +
         (status == "ok" || status == "throttled" ? ",9.5,9.4,9.7,0.01,3,4194304,0.44," : ",,,,,0,4194304,,") +
         status + "," + message + "\n";
}

std::string csv_error(const std::string& text) {
  try {
    const ResultsCsv contents = parse_results_csv(text, "r.csv");
    check_results_consistency(contents, "r.csv");
  } catch (const CsvError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(ReliabilityCsv, BytesThatAreNotUtf8AreRejectedWithTheirPosition) {
  EXPECT_EQ(csv_error(kHeader + row_text(1) + row_text(2, "NVIDIA H200", "oom", "m\xe9moire")),
            "r.csv:3:87: byte 0xE9 is not valid UTF-8; the CSV must be UTF-8 text");
  // Overlong encodings and UTF-16 surrogates are not UTF-8 either.
  EXPECT_TRUE(contains(csv_error(kHeader + row_text(1, "GPU\xc0\xaf")), "r.csv:2:4: byte 0xC0"));
  EXPECT_TRUE(contains(csv_error(kHeader + row_text(1, "GPU\xed\xa0\x80")), "r.csv:2:4: byte 0xED"));
  // Real UTF-8 is fine, in any column that holds text.
  EXPECT_EQ(csv_error(kHeader + row_text(1, "GPU \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80")), "(no error)");
}

TEST(ReliabilityCsv, AByteOrderMarkIsNamed) {
  EXPECT_EQ(csv_error("\xef\xbb\xbf" + kHeader + row_text(1)),
            "r.csv:1:1: starts with a UTF-8 byte-order mark (a spreadsheet export?); save the CSV "
            "as plain UTF-8 without one");
}

TEST(ReliabilityCsv, ATornTailMayEndInsideACharacter) {
  // A crash can cut a multi-byte character in half; the torn tail is dropped, not judged.
  const std::string text = kHeader + row_text(1) + std::string("NVIDIA H200,splitkv,\xc3");
  const ResultsCsv contents = parse_results_csv(text, "r.csv");
  ASSERT_TRUE(contents.torn.has_value());
  EXPECT_EQ(contents.rows.size(), 1u);
}

TEST(ReliabilityCsv, OneGpuPerFile) {
  EXPECT_EQ(csv_error(kHeader + row_text(1) + row_text(2, "NVIDIA A100")),
            "r.csv:3:1: column gpu: \"NVIDIA A100\" differs from \"NVIDIA H200\" (line 2); one file "
            "holds one GPU's results");
}

TEST(ReliabilityCsv, OneFinalRowPerPointButThrottledRowsMayRepeat) {
  EXPECT_TRUE(contains(csv_error(kHeader + row_text(1) + row_text(2) + row_text(2, "NVIDIA H200", "oom")),
                       "r.csv:4:1: duplicate row for splitkv contiguous bf16 b1 h8/8 d128 L1024 "
                       "C1024 fixed s2 (final already at line 3)"));
  // throttled, throttled, then ok: what resumes of a hot GPU write; not a duplicate.
  EXPECT_EQ(csv_error(kHeader + row_text(2, "NVIDIA H200", "throttled") +
                      row_text(2, "NVIDIA H200", "throttled") + row_text(2)),
            "(no error)");
}

// ---- sidecar and runner ------------------------------------------------------------------

TEST(ReliabilitySidecar, PathsThatAreNotUtf8DoNotStopTheSweep) {
  // json::dump() threw type_error 316 on such bytes; the CLI did not catch it and aborted.
  ScopedTempDir dir;
  Sidecar sidecar;
  sidecar.results_csv = dir.file("r\xff.csv");
  sidecar.grid_path = "grid\xe9.json";
  sidecar.device.name = "GPU";
  const std::string path = dir.file("r.json");
  ASSERT_NO_THROW(write_sidecar(path, sidecar));
  const Sidecar back = read_sidecar(path);
  EXPECT_EQ(back.grid_path, "grid\xef\xbf\xbd.json");  // U+FFFD in place of the bad byte
  EXPECT_EQ(back.device.name, "GPU");
}

TEST(ReliabilityRunner, StaleSidecarTempsFromAKilledRunAreRemoved) {
  ScopedTempDir dir;
  const std::string grid_path = dir.file("grid.json");
  testing::write_text(grid_path, grid_with("", ""));
  const GridSpec grid = load_grid_file(grid_path);
  const SweepPlan plan = expand_grid(grid);
  // What a kill -9 inside write_sidecar leaves behind, plus a file that merely looks alike.
  testing::write_text(dir.file("out.json.tmp.12345"), "{\"schema\": ");
  testing::write_text(dir.file("other.json.tmp.12345"), "not ours");

  const SweepRunOptions options = testing::fake_gpu_run_options(dir.file("out.csv"));
  testing::FakeKernel kernel("splitkv");
  const SweepSummary summary = SweepRunner(options).run(grid, plan, {&kernel}, testing::time_with_model);
  EXPECT_EQ(summary.stop, StopReason::complete);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.json.tmp.12345")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("other.json.tmp.12345")));
  EXPECT_EQ(read_sidecar(dir.file("out.json")).state, "complete");
}

}  // namespace
}  // namespace splitkv::tuner
