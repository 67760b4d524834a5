#include "splitkv/tuner/grid_spec.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace splitkv::tuner {
namespace {

using nlohmann::json;

constexpr int kMaxGroupSize = 16;
constexpr int kMinPageSize = 16;
constexpr int kMaxPageSize = 256;
constexpr double kMaxCapacityMultiple = 1024;
// Token counts stay well inside int, so ceil_div(tokens, 256) and friends cannot overflow.
constexpr int kMaxTokens = 1 << 30;
// No device holds more; it also keeps byte counts (and sums of them) far from int64 limits.
constexpr double kMaxMemoryBudgetGb = 10000;
// One shape's bytes (KV cache at capacity) must stay countable in int64 with room to spare.
constexpr long double kMaxShapeBytes = 1ull << 60;

const std::vector<std::string> kAxisKeys = {"layouts",     "dtypes",       "batch",
                                            "heads",       "head_dim",     "context_len",
                                            "cache_capacity", "length_distribution",
                                            "num_splits"};

std::string child(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string element(const std::string& parent, std::size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : ", ") + word;
  return out;
}

// Short rendering of a JSON value for messages: enough to recognise it, never a whole
// nested document.
std::string describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return fmt::format("{} {}", value.type_name(), text);
}

bool is_power_of_two(long long value) { return value > 0 && (value & (value - 1)) == 0; }

// Line and column (1-based) of a byte offset, for JSON syntax errors.
std::pair<int, int> line_and_column(std::string_view text, std::size_t byte_offset) {
  int line = 1;
  int column = 1;
  const std::size_t end = std::min(byte_offset, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// nlohmann silently keeps the last of two equal keys; in a hand-written grid a repeated
// "batch" is always a mistake, so the parse callback tracks the path and rejects it.
class DuplicateKeyGuard {
 public:
  explicit DuplicateKeyGuard(const std::string& source) : source_(source) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames_.push_back(Frame{false, 0, {}, {}});
        break;
      case json::parse_event_t::array_start:
        frames_.push_back(Frame{true, 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Frame& frame = frames_.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second) {
          throw GridError(fmt::format("{}: {}: duplicate key", source_, current_path()));
        }
        break;
      }
      case json::parse_event_t::value:
        advance();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        advance();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_array;
    std::size_t index;
    std::string key;
    std::set<std::string> keys;
  };

  void advance() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().index;
  }

  std::string current_path() const {
    std::string path;
    for (const Frame& frame : frames_) {
      path = frame.is_array ? element(path, frame.index) : child(path, frame.key);
    }
    return path;
  }

  const std::string& source_;
  std::vector<Frame> frames_;
};

class GridParser {
 public:
  explicit GridParser(const std::string& source) : source_(source) {}

  GridSpec parse(const json& root) {
    expect_object(root, "");
    check_keys(root, "",
               concat(concat({"name", "description", "comment", "memory_budget_gb", "protocol",
                              "blocks"},
                             kAxisKeys),
                      {"length_files"}));

    GridSpec grid;
    grid.source = source_;
    grid.name = require_string(root, "", "name");
    if (grid.name.empty()) fail("name", "must not be empty");
    if (root.contains("description")) grid.description = require_string(root, "", "description");
    if (root.contains("comment")) require_string(root, "", "comment");

    const json& budget = require(root, "", "memory_budget_gb");
    grid.memory_budget_gb = as_number(budget, "memory_budget_gb");
    if (!(grid.memory_budget_gb > 0)) {
      fail("memory_budget_gb", fmt::format("must be > 0, got {}", grid.memory_budget_gb));
    }
    if (!(grid.memory_budget_gb <= kMaxMemoryBudgetGb)) {
      fail("memory_budget_gb", fmt::format("{} is more than any device holds (at most {} GB)",
                                           grid.memory_budget_gb, kMaxMemoryBudgetGb));
    }
    grid.protocol = parse_protocol(require(root, "", "protocol"), "protocol");
    if (root.contains("length_files")) length_files_ = parse_length_files(root.at("length_files"), "length_files");
    grid.length_files = length_files_;

    const GridBlock defaults = parse_axes(root, "");
    if (root.contains("blocks")) {
      const json& blocks = root.at("blocks");
      expect_array(blocks, "blocks");
      if (blocks.empty()) fail("blocks", "must not be empty (leave it out for a single product)");
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        const std::string path = element("blocks", i);
        expect_object(blocks[i], path);
        check_keys(blocks[i], path, concat({"comment"}, kAxisKeys));
        if (blocks[i].contains("comment")) require_string(blocks[i], path, "comment");
        GridBlock block = merge(parse_axes(blocks[i], path), defaults, path);
        check_block(block);
        grid.blocks.push_back(std::move(block));
      }
    } else {
      GridBlock block = merge(defaults, GridBlock{}, "");
      check_block(block);
      grid.blocks.push_back(std::move(block));
    }
    return grid;
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw GridError(fmt::format("{}: {}: {}", source_, path.empty() ? "(top level)" : path,
                                reason));
  }

  static std::vector<std::string> concat(std::vector<std::string> a,
                                         const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  void expect_object(const json& value, const std::string& path) const {
    if (!value.is_object()) fail(path, "expected an object, got " + describe(value));
  }

  void expect_array(const json& value, const std::string& path) const {
    if (!value.is_array()) fail(path, "expected an array, got " + describe(value));
  }

  void check_keys(const json& object, const std::string& path,
                  const std::vector<std::string>& allowed) const {
    for (const auto& item : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
        fail(child(path, item.key()), "unknown key (expected one of: " + join(allowed) + ")");
      }
    }
  }

  const json& require(const json& object, const std::string& path, const std::string& key) const {
    if (!object.contains(key)) fail(child(path, key), "missing required key");
    return object.at(key);
  }

  std::string require_string(const json& object, const std::string& path,
                             const std::string& key) const {
    const json& value = require(object, path, key);
    if (!value.is_string()) fail(child(path, key), "expected a string, got " + describe(value));
    return value.get<std::string>();
  }

  double as_number(const json& value, const std::string& path) const {
    if (!value.is_number()) fail(path, "expected a number, got " + describe(value));
    return value.get<double>();
  }

  int as_int(const json& value, const std::string& path, long long min_value,
             long long max_value) const {
    if (!value.is_number_integer()) fail(path, "expected an integer, got " + describe(value));
    long long number = 0;
    if (value.is_number_unsigned()) {
      const auto unsigned_value = value.get<unsigned long long>();
      number = unsigned_value > static_cast<unsigned long long>(std::numeric_limits<long long>::max())
                   ? std::numeric_limits<long long>::max()
                   : static_cast<long long>(unsigned_value);
    } else {
      number = value.get<long long>();
    }
    if (number < min_value || number > max_value) {
      fail(path, fmt::format("{} is out of range [{}, {}]", number, min_value, max_value));
    }
    return static_cast<int>(number);
  }

  MeasurementProtocol parse_protocol(const json& value, const std::string& path) const {
    expect_object(value, path);
    check_keys(value, path,
               {"repetitions", "min_working_set_l2_multiple", "warmup_replays", "min_time_s"});
    MeasurementProtocol protocol;
    protocol.repetitions =
        as_int(require(value, path, "repetitions"), child(path, "repetitions"), 1, 1000);
    protocol.warmup_replays =
        as_int(require(value, path, "warmup_replays"), child(path, "warmup_replays"), 0, 100000);
    const std::string multiple_path = child(path, "min_working_set_l2_multiple");
    protocol.min_working_set_l2_multiple =
        as_number(require(value, path, "min_working_set_l2_multiple"), multiple_path);
    if (!(protocol.min_working_set_l2_multiple >= 0) ||
        protocol.min_working_set_l2_multiple > 1000) {
      fail(multiple_path, fmt::format("{} is out of range [0, 1000]",
                                      protocol.min_working_set_l2_multiple));
    }
    const std::string time_path = child(path, "min_time_s");
    protocol.min_time_s = as_number(require(value, path, "min_time_s"), time_path);
    if (!(protocol.min_time_s >= 0) || protocol.min_time_s > 60) {
      fail(time_path, fmt::format("{} is out of range [0, 60] seconds", protocol.min_time_s));
    }
    return protocol;
  }

  // The axis arrays present in `object`; missing ones stay empty (path "") for merge().
  GridBlock parse_axes(const json& object, const std::string& path) const {
    GridBlock block;
    block.path = path;
    if (object.contains("layouts")) block.layouts = parse_layouts(object.at("layouts"), child(path, "layouts"));
    if (object.contains("dtypes")) block.dtypes = parse_dtypes(object.at("dtypes"), child(path, "dtypes"));
    if (object.contains("batch")) block.batch = parse_int_axis(object.at("batch"), child(path, "batch"), 1, 1 << 20);
    if (object.contains("heads")) block.heads = parse_heads(object.at("heads"), child(path, "heads"));
    if (object.contains("head_dim")) block.head_dim = parse_head_dims(object.at("head_dim"), child(path, "head_dim"));
    if (object.contains("context_len")) {
      block.context_len = parse_int_axis(object.at("context_len"), child(path, "context_len"), 1,
                                         kMaxTokens);
    }
    if (object.contains("cache_capacity")) {
      block.cache_capacity = parse_capacities(object.at("cache_capacity"), child(path, "cache_capacity"));
    }
    if (object.contains("length_distribution")) {
      block.length_distribution = parse_distributions(object.at("length_distribution"),
                                                      child(path, "length_distribution"));
    }
    if (object.contains("num_splits")) block.num_splits = parse_splits(object.at("num_splits"), child(path, "num_splits"));
    return block;
  }

  // Fills the axes a block leaves out from the top level; every axis must end up set.
  GridBlock merge(GridBlock block, const GridBlock& defaults, const std::string& path) const {
    auto take = [&](auto& axis, const auto& fallback, const char* key) {
      if (!axis.path.empty()) return;
      if (!fallback.path.empty()) {
        axis = fallback;
        return;
      }
      fail(child(path, key), path.empty() ? "missing required axis"
                                          : "missing axis (set it in the block or at the top level)");
    };
    take(block.layouts, defaults.layouts, "layouts");
    take(block.dtypes, defaults.dtypes, "dtypes");
    take(block.batch, defaults.batch, "batch");
    take(block.heads, defaults.heads, "heads");
    take(block.head_dim, defaults.head_dim, "head_dim");
    take(block.context_len, defaults.context_len, "context_len");
    take(block.cache_capacity, defaults.cache_capacity, "cache_capacity");
    if (block.length_distribution.path.empty() && defaults.length_distribution.path.empty()) {
      // Fixed lengths are the natural default; the distribution still lands in the CSV.
      block.length_distribution.values = {LengthDistribution{}};
      block.length_distribution.path = child(path, "length_distribution");
    }
    take(block.length_distribution, defaults.length_distribution, "length_distribution");
    take(block.num_splits, defaults.num_splits, "num_splits");
    block.path = path;
    return block;
  }

  // Cross-axis checks, after merging: a capacity below a context length cannot be allocated.
  void check_block(const GridBlock& block) const {
    for (std::size_t c = 0; c < block.cache_capacity.values.size(); ++c) {
      const CapacityChoice& capacity = block.cache_capacity.values[c];
      for (std::size_t l = 0; l < block.context_len.values.size(); ++l) {
        const int context = block.context_len.values[l];
        const std::int64_t tokens = capacity.resolve(context);
        const std::string capacity_path = element(block.cache_capacity.path, c);
        if (tokens < context) {
          fail(capacity_path,
               fmt::format("capacity {} is smaller than context_len {} ({}); use \"x1\" for a "
                           "capacity equal to each context",
                           tokens, context, element(block.context_len.path, l)));
        }
        if (tokens > kMaxTokens) {
          fail(capacity_path, fmt::format("{} x context_len {} ({}) is {} tokens, more than the "
                                          "limit of {}",
                                          capacity.spelling, context,
                                          element(block.context_len.path, l), tokens, kMaxTokens));
        }
      }
    }
    // The block is a full product, so its largest KV cache is a real point of it. Byte
    // counts of points are int64; refuse shapes no device could hold long before they wrap.
    long double batch = 0, capacity = 0, kv_heads = 0, head_dim = 0;
    for (int value : block.batch.values) batch = std::max<long double>(batch, value);
    for (const CapacityChoice& choice : block.cache_capacity.values) {
      for (int context : block.context_len.values) {
        capacity = std::max<long double>(capacity, choice.resolve(context));
      }
    }
    for (const HeadConfig& heads : block.heads.values) kv_heads = std::max<long double>(kv_heads, heads.num_kv_heads);
    for (int value : block.head_dim.values) head_dim = std::max<long double>(head_dim, value);
    const long double bytes = 2 * batch * capacity * kv_heads * head_dim * 2;
    if (bytes > kMaxShapeBytes) {
      fail(block.path, fmt::format("its largest shape (batch {}, cache_capacity {}, num_kv_heads {}, "
                                   "head_dim {}) needs {:.3g} bytes of KV cache, more than 2^60; "
                                   "no device holds it",
                                   double(batch), double(capacity), double(kv_heads),
                                   double(head_dim), double(bytes)));
    }
  }

  void expect_nonempty_array(const json& value, const std::string& path) const {
    expect_array(value, path);
    if (value.empty()) fail(path, "empty axis: give at least one value");
  }

  template <class T, class Same>
  void check_unique(const std::vector<T>& values, const std::string& path, Same same,
                    const std::string& shown) const {
    for (std::size_t i = 0; i + 1 < values.size(); ++i) {
      if (same(values[i], values.back())) {
        fail(element(path, values.size() - 1),
             fmt::format("duplicate value {} (already at {})", shown, element(path, i)));
      }
    }
  }

  GridAxis<int> parse_int_axis(const json& value, const std::string& path, long long min_value,
                               long long max_value) const {
    expect_nonempty_array(value, path);
    GridAxis<int> axis{{}, path};
    for (std::size_t i = 0; i < value.size(); ++i) {
      axis.values.push_back(as_int(value[i], element(path, i), min_value, max_value));
      check_unique(axis.values, path, std::equal_to<int>(), std::to_string(axis.values.back()));
    }
    return axis;
  }

  GridAxis<LayoutChoice> parse_layouts(const json& value, const std::string& path) const {
    expect_nonempty_array(value, path);
    GridAxis<LayoutChoice> axis{{}, path};
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string entry_path = element(path, i);
      const json& entry = value[i];
      expect_object(entry, entry_path);
      check_keys(entry, entry_path, {"layout", "page_size"});
      const std::string name = require_string(entry, entry_path, "layout");
      const auto layout = parse_layout(name);
      if (!layout) {
        fail(child(entry_path, "layout"),
             fmt::format("unknown layout \"{}\" (expected contiguous or paged)", name));
      }
      LayoutChoice choice{*layout, 0};
      if (*layout == KvLayout::paged) {
        const std::string page_path = child(entry_path, "page_size");
        choice.page_size = as_int(require(entry, entry_path, "page_size"), page_path, 1, 1 << 30);
        if (!is_power_of_two(choice.page_size) || choice.page_size < kMinPageSize ||
            choice.page_size > kMaxPageSize) {
          fail(page_path, fmt::format("page size {} must be a power of two in [{}, {}]",
                                      choice.page_size, kMinPageSize, kMaxPageSize));
        }
      } else if (entry.contains("page_size")) {
        fail(child(entry_path, "page_size"), "only paged layouts take a page_size");
      }
      axis.values.push_back(choice);
      check_unique(axis.values, path,
                   [](const LayoutChoice& a, const LayoutChoice& b) {
                     return a.layout == b.layout && a.page_size == b.page_size;
                   },
                   entry.dump());
    }
    return axis;
  }

  GridAxis<ElementTypes> parse_dtypes(const json& value, const std::string& path) const {
    expect_nonempty_array(value, path);
    GridAxis<ElementTypes> axis{{}, path};
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string entry_path = element(path, i);
      if (!value[i].is_string()) fail(entry_path, "expected a string, got " + describe(value[i]));
      const auto dtype = parse_element_types(value[i].get<std::string>());
      if (!dtype) {
        fail(entry_path, fmt::format("unknown dtype \"{}\" (expected bf16, fp16 or fp8_e4m3)",
                                     value[i].get<std::string>()));
      }
      axis.values.push_back(*dtype);
      check_unique(axis.values, path, std::equal_to<ElementTypes>(), value[i].dump());
    }
    return axis;
  }

  GridAxis<HeadConfig> parse_heads(const json& value, const std::string& path) const {
    expect_nonempty_array(value, path);
    GridAxis<HeadConfig> axis{{}, path};
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string entry_path = element(path, i);
      const json& entry = value[i];
      if (!entry.is_array() || entry.size() != 2) {
        fail(entry_path, "expected [num_heads, num_kv_heads], got " + describe(entry));
      }
      HeadConfig heads{as_int(entry[0], element(entry_path, 0), 1, 1 << 16),
                       as_int(entry[1], element(entry_path, 1), 1, 1 << 16)};
      if (heads.num_heads % heads.num_kv_heads != 0) {
        fail(entry_path, fmt::format("num_heads {} is not a multiple of num_kv_heads {}",
                                     heads.num_heads, heads.num_kv_heads));
      }
      if (heads.num_heads / heads.num_kv_heads > kMaxGroupSize) {
        fail(entry_path,
             fmt::format("query group of {} heads per KV head exceeds {}, the most one CTA serves",
                         heads.num_heads / heads.num_kv_heads, kMaxGroupSize));
      }
      axis.values.push_back(heads);
      check_unique(axis.values, path,
                   [](const HeadConfig& a, const HeadConfig& b) {
                     return a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads;
                   },
                   entry.dump());
    }
    return axis;
  }

  GridAxis<int> parse_head_dims(const json& value, const std::string& path) const {
    GridAxis<int> axis = parse_int_axis(value, path, 1, 1 << 16);
    for (std::size_t i = 0; i < axis.values.size(); ++i) {
      const int dim = axis.values[i];
      if (dim != 64 && dim != 128 && dim != 256) {
        fail(element(path, i), fmt::format("head_dim {} is not one of 64, 128, 256", dim));
      }
    }
    return axis;
  }

  GridAxis<CapacityChoice> parse_capacities(const json& value, const std::string& path) const {
    expect_nonempty_array(value, path);
    GridAxis<CapacityChoice> axis{{}, path};
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string entry_path = element(path, i);
      const json& entry = value[i];
      CapacityChoice choice;
      if (entry.is_string()) {
        const std::string text = entry.get<std::string>();
        choice.spelling = text;
        char* end = nullptr;
        const double multiple =
            text.size() >= 2 && text[0] == 'x' ? std::strtod(text.c_str() + 1, &end) : 0;
        if (end == nullptr || *end != '\0' || !std::isfinite(multiple)) {
          fail(entry_path, fmt::format("\"{}\" is neither a token count nor \"x<multiple>\" of "
                                       "context_len (e.g. \"x1\")",
                                       text));
        }
        if (multiple < 1 || multiple > kMaxCapacityMultiple) {
          fail(entry_path, fmt::format("multiple {} must be in [1, {}]: a cache smaller than its "
                                       "context cannot hold it",
                                       multiple, kMaxCapacityMultiple));
        }
        choice.multiple = multiple;
      } else {
        choice.tokens = as_int(entry, entry_path, 1, kMaxTokens);
        choice.spelling = std::to_string(choice.tokens);
      }
      axis.values.push_back(choice);
      check_unique(axis.values, path,
                   [](const CapacityChoice& a, const CapacityChoice& b) {
                     return a.tokens == b.tokens && a.multiple == b.multiple;
                   },
                   entry.dump());
    }
    return axis;
  }

  GridAxis<LengthDistribution> parse_distributions(const json& value, const std::string& path) const {
    expect_nonempty_array(value, path);
    GridAxis<LengthDistribution> axis{{}, path};
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string entry_path = element(path, i);
      if (!value[i].is_string()) fail(entry_path, "expected a string, got " + describe(value[i]));
      const std::string name = value[i].get<std::string>();
      const auto distribution = parse_length_distribution(name);
      if (!distribution) {
        fail(entry_path, fmt::format("unknown length distribution \"{}\" (expected fixed, uniform, "
                                     "long_tail or file:<name> with <name> of [A-Za-z0-9_.-])",
                                     name));
      }
      if (distribution->kind == LengthKind::file && !length_files_.count(distribution->file)) {
        fail(entry_path, fmt::format("\"{}\" names no entry of the top-level \"length_files\" ({})", name,
                                     length_files_.empty() ? std::string("there is none") : known_length_files()));
      }
      axis.values.push_back(*distribution);
      check_unique(axis.values, path, std::equal_to<LengthDistribution>(), value[i].dump());
    }
    return axis;
  }

  // A list of counts, "pow2" (1, 2, 4, ... 128), {"range": [lo, hi]} or {"pow2": [lo, hi]}.
  GridAxis<int> parse_splits(const json& value, const std::string& path) const {
    if (value.is_array()) return parse_int_axis(value, path, 1, kMaxSplits);
    GridAxis<int> axis{{}, path};
    if (value.is_string()) {
      if (value.get<std::string>() != "pow2") {
        fail(path, fmt::format("unknown preset {} (expected \"pow2\", a list, "
                               "{{\"range\": [lo, hi]}} or {{\"pow2\": [lo, hi]}})",
                               value.dump()));
      }
      for (int s = 1; s <= kDefaultPow2MaxSplits; s *= 2) axis.values.push_back(s);
      return axis;
    }
    if (value.is_object()) {
      check_keys(value, path, {"range", "pow2"});
      if (value.size() != 1) fail(path, "give exactly one of \"range\" or \"pow2\"");
      const std::string kind = value.begin().key();
      const std::string bounds_path = child(path, kind);
      const json& bounds = value.begin().value();
      if (!bounds.is_array() || bounds.size() != 2) {
        fail(bounds_path, "expected [lo, hi], got " + describe(bounds));
      }
      const int lo = as_int(bounds[0], element(bounds_path, 0), 1, kMaxSplits);
      const int hi = as_int(bounds[1], element(bounds_path, 1), 1, kMaxSplits);
      if (lo > hi) fail(bounds_path, fmt::format("lo {} is greater than hi {}", lo, hi));
      for (int s = lo; s <= hi; ++s) {
        if (kind == "range" || is_power_of_two(s)) axis.values.push_back(s);
      }
      if (axis.values.empty()) fail(bounds_path, fmt::format("no power of two in [{}, {}]", lo, hi));
      return axis;
    }
    fail(path, "expected a list of split counts, \"pow2\" or an object, got " + describe(value));
  }

  // {"<name>": "path relative to the grid file"}: each file is read, hashed and parsed now,
  // so a bad line stops the grid before any GPU time is spent.
  LengthFiles parse_length_files(const json& value, const std::string& path) const {
    expect_object(value, path);
    if (value.empty()) fail(path, "must not be empty (leave it out when no distribution reads a file)");
    LengthFiles files;
    const std::filesystem::path folder = std::filesystem::path(source_).parent_path();
    for (const auto& item : value.items()) {
      const std::string entry_path = child(path, item.key());
      if (!is_length_file_name(item.key())) {
        fail(entry_path, "a length file's name must be 1-64 of [A-Za-z0-9_.-]");
      }
      if (!item.value().is_string() || item.value().get<std::string>().empty()) {
        fail(entry_path, "expected a file path (relative to the grid file), got " + describe(item.value()));
      }
      const std::filesystem::path relative(item.value().get<std::string>());
      const std::string resolved = (relative.is_absolute() ? relative : folder / relative).lexically_normal().string();
      files.emplace(item.key(), load_length_file(item.key(), resolved, fmt::format("{}: {}", source_, entry_path)));
    }
    return files;
  }

  std::string known_length_files() const {
    std::vector<std::string> names;
    for (const auto& [name, file] : length_files_) names.push_back("file:" + name);
    return "known: " + join(names);
  }

  const std::string& source_;
  LengthFiles length_files_;
};

}  // namespace

std::int64_t CapacityChoice::resolve(int context_len) const {
  if (!is_multiple()) return tokens;
  // The epsilon keeps "x1.5" of 1000 at 1500 despite binary rounding of 1.5 * 1000.
  return static_cast<std::int64_t>(std::ceil(double(context_len) * multiple - 1e-9));
}

std::int64_t GridBlock::cartesian_size() const {
  return std::int64_t(layouts.values.size()) * dtypes.values.size() * batch.values.size() *
         heads.values.size() * head_dim.values.size() * context_len.values.size() *
         cache_capacity.values.size() * length_distribution.values.size() *
         num_splits.values.size();
}

std::int64_t GridSpec::memory_budget_bytes() const {
  return static_cast<std::int64_t>(memory_budget_gb * 1e9);
}

GridSpec parse_grid(std::string_view json_text, const std::string& source) {
  json root;
  try {
    DuplicateKeyGuard guard(source);
    root = json::parse(json_text.begin(), json_text.end(),
                       [&guard](int depth, json::parse_event_t event, json& parsed) {
                         return guard(depth, event, parsed);
                       });
  } catch (const json::parse_error& error) {
    // error.byte is 1-based: the offending character.
    const auto [line, column] =
        line_and_column(json_text, error.byte > 0 ? std::size_t(error.byte - 1) : 0);
    std::string reason = error.what();
    const std::size_t column_at = reason.find("column");
    const std::size_t colon = reason.find(": ", column_at == std::string::npos ? 0 : column_at);
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw GridError(fmt::format("{}:{}:{}: invalid JSON: {}", source, line, column, reason));
  } catch (const json::out_of_range& error) {
    // A number too large for a double (1e400) is out_of_range, not parse_error, and has no
    // byte offset; point at the first spelling of it. Found by fuzz/fuzz_grid_reader.
    std::string reason = error.what();
    const std::size_t bracket = reason.find("] ");
    if (bracket != std::string::npos) reason = reason.substr(bracket + 2);
    std::size_t at = std::string_view::npos;
    const std::size_t quote = reason.find('\'');
    if (quote != std::string::npos && reason.size() > quote + 2) {
      at = json_text.find(reason.substr(quote + 1, reason.size() - quote - 2));
    }
    const auto [line, column] = line_and_column(json_text, at == std::string_view::npos ? 0 : at);
    throw GridError(fmt::format("{}:{}:{}: invalid JSON: {}", source, line, column, reason));
  }
  return GridParser(source).parse(root);
}

GridSpec load_grid_file(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw GridError(fmt::format("{}: is a folder, not a grid file", path));
  }
  // A FIFO would block the read (and the sidecar hashes the file a second time).
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error)) {
    throw GridError(fmt::format("{}: is not a regular file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GridError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw GridError(fmt::format("{}: read error", path));
  return parse_grid(text.str(), path);
}

}  // namespace splitkv::tuner
