#include "splitkv/tuner/grid_spec.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using nlohmann::json;
using testing::contains;
using testing::starts_with;

json minimal_grid() {
  return json::parse(R"({
    "name": "t",
    "memory_budget_gb": 10,
    "protocol": {"repetitions": 5, "min_working_set_l2_multiple": 3, "warmup_replays": 2,
                 "min_time_s": 0.001},
    "layouts": [{"layout": "contiguous"}, {"layout": "paged", "page_size": 16}],
    "dtypes": ["bf16"],
    "batch": [1, 8],
    "heads": [[32, 8]],
    "head_dim": [128],
    "context_len": [512, 2048],
    "cache_capacity": ["x1", 4096],
    "num_splits": [1, 2, 4]
  })");
}

// The message parse_grid throws for `grid`, or "no error".
std::string error_for(const json& grid) {
  try {
    parse_grid(grid.dump(), "g.json");
  } catch (const GridError& error) {
    return error.what();
  }
  return "no error";
}

std::string error_for_text(const std::string& text) {
  try {
    parse_grid(text, "g.json");
  } catch (const GridError& error) {
    return error.what();
  }
  return "no error";
}

TEST(GridSpec, ParsesAMinimalGridIntoOneBlock) {
  const GridSpec grid = parse_grid(minimal_grid().dump(), "g.json");
  EXPECT_EQ(grid.name, "t");
  EXPECT_EQ(grid.source, "g.json");
  EXPECT_EQ(grid.memory_budget_bytes(), 10'000'000'000);
  EXPECT_EQ(grid.protocol.repetitions, 5);
  EXPECT_EQ(grid.protocol.warmup_replays, 2);
  ASSERT_EQ(grid.blocks.size(), 1u);
  const GridBlock& block = grid.blocks[0];
  ASSERT_EQ(block.layouts.values.size(), 2u);
  EXPECT_EQ(block.layouts.values[1].layout, KvLayout::paged);
  EXPECT_EQ(block.layouts.values[1].page_size, 16);
  EXPECT_EQ(block.batch.values, (std::vector<int>{1, 8}));
  EXPECT_EQ(block.heads.values[0].num_kv_heads, 8);
  ASSERT_EQ(block.length_distribution.values.size(), 1u);  // defaults to fixed
  EXPECT_EQ(block.cache_capacity.values[0].resolve(2048), 2048);
  EXPECT_EQ(block.cache_capacity.values[1].resolve(2048), 4096);
  EXPECT_EQ(block.cartesian_size(), 2 * 1 * 2 * 1 * 1 * 2 * 2 * 1 * 3);
}

TEST(GridSpec, SplitCountPresets) {
  json grid = minimal_grid();
  grid["num_splits"] = "pow2";
  EXPECT_EQ(parse_grid(grid.dump(), "g").blocks[0].num_splits.values,
            (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128}));
  grid["num_splits"] = json::parse(R"({"range": [3, 6]})");
  EXPECT_EQ(parse_grid(grid.dump(), "g").blocks[0].num_splits.values, (std::vector<int>{3, 4, 5, 6}));
  grid["num_splits"] = json::parse(R"({"pow2": [3, 64]})");
  EXPECT_EQ(parse_grid(grid.dump(), "g").blocks[0].num_splits.values, (std::vector<int>{4, 8, 16, 32, 64}));
  grid["num_splits"] = json::parse(R"({"range": [1, 256]})");
  EXPECT_EQ(parse_grid(grid.dump(), "g").blocks[0].num_splits.values.size(), 256u);
}

TEST(GridSpec, CapacityMultiplesRoundUpToWholeTokens) {
  json grid = minimal_grid();
  grid["cache_capacity"] = json::array({"x1.5", "x2"});
  grid["context_len"] = json::array({1000, 1001});
  const GridBlock block = parse_grid(grid.dump(), "g").blocks[0];
  EXPECT_EQ(block.cache_capacity.values[0].resolve(1000), 1500);
  EXPECT_EQ(block.cache_capacity.values[0].resolve(1001), 1502);  // 1501.5 rounds up
  EXPECT_EQ(block.cache_capacity.values[1].resolve(1001), 2002);
}

TEST(GridSpec, BlocksInheritTopLevelAxesAndOverrideThem) {
  json grid = minimal_grid();
  grid["blocks"] = json::parse(R"([{}, {"dtypes": ["fp16"], "batch": [4]}])");
  const GridSpec spec = parse_grid(grid.dump(), "g");
  ASSERT_EQ(spec.blocks.size(), 2u);
  EXPECT_EQ(spec.blocks[0].path, "blocks[0]");
  EXPECT_EQ(spec.blocks[0].dtypes.values, (std::vector<ElementTypes>{{DType::bf16, KvDtype::same_as_q}}));
  EXPECT_EQ(spec.blocks[0].batch.path, "batch");
  EXPECT_EQ(spec.blocks[1].dtypes.values, (std::vector<ElementTypes>{{DType::fp16, KvDtype::same_as_q}}));
  EXPECT_EQ(spec.blocks[1].batch.values, (std::vector<int>{4}));
  EXPECT_EQ(spec.blocks[1].batch.path, "blocks[1].batch");
  EXPECT_EQ(spec.blocks[1].heads.values.size(), 1u);  // inherited
}

TEST(GridSpec, UnknownKeysNameTheirPath) {
  json grid = minimal_grid();
  grid["bach"] = json::array({1});
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: bach: unknown key (expected one of: name,");

  grid = minimal_grid();
  grid["blocks"] = json::parse(R"([{}, {"bach": [2]}])");
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: blocks[1].bach: unknown key");

  grid = minimal_grid();
  grid["protocol"]["repetition"] = 3;
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: protocol.repetition: unknown key");

  grid = minimal_grid();
  grid["layouts"][1]["pagesize"] = 16;
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: layouts[1].pagesize: unknown key");
}

TEST(GridSpec, WrongTypesNameTheirPath) {
  json grid = minimal_grid();
  grid["batch"] = "8";
  EXPECT_EQ(error_for(grid), "g.json: batch: expected an array, got string \"8\"");

  grid = minimal_grid();
  grid["batch"] = json::parse(R"([1, 8, "16"])");
  EXPECT_EQ(error_for(grid), "g.json: batch[2]: expected an integer, got string \"16\"");

  grid = minimal_grid();
  grid["context_len"] = json::parse("[512, 2048.5]");
  EXPECT_EQ(error_for(grid), "g.json: context_len[1]: expected an integer, got number 2048.5");

  grid = minimal_grid();
  grid["memory_budget_gb"] = "100";
  EXPECT_EQ(error_for(grid), "g.json: memory_budget_gb: expected a number, got string \"100\"");

  grid = minimal_grid();
  grid["heads"] = json::parse("[[32, 8], [32]]");
  EXPECT_EQ(error_for(grid), "g.json: heads[1]: expected [num_heads, num_kv_heads], got array [32]");

  grid = minimal_grid();
  grid["dtypes"] = json::parse(R"(["bf16", "fp8"])");
  EXPECT_EQ(error_for(grid), "g.json: dtypes[1]: unknown dtype \"fp8\" (expected bf16, fp16 or fp8_e4m3)");

  grid = minimal_grid();
  grid["blocks"] = json::parse(R"([{"heads": [[32, 8], [16, true]]}])");
  EXPECT_EQ(error_for(grid), "g.json: blocks[0].heads[1][1]: expected an integer, got boolean true");
}

TEST(GridSpec, ImpossibleValuesNameTheirPathAndReason) {
  json grid = minimal_grid();
  grid["heads"] = json::parse("[[32, 8], [32, 5]]");
  EXPECT_EQ(error_for(grid), "g.json: heads[1]: num_heads 32 is not a multiple of num_kv_heads 5");

  grid["heads"] = json::parse("[[64, 2]]");
  EXPECT_EQ(error_for(grid),
            "g.json: heads[0]: query group of 32 heads per KV head exceeds 16, the most one CTA serves");

  grid = minimal_grid();
  grid["head_dim"] = json::parse("[128, 96]");
  EXPECT_EQ(error_for(grid), "g.json: head_dim[1]: head_dim 96 is not one of 64, 128, 256");

  for (int page : {8, 24, 512}) {
    grid = minimal_grid();
    grid["layouts"][1]["page_size"] = page;
    EXPECT_EQ(error_for(grid), "g.json: layouts[1].page_size: page size " + std::to_string(page) +
                                   " must be a power of two in [16, 256]");
  }

  grid = minimal_grid();
  grid["layouts"][0]["page_size"] = 16;
  EXPECT_EQ(error_for(grid), "g.json: layouts[0].page_size: only paged layouts take a page_size");

  grid = minimal_grid();
  grid["layouts"][1].erase("page_size");
  EXPECT_EQ(error_for(grid), "g.json: layouts[1].page_size: missing required key");

  grid = minimal_grid();
  grid["batch"] = json::parse("[1, 0]");
  EXPECT_EQ(error_for(grid), "g.json: batch[1]: 0 is out of range [1, 1048576]");

  grid = minimal_grid();
  grid["memory_budget_gb"] = -1;
  EXPECT_EQ(error_for(grid), "g.json: memory_budget_gb: must be > 0, got -1");

  grid = minimal_grid();
  grid["protocol"]["repetitions"] = 0;
  EXPECT_EQ(error_for(grid), "g.json: protocol.repetitions: 0 is out of range [1, 1000]");

  grid = minimal_grid();
  grid["protocol"].erase("min_time_s");
  EXPECT_EQ(error_for(grid), "g.json: protocol.min_time_s: missing required key");
}

TEST(GridSpec, ContextBeyondCapacityNamesBothAxes) {
  json grid = minimal_grid();
  grid["cache_capacity"] = json::array({"x1", 1000});
  EXPECT_EQ(error_for(grid),
            "g.json: cache_capacity[1]: capacity 1000 is smaller than context_len 2048 "
            "(context_len[1]); use \"x1\" for a capacity equal to each context");

  // A block's own context against the inherited capacity.
  grid = minimal_grid();
  grid["blocks"] = json::parse(R"([{}, {"context_len": [8192]}])");
  EXPECT_EQ(error_for(grid),
            "g.json: cache_capacity[1]: capacity 4096 is smaller than context_len 8192 "
            "(blocks[1].context_len[0]); use \"x1\" for a capacity equal to each context");

  grid = minimal_grid();
  grid["cache_capacity"] = json::array({"x0.5"});
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: cache_capacity[0]: multiple 0.5 must be in [1, 1024]");

  grid["cache_capacity"] = json::array({"2x"});
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: cache_capacity[0]: \"2x\" is neither a token count");
}

TEST(GridSpec, SplitCountsOutsideOneTo256) {
  json grid = minimal_grid();
  grid["num_splits"] = json::parse("[1, 0]");
  EXPECT_EQ(error_for(grid), "g.json: num_splits[1]: 0 is out of range [1, 256]");
  grid["num_splits"] = json::parse("[1, 257]");
  EXPECT_EQ(error_for(grid), "g.json: num_splits[1]: 257 is out of range [1, 256]");
  grid["num_splits"] = json::parse(R"({"range": [1, 300]})");
  EXPECT_EQ(error_for(grid), "g.json: num_splits.range[1]: 300 is out of range [1, 256]");
  grid["num_splits"] = json::parse(R"({"range": [8, 2]})");
  EXPECT_EQ(error_for(grid), "g.json: num_splits.range: lo 8 is greater than hi 2");
  grid["num_splits"] = "pow3";
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: num_splits: unknown preset \"pow3\"");
  grid["num_splits"] = json::parse(R"({"range": [1, 2], "pow2": [1, 2]})");
  EXPECT_EQ(error_for(grid), "g.json: num_splits: give exactly one of \"range\" or \"pow2\"");
}

TEST(GridSpec, EmptyMissingAndDuplicateAxes) {
  json grid = minimal_grid();
  grid["batch"] = json::array();
  EXPECT_EQ(error_for(grid), "g.json: batch: empty axis: give at least one value");

  grid = minimal_grid();
  grid.erase("batch");
  EXPECT_EQ(error_for(grid), "g.json: batch: missing required axis");

  grid = minimal_grid();
  grid.erase("dtypes");
  grid["blocks"] = json::parse(R"([{"dtypes": ["bf16"]}, {"batch": [2]}])");
  EXPECT_EQ(error_for(grid),
            "g.json: blocks[1].dtypes: missing axis (set it in the block or at the top level)");

  grid = minimal_grid();
  grid["blocks"] = json::array();
  EXPECT_PRED2(starts_with, error_for(grid), "g.json: blocks: must not be empty");

  grid = minimal_grid();
  grid["batch"] = json::parse("[1, 8, 1]");
  EXPECT_EQ(error_for(grid), "g.json: batch[2]: duplicate value 1 (already at batch[0])");

  grid = minimal_grid();
  grid.erase("name");
  EXPECT_EQ(error_for(grid), "g.json: name: missing required key");
}

TEST(GridSpec, UnknownDistributionsAreRejectedWithAReason) {
  json grid = minimal_grid();
  grid["length_distribution"] = json::parse(R"(["fixed", "longtail"])");
  EXPECT_EQ(error_for(grid),
            "g.json: length_distribution[1]: unknown length distribution \"longtail\" (expected fixed, "
            "uniform, long_tail or file:<name> with <name> of [A-Za-z0-9_.-])");
  grid["length_distribution"] = json::parse(R"(["uniform", "file:chat"])");
  EXPECT_EQ(error_for(grid),
            "g.json: length_distribution[1]: \"file:chat\" names no entry of the top-level "
            "\"length_files\" (there is none)");
}

TEST(GridSpec, DuplicateJsonKeysAreErrorsWithTheirPath) {
  EXPECT_EQ(error_for_text(R"({"name": "a", "name": "b"})"), "g.json: name: duplicate key");
  std::string text = minimal_grid().dump();
  text.back() = ',';
  text += R"("blocks": [{"batch": [1]}, {"dtypes": ["bf16"], "dtypes": ["fp16"]}]})";
  EXPECT_EQ(error_for_text(text), "g.json: blocks[1].dtypes: duplicate key");
}

TEST(GridSpec, SyntaxErrorsNameFileLineAndColumn) {
  const std::string text = "{\n  \"name\": \"t\",\n  \"batch\": [1, 2,, 3]\n}\n";
  const std::string message = error_for_text(text);
  EXPECT_PRED2(starts_with, message, "g.json:3:18: invalid JSON: ") << message;
  EXPECT_PRED2(contains, message, "syntax error");

  EXPECT_PRED2(starts_with, error_for_text("{\"name\": \"t\""), "g.json:1:13: invalid JSON: ");
  EXPECT_EQ(error_for_text("[1, 2]"), "g.json: (top level): expected an object, got array [1,2]");
}

TEST(GridSpec, LoadGridFileNamesAMissingFile) {
  testing::ScopedTempDir dir;
  try {
    load_grid_file(dir.file("nope.json"));
    FAIL() << "expected GridError";
  } catch (const GridError& error) {
    EXPECT_PRED2(starts_with, error.what(), dir.file("nope.json") + ": cannot open: ");
  }
  const std::string path = dir.file("ok.json");
  testing::write_text(path, minimal_grid().dump(2));
  EXPECT_EQ(load_grid_file(path).source, path);
  testing::write_text(path, "{\n\"name\": }");
  try {
    load_grid_file(path);
    FAIL() << "expected GridError";
  } catch (const GridError& error) {
    EXPECT_PRED2(starts_with, error.what(), path + ":2:9: invalid JSON");
  }
}

std::string shipped_grid(const std::string& name) {
  return std::string(SPLITKV_SOURCE_DIR) + "/sweeps/" + name + ".json";
}

TEST(ShippedGrids, AllParse) {
  for (const char* name : {"quick", "full", "validation", "fp8", "fp8_validation"}) {
    EXPECT_NO_THROW(load_grid_file(shipped_grid(name))) << name;
  }
}

// What a training grid covers, over all its blocks.
struct TrainingAxes {
  std::set<int> batches, head_dims, contexts, pages, splits;
  std::set<std::pair<int, int>> heads;
  std::set<ElementTypes> dtypes;
  bool contiguous = false;
  bool capacity_x1 = false;
  std::set<int> contexts_in_131072_caches;
};

TrainingAxes training_axes(const GridSpec& grid) {
  TrainingAxes a;
  for (const GridBlock& block : grid.blocks) {
    a.batches.insert(block.batch.values.begin(), block.batch.values.end());
    a.head_dims.insert(block.head_dim.values.begin(), block.head_dim.values.end());
    a.contexts.insert(block.context_len.values.begin(), block.context_len.values.end());
    a.splits.insert(block.num_splits.values.begin(), block.num_splits.values.end());
    a.dtypes.insert(block.dtypes.values.begin(), block.dtypes.values.end());
    for (const auto& h : block.heads.values) a.heads.insert({h.num_heads, h.num_kv_heads});
    for (const auto& l : block.layouts.values) {
      if (l.layout == KvLayout::paged) a.pages.insert(l.page_size);
      if (l.layout == KvLayout::contiguous) a.contiguous = true;
    }
    for (const auto& c : block.cache_capacity.values) {
      a.capacity_x1 |= c.is_multiple() && c.multiple == 1;
      if (!c.is_multiple() && c.tokens == 131072) {
        a.contexts_in_131072_caches.insert(block.context_len.values.begin(), block.context_len.values.end());
      }
    }
  }
  return a;
}

TEST(ShippedGrids, FullCoversTheTrainingAxesTheIssueAsksFor) {
  const TrainingAxes full = training_axes(load_grid_file(shipped_grid("full")));
  EXPECT_EQ(*full.batches.begin(), 1);
  EXPECT_EQ(*full.batches.rbegin(), 256);
  EXPECT_EQ(full.head_dims, (std::set<int>{64, 128, 256}));
  EXPECT_EQ(*full.contexts.begin(), 128);
  EXPECT_EQ(*full.contexts.rbegin(), 131072);
  EXPECT_TRUE(full.pages.count(16) && full.pages.count(64));
  EXPECT_TRUE(full.contiguous);
  EXPECT_TRUE(full.capacity_x1 && !full.contexts_in_131072_caches.empty());
  EXPECT_EQ(full.dtypes,
            (std::set<ElementTypes>{{DType::bf16, KvDtype::same_as_q}, {DType::fp16, KvDtype::same_as_q}}));
  EXPECT_EQ(*full.splits.begin(), 1);
  EXPECT_EQ(*full.splits.rbegin(), 128);
  bool mha = false, gqa4 = false, gqa8 = false;
  for (const auto& [h, kv] : full.heads) {
    mha |= h == kv;
    gqa4 |= h == 4 * kv;
    gqa8 |= h == 8 * kv;
  }
  EXPECT_TRUE(mha && gqa4 && gqa8);
  EXPECT_GE(full.heads.size(), 4u);
}

// The fp8 table is fitted on fp8 rows alone (fit --kv-dtype fp8_e4m3), over the axes that
// decide a split count: every head_dim, both layouts the engines use, the capacity case, the
// CTA ladder and the split ladder up to 64.
TEST(ShippedGrids, Fp8CoversTheTrainingAxes) {
  const TrainingAxes fp8 = training_axes(load_grid_file(shipped_grid("fp8")));
  EXPECT_EQ(fp8.dtypes, (std::set<ElementTypes>{{DType::bf16, KvDtype::fp8_e4m3}}));
  EXPECT_EQ(*fp8.batches.begin(), 1);
  EXPECT_EQ(*fp8.batches.rbegin(), 128);
  EXPECT_GT(fp8.batches.size(), 8u);  // the powers of two and a ladder between them
  EXPECT_EQ(fp8.head_dims, (std::set<int>{64, 128, 256}));
  EXPECT_EQ(*fp8.contexts.begin(), 512);
  EXPECT_EQ(*fp8.contexts.rbegin(), 65536);
  EXPECT_EQ(fp8.pages, (std::set<int>{16}));
  EXPECT_TRUE(fp8.contiguous);
  ASSERT_FALSE(fp8.contexts_in_131072_caches.empty());
  EXPECT_EQ(*fp8.contexts_in_131072_caches.begin(), 1024);
  EXPECT_EQ(*fp8.contexts_in_131072_caches.rbegin(), 32768);
  EXPECT_EQ(fp8.splits, (std::set<int>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}));
  for (const auto& h : std::vector<std::pair<int, int>>{{32, 8}, {32, 4}, {64, 8}, {16, 16}, {32, 32}}) {
    EXPECT_TRUE(fp8.heads.count(h)) << h.first << "/" << h.second;
  }
}

// The validation sweeps measure generalisation, so none of their batches, lengths, head
// layouts or capacities may appear anywhere in their training grid.
void expect_disjoint(const std::string& training_name, const std::string& validation_name) {
  SCOPED_TRACE(validation_name + " against " + training_name);
  const GridSpec full = load_grid_file(shipped_grid(training_name));
  const GridSpec validation = load_grid_file(shipped_grid(validation_name));
  auto collect = [](const GridSpec& grid, std::set<int>& batches, std::set<int>& contexts,
                    std::set<std::pair<int, int>>& heads, std::set<int>& num_heads,
                    std::set<std::int64_t>& capacities) {
    for (const GridBlock& block : grid.blocks) {
      batches.insert(block.batch.values.begin(), block.batch.values.end());
      contexts.insert(block.context_len.values.begin(), block.context_len.values.end());
      for (const auto& h : block.heads.values) {
        heads.insert({h.num_heads, h.num_kv_heads});
        num_heads.insert(h.num_heads);
      }
      for (const auto& c : block.cache_capacity.values) {
        for (int context : block.context_len.values) capacities.insert(c.resolve(context));
      }
    }
  };
  std::set<int> full_batches, full_contexts, full_num_heads, val_batches, val_contexts, val_num_heads;
  std::set<std::pair<int, int>> full_heads, val_heads;
  std::set<std::int64_t> full_capacities, val_capacities;
  collect(full, full_batches, full_contexts, full_heads, full_num_heads, full_capacities);
  collect(validation, val_batches, val_contexts, val_heads, val_num_heads, val_capacities);

  auto overlap = [](const auto& a, const auto& b) {
    std::size_t common = 0;
    for (const auto& value : a) common += b.count(value);
    return common;
  };
  EXPECT_FALSE(val_batches.empty());
  EXPECT_EQ(overlap(val_batches, full_batches), 0u);
  EXPECT_EQ(overlap(val_contexts, full_contexts), 0u);
  EXPECT_EQ(overlap(val_heads, full_heads), 0u);
  EXPECT_EQ(overlap(val_num_heads, full_num_heads), 0u);
  EXPECT_EQ(overlap(val_capacities, full_capacities), 0u);
  std::set<ElementTypes> full_dtypes, val_dtypes;
  for (const GridBlock& block : full.blocks) full_dtypes.insert(block.dtypes.values.begin(), block.dtypes.values.end());
  for (const GridBlock& block : validation.blocks) val_dtypes.insert(block.dtypes.values.begin(), block.dtypes.values.end());
  EXPECT_EQ(overlap(val_dtypes, full_dtypes), val_dtypes.size());  // what is validated was trained
}

TEST(ShippedGrids, ValidationValuesAreDisjointFromFull) { expect_disjoint("full", "validation"); }
TEST(ShippedGrids, Fp8ValidationValuesAreDisjointFromFp8) { expect_disjoint("fp8", "fp8_validation"); }

}  // namespace
}  // namespace splitkv::tuner
