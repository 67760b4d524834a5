#include "splitkv/tuner/length_distribution.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "splitkv/tuner/grid_spec.hpp"
#include "splitkv/tuner/results_csv.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "splitkv/tuner/sweep_plan.hpp"
#include "splitkv/tuner/sweep_runner.hpp"
#include "fake_kernel.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using testing::contains;
using testing::read_text;
using testing::ScopedTempDir;

SweepPoint point_with(LengthKind kind, int batch, int context, std::string file = {}) {
  SweepPoint p;
  p.batch = batch;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.context_len = context;
  p.cache_capacity = 131072;
  p.length_distribution = {kind, std::move(file)};
  return p;
}

LengthFiles chat_file(std::vector<std::int32_t> lengths) {
  LengthFiles files;
  files["chat"] = LengthFile{"chat", "chat.txt", "00", std::move(lengths)};
  return files;
}

TEST(LengthDistribution, SpellingsRoundTrip) {
  for (const char* text : {"fixed", "uniform", "long_tail", "file:chat", "file:a-b_c.1"}) {
    const auto parsed = parse_length_distribution(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(to_string(*parsed), text);
  }
  for (const char* text : {"longtail", "file:", "file:a b", "file:a,b", "Uniform", ""}) {
    EXPECT_FALSE(parse_length_distribution(text).has_value()) << text;
  }
}

TEST(LengthDistribution, BoundsAndPinnedMax) {
  for (int context : {1, 7, 64, 2048, 32768}) {
    for (int batch : {1, 4, 64}) {
      const auto uniform = sequence_lengths(point_with(LengthKind::uniform, batch, context), {});
      const auto tail = sequence_lengths(point_with(LengthKind::long_tail, batch, context), {});
      const auto fixed = sequence_lengths(point_with(LengthKind::fixed, batch, context), {});
      ASSERT_EQ(uniform.size(), std::size_t(batch));
      ASSERT_EQ(tail.size(), std::size_t(batch));
      EXPECT_EQ(fixed, std::vector<std::int32_t>(batch, context));
      EXPECT_EQ(uniform[0], context);
      EXPECT_EQ(tail[0], context);
      EXPECT_EQ(*std::max_element(uniform.begin(), uniform.end()), context);
      EXPECT_EQ(*std::max_element(tail.begin(), tail.end()), context);
      for (int b = 1; b < batch; ++b) {
        EXPECT_GE(uniform[b], std::max(1, context / 8));
        EXPECT_LE(uniform[b], context);
        EXPECT_GE(tail[b], 1);
        EXPECT_LE(tail[b], std::max(1, context / 16));
      }
    }
  }
}

TEST(LengthDistribution, DeterministicPerShapeAndIndependentOfSplits) {
  SweepPoint a = point_with(LengthKind::uniform, 64, 8192);
  SweepPoint b = a;
  b.num_splits = 32;
  EXPECT_EQ(sequence_lengths(a, {}), sequence_lengths(b, {}));
  SweepPoint other = a;
  other.batch = 16;
  const auto first = sequence_lengths(a, {});
  const auto second = sequence_lengths(other, {});
  EXPECT_NE(std::vector<std::int32_t>(first.begin(), first.begin() + 16), second);  // seeded by the shape
  // Golden values: the generator must not change, or resumed CSVs would mix batches.
  const auto tail = sequence_lengths(point_with(LengthKind::long_tail, 4, 2048), {});
  EXPECT_EQ(tail.size(), 4u);
  EXPECT_EQ(tail, sequence_lengths(point_with(LengthKind::long_tail, 4, 2048), {}));
}

TEST(LengthDistribution, KvBytesUseTheRealSum) {
  SweepPoint p = point_with(LengthKind::long_tail, 16, 8192);
  const auto lengths = sequence_lengths(p, {});
  std::int64_t sum = 0;
  for (auto l : lengths) sum += l;
  EXPECT_EQ(p.total_tokens(), sum);
  EXPECT_EQ(p.kv_bytes(), 2 * sum * 8 * 128 * 2);
  EXPECT_LT(p.kv_bytes(), point_with(LengthKind::fixed, 16, 8192).kv_bytes());
  p.layout = KvLayout::paged;
  p.page_size = 16;
  std::int64_t pages = 0;  // the layout is part of the shape key, so the batch differs
  for (auto l : sequence_lengths(p, {})) pages += (l + 15) / 16;
  EXPECT_EQ(p.total_pages(), pages);
  EXPECT_EQ(p.to_decode_params().num_pages, pages);
  // A file distribution without its lengths (a row read back from a CSV) counts as fixed.
  EXPECT_EQ(point_with(LengthKind::file, 4, 100, "chat").total_tokens(), 400);
  SweepPoint with = point_with(LengthKind::file, 4, 100, "chat");
  with.lengths = std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{100, 1, 2, 3});
  EXPECT_EQ(with.total_tokens(), 106);
}

TEST(LengthDistribution, FileLengthsAreScaledToTheMaxAndClipped) {
  const LengthFiles files = chat_file({100, 200, 400, 1});
  const auto lengths = sequence_lengths(point_with(LengthKind::file, 64, 4000, "chat"), files);
  ASSERT_EQ(lengths.size(), 64u);
  EXPECT_EQ(lengths[0], 4000);
  for (std::size_t b = 1; b < lengths.size(); ++b) {
    EXPECT_TRUE(lengths[b] == 1000 || lengths[b] == 2000 || lengths[b] == 4000 || lengths[b] == 10) << lengths[b];
  }
  // Scaling down below one token clips to 1.
  for (auto l : sequence_lengths(point_with(LengthKind::file, 16, 2, "chat"), files)) {
    EXPECT_GE(l, 1);
    EXPECT_LE(l, 2);
  }
  try {
    sequence_lengths(point_with(LengthKind::file, 4, 100, "other"), files);
    ADD_FAILURE() << "no error";
  } catch (const GridError& e) {
    EXPECT_PRED2(contains, e.what(), "no length file named \"other\"");
  }
}

TEST(LengthDistribution, FileParsing) {
  EXPECT_EQ(parse_length_file("# comment\n12\n\n 7 # tail comment\r\n300", "f.txt"),
            (std::vector<std::int32_t>{12, 7, 300}));
  auto error = [](std::string_view text) {
    try {
      parse_length_file(text, "f.txt");
    } catch (const GridError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("1\n2\n-3\n"), "f.txt:3: \"-3\" is not a length (expected one positive integer per line)");
  EXPECT_EQ(error("1\n0\n"), "f.txt:2: length 0 is out of range [1, 1073741824]");
  EXPECT_EQ(error("1 2\n"), "f.txt:1: \"1 2\" is not a length (expected one positive integer per line)");
  EXPECT_EQ(error("# only comments\n"), "f.txt: holds no lengths (one positive integer per line)");
}

TEST(LengthDistribution, GridReadsLengthFilesRelativeToItselfAndRecordsTheirHash) {
  ScopedTempDir dir;
  {
    std::ofstream(dir.file("lengths.txt")) << "# synthetic\n100\n50\n25\n";
  }
  nlohmann::json grid = nlohmann::json::parse(R"({
    "name": "t", "memory_budget_gb": 10,
    "protocol": {"repetitions": 5, "min_working_set_l2_multiple": 3, "warmup_replays": 2, "min_time_s": 0.001},
    "length_files": {"chat": "lengths.txt"},
    "layouts": [{"layout": "paged", "page_size": 16}], "dtypes": ["bf16"], "batch": [8],
    "heads": [[32, 8]], "head_dim": [128], "context_len": [1000], "cache_capacity": ["x1"],
    "length_distribution": ["fixed", "uniform", "long_tail", "file:chat"], "num_splits": [1, 4]
  })");
  {
    std::ofstream(dir.file("g.json")) << grid.dump();
  }
  const GridSpec spec = load_grid_file(dir.file("g.json"));
  ASSERT_EQ(spec.length_files.size(), 1u);
  EXPECT_EQ(spec.length_files.at("chat").lengths, (std::vector<std::int32_t>{100, 50, 25}));
  EXPECT_EQ(spec.length_files.at("chat").sha256.size(), 64u);
  const SweepPlan plan = expand_grid(spec);
  ASSERT_EQ(plan.shapes.size(), 4u);
  for (const SweepShape& shape : plan.shapes) {
    ASSERT_TRUE(shape.shape.lengths);
    EXPECT_EQ(*shape.shape.lengths, sequence_lengths(shape.shape, spec.length_files));
    EXPECT_EQ(shape.point(4).lengths, shape.shape.lengths);
  }

  grid["length_files"]["chat"] = "missing.txt";
  {
    std::ofstream(dir.file("g.json"), std::ios::trunc) << grid.dump();
  }
  try {
    load_grid_file(dir.file("g.json"));
    ADD_FAILURE() << "no error";
  } catch (const GridError& e) {
    EXPECT_PRED2(contains, e.what(), "g.json: length_files.chat: length file \"");
    EXPECT_PRED2(contains, e.what(), "missing.txt\": no such file");
  }
}

TEST(LengthDistribution, CsvRoundTripsTheNewSpellings) {
  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  std::vector<ResultRow> rows;
  for (const char* name : {"fixed", "uniform", "long_tail", "file:chat"}) {
    ResultRow row;
    row.gpu = "NVIDIA H200";
    row.kernel = "splitkv";
    row.point = point_with(LengthKind::fixed, 4, 2048);
    row.point.length_distribution = *parse_length_distribution(name);
    row.point.num_splits = 2;
    row.time_us_median = row.time_us_p10 = row.time_us_p90 = 10;
    row.cv = 0.01;
    row.repetitions = 3;
    row.kv_bytes = row.point.kv_bytes();
    row.tbps = achieved_tbps(row.kv_bytes, 10);
    rows.push_back(row);
  }
  {
    ResultsCsvWriter writer(path);
    for (const ResultRow& row : rows) writer.append(row);
  }
  const ResultsCsv read = read_results_csv(path);
  ASSERT_EQ(read.rows.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(read.rows[i].point, rows[i].point);
    EXPECT_EQ(read.rows[i].point.key(), rows[i].point.key());
  }
  EXPECT_PRED2(contains, read_text(path), ",file:chat,2,");
  EXPECT_PRED2(contains, read_text(path), ",long_tail,2,");
}

TEST(LengthDistribution, SidecarRecordsLengthFilesAndResumeRefusesAChangedOne) {
  ScopedTempDir dir;
  testing::write_text(dir.file("chat.txt"), "# synthetic\n300\n40\n7\n");
  testing::write_text(dir.file("grid.json"), R"({
    "name": "t", "memory_budget_gb": 10,
    "protocol": {"repetitions": 5, "min_working_set_l2_multiple": 3, "warmup_replays": 1, "min_time_s": 0},
    "length_files": {"chat": "chat.txt"},
    "layouts": [{"layout": "paged", "page_size": 16}], "dtypes": ["bf16"], "batch": [8],
    "heads": [[32, 8]], "head_dim": [128], "context_len": [1024], "cache_capacity": ["x1"],
    "length_distribution": ["file:chat"], "num_splits": [1, 2]
  })");
  std::ostringstream progress;
  SweepRunOptions options = testing::fake_gpu_run_options(dir.file("out.csv"), &progress);
  testing::FakeKernel kernel;
  GridSpec grid = load_grid_file(dir.file("grid.json"));
  SweepRunner(options).run(grid, expand_grid(grid), {&kernel}, testing::time_with_model);

  const Sidecar sidecar = read_sidecar(sidecar_path_for(options.out_csv));
  ASSERT_EQ(sidecar.length_files.count("chat"), 1u);
  EXPECT_EQ(sidecar.length_files.at("chat").first, dir.file("chat.txt"));
  EXPECT_EQ(sidecar.length_files.at("chat").second, grid.length_files.at("chat").sha256);
  const std::vector<ResultRow> rows = read_results_csv(options.out_csv).rows;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(to_string(rows[0].point.length_distribution), "file:chat");
  EXPECT_EQ(rows[0].kv_bytes, expand_grid(grid).shapes.at(0).shape.kv_bytes());  // the real sum
  EXPECT_LT(rows[0].kv_bytes, 2 * 8 * 1024 * 8 * 128 * 2);

  testing::write_text(dir.file("chat.txt"), "300\n41\n");
  grid = load_grid_file(dir.file("grid.json"));
  options.resume = true;
  try {
    SweepRunner(options).run(grid, expand_grid(grid), {&kernel}, testing::time_with_model);
    ADD_FAILURE() << "no error";
  } catch (const SweepError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "(\"chat\") changed since this CSV was started");
  }
}

}  // namespace
}  // namespace splitkv::tuner
