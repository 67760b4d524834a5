#include "splitkv/tuner/results_csv.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tuner_test_support.hpp"

namespace splitkv::tuner {
namespace {

using testing::contains;
using testing::read_text;
using testing::ScopedTempDir;
using testing::starts_with;
using testing::write_text;

const char* const kHeader =
    "gpu,kernel,layout,page_size,dtype,batch,num_heads,num_kv_heads,head_dim,context_len,"
    "cache_capacity,length_distribution,num_splits,time_us_median,time_us_p10,time_us_p90,cv,"
    "repetitions,kv_bytes,tbps,status,message\n";

ResultRow ok_row(int num_splits, double median) {
  ResultRow row;
  row.gpu = "NVIDIA H200";
  row.kernel = "splitkv";
  row.point.layout = KvLayout::paged;
  row.point.page_size = 16;
  row.point.batch = 8;
  row.point.num_heads = 32;
  row.point.num_kv_heads = 8;
  row.point.head_dim = 128;
  row.point.context_len = 8192;
  row.point.cache_capacity = 131072;
  row.point.num_splits = num_splits;
  row.time_us_median = median;
  row.time_us_p10 = median * 0.99;
  row.time_us_p90 = median * 1.013;
  row.cv = 0.0123456789;
  row.repetitions = 10;
  row.kv_bytes = row.point.kv_bytes();
  row.tbps = achieved_tbps(row.kv_bytes, median);
  return row;
}

ResultRow failed_row(int num_splits, PointStatus status, std::string message) {
  ResultRow row = ok_row(num_splits, 0);
  row.time_us_median = row.time_us_p10 = row.time_us_p90 = row.cv = row.tbps = ResultRow::kMissing;
  row.repetitions = 0;
  row.status = status;
  row.message = std::move(message);
  return row;
}

void expect_same(const ResultRow& a, const ResultRow& b) {
  EXPECT_EQ(a.gpu, b.gpu);
  EXPECT_EQ(a.kernel, b.kernel);
  EXPECT_EQ(a.point, b.point) << a.point.key() << " vs " << b.point.key();
  auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  EXPECT_TRUE(same(a.time_us_median, b.time_us_median)) << a.time_us_median << " " << b.time_us_median;
  EXPECT_TRUE(same(a.time_us_p10, b.time_us_p10));
  EXPECT_TRUE(same(a.time_us_p90, b.time_us_p90));
  EXPECT_TRUE(same(a.cv, b.cv));
  EXPECT_TRUE(same(a.tbps, b.tbps));
  EXPECT_EQ(a.repetitions, b.repetitions);
  EXPECT_EQ(a.kv_bytes, b.kv_bytes);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.message, b.message);
}

std::string csv_error(const std::string& text) {
  try {
    parse_results_csv(text, "r.csv");
  } catch (const CsvError& error) {
    return error.what();
  }
  return "no error";
}

// kHeader is the layout of files written before the device columns; the tests below that
// spell rows out by hand use it, so they also check that such files still read.
TEST(ResultsCsv, HeaderIsTheDocumentedSchema) {
  EXPECT_EQ(format_results_header(false), kHeader);
  EXPECT_EQ(format_results_header(), std::string(kHeader).insert(std::strlen(kHeader) - 1, ",gpu_index,gpu_uuid"));
}

TEST(ResultsCsv, DeviceColumnsRoundTripAndFilesWithoutThemStillRead) {
  ResultRow row = ok_row(4, 12.5);
  row.gpu_index = 3;
  row.gpu_uuid = "GPU-5b1a0c2e-0000-4000-8000-000000000003";
  const ResultsCsv read = parse_results_csv(format_results_header() + format_results_row(row), "r.csv");
  ASSERT_EQ(read.rows.size(), 1u);
  EXPECT_TRUE(read.device_columns);
  EXPECT_EQ(read.rows[0].gpu_index, 3);
  EXPECT_EQ(read.rows[0].gpu_uuid, row.gpu_uuid);
  // Unknown device: both fields empty.
  row.gpu_index = -1;
  row.gpu_uuid.clear();
  EXPECT_PRED2(testing::ends_with, format_results_row(row), ",ok,,,\n");
  // A file without the two columns reads as rows whose device is unknown.
  const ResultsCsv old = parse_results_csv(std::string(kHeader) + format_results_row(ok_row(2, 7), false), "r.csv");
  ASSERT_EQ(old.rows.size(), 1u);
  EXPECT_FALSE(old.device_columns);
  EXPECT_EQ(old.rows[0].gpu_index, -1);
  EXPECT_EQ(old.rows[0].gpu_uuid, "");
  // The two come as a pair, and an index is a whole number >= 0.
  const std::string half = std::string(kHeader).insert(std::strlen(kHeader) - 1, ",gpu_index");
  EXPECT_PRED2(contains, csv_error(half), "r.csv:1:1: header lacks column \"gpu_uuid\"");
  std::string bad = format_results_row(ok_row(2, 7));
  bad.replace(bad.rfind(",,"), 2, ",x,");
  EXPECT_PRED2(contains, csv_error(format_results_header() + bad), "r.csv:2:");
  EXPECT_PRED2(contains, csv_error(format_results_header() + bad), "column gpu_index: \"x\" is not an integer");
}

TEST(ResultsCsv, AppendingToAFileWithoutTheDeviceColumnsKeepsItsLayout) {
  ScopedTempDir dir;
  const std::string path = dir.file("old.csv");
  write_text(path, std::string(kHeader) + format_results_row(ok_row(1, 20), false));
  {
    ResultsCsvWriter writer(path);
    ResultRow row = ok_row(2, 11);
    row.gpu_index = 0;
    row.gpu_uuid = "GPU-0";
    writer.append(row);
  }
  const ResultsCsv read = read_results_csv(path);
  ASSERT_EQ(read.rows.size(), 2u);
  EXPECT_FALSE(read.device_columns);
  EXPECT_EQ(read.rows[1].time_us_median, 11);
  EXPECT_EQ(read.rows[1].gpu_uuid, "");  // not written: the file has no such column
}

TEST(ResultsCsv, RowsRoundTripExactly) {
  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  std::vector<ResultRow> rows = {
      ok_row(1, 61.234567891234),
      ok_row(2, 1e-3),
      failed_row(4, PointStatus::oom, "cudaMalloc: out of memory, needed 3 GB"),
      failed_row(8, PointStatus::invalid, "said \"no\", twice"),
      failed_row(16, PointStatus::launch_failed, ""),
  };
  rows[1].point.layout = KvLayout::contiguous;
  rows[1].point.page_size = 0;
  rows[1].point.dtype = DType::fp16;
  {
    ResultsCsvWriter writer(path);
    for (const ResultRow& row : rows) writer.append(row);
  }
  const ResultsCsv read = read_results_csv(path);
  EXPECT_FALSE(read.torn.has_value());
  ASSERT_EQ(read.rows.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) expect_same(read.rows[i], rows[i]);
  EXPECT_EQ(read.row_lines, (std::vector<int>{2, 3, 4, 5, 6}));
  EXPECT_PRED2(contains, read_text(path), ",oom,\"cudaMalloc: out of memory, needed 3 GB\",,\n");
  EXPECT_PRED2(contains, read_text(path), ",invalid,\"said \"\"no\"\", twice\",,\n");
  EXPECT_PRED2(contains, read_text(path), ",,,,,0,");  // failures leave the timings empty
}

TEST(ResultsCsv, NewlinesInMessagesAreFlattenedSoEachRowIsOneLine) {
  ResultRow row = failed_row(1, PointStatus::launch_failed, "first\nsecond\r\nthird");
  const std::string line = format_results_row(row, false);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const ResultsCsv read = parse_results_csv(std::string(kHeader) + line, "r.csv");
  ASSERT_EQ(read.rows.size(), 1u);
  EXPECT_EQ(read.rows[0].message, "first second  third");
}

TEST(ResultsCsv, ReaderAcceptsQuotedNewlinesAndCrlf) {
  std::string header = kHeader;
  header.insert(header.size() - 1, "\r");
  const std::string text = header +
      "g,k,contiguous,0,bf16,1,8,8,64,128,128,fixed,1,,,,,0,32768,,invalid,\"two\nlines\"\r\n"
      "g,k,contiguous,0,bf16,1,8,8,64,128,128,fixed,2,5,4,6,0.1,3,32768,0.0065,ok,\r\n";
  const ResultsCsv read = parse_results_csv(text, "r.csv");
  ASSERT_EQ(read.rows.size(), 2u);
  EXPECT_EQ(read.rows[0].message, "two\nlines");
  EXPECT_EQ(read.rows[1].time_us_median, 5);
  EXPECT_EQ(read.row_lines, (std::vector<int>{2, 4}));
  EXPECT_FALSE(read.torn.has_value());
}

TEST(ResultsCsv, WriterWritesTheHeaderOnceAndAppendsAcrossOpens) {
  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  { ResultsCsvWriter(path).append(ok_row(1, 10)); }
  { ResultsCsvWriter(path, Durability::write_only).append(ok_row(2, 11)); }
  write_text(dir.file("empty.csv"), "");
  { ResultsCsvWriter(dir.file("empty.csv")).append(ok_row(3, 12)); }
  const std::string text = read_text(path);
  EXPECT_PRED2(starts_with, text, format_results_header());
  EXPECT_EQ(text.find("gpu,kernel", 1), std::string::npos);
  EXPECT_EQ(read_results_csv(path).rows.size(), 2u);
  EXPECT_EQ(read_results_csv(dir.file("empty.csv")).rows.size(), 1u);
}

TEST(ResultsCsv, SecondWriterOnTheSameFileIsRefused) {
  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  ResultsCsvWriter first(path);
  try {
    ResultsCsvWriter second(path);
    FAIL() << "two writers on one file";
  } catch (const CsvError& error) {
    EXPECT_EQ(std::string(error.what()), path + ": another sweep is writing this file");
  }
}

TEST(ResultsCsv, TornLastLineIsDroppedReportedAndTruncatedOnResume) {
  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  {
    ResultsCsvWriter writer(path);
    writer.append(ok_row(1, 10));
    writer.append(failed_row(2, PointStatus::oom, "x"));
  }
  const std::string whole = read_text(path);
  const std::string torn_row = format_results_row(ok_row(4, 12)).substr(0, 37);
  write_text(path, whole + torn_row);

  const ResultsCsv read = read_results_csv(path);
  ASSERT_EQ(read.rows.size(), 2u);
  ASSERT_TRUE(read.torn.has_value());
  EXPECT_EQ(read.torn->line, 4);
  EXPECT_EQ(read.torn->offset, std::int64_t(whole.size()));
  EXPECT_EQ(read.torn->text, torn_row);
  EXPECT_TRUE(has_measured_data(read));

  // Appending onto half a row would glue two rows together.
  EXPECT_THROW(ResultsCsvWriter writer(path), CsvError);

  const ResumeState state = load_resume_state(path);
  ASSERT_TRUE(state.truncated_tail.has_value());
  EXPECT_EQ(state.truncated_tail->line, 4);
  EXPECT_EQ(read_text(path), whole);
  EXPECT_EQ(state.rows_read, 2);
  EXPECT_EQ(state.finished.size(), 2u);

  { ResultsCsvWriter(path).append(ok_row(4, 12)); }
  const ResultsCsv after = read_results_csv(path);
  EXPECT_EQ(after.rows.size(), 3u);
  EXPECT_FALSE(after.torn.has_value());
}

TEST(ResultsCsv, TornInsideQuotesAndTornHeader) {
  const std::string open_quote =
      std::string(kHeader) + "g,k,contiguous,0,bf16,1,8,8,64,128,128,fixed,1,,,,,0,1,,oom,\"half";
  const ResultsCsv read = parse_results_csv(open_quote, "r.csv");
  EXPECT_EQ(read.rows.size(), 0u);
  ASSERT_TRUE(read.torn.has_value());
  EXPECT_EQ(read.torn->line, 2);

  const ResultsCsv header_only = parse_results_csv("gpu,kernel,lay", "r.csv");
  ASSERT_TRUE(header_only.torn.has_value());
  EXPECT_EQ(header_only.torn->offset, 0);

  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  write_text(path, "gpu,kernel,lay");
  load_resume_state(path);
  EXPECT_EQ(read_text(path), "");
  { ResultsCsvWriter(path).append(ok_row(1, 1)); }
  EXPECT_EQ(read_results_csv(path).rows.size(), 1u);
}

TEST(ResultsCsv, MissingOrUnknownColumnsAreRejectedWithPosition) {
  std::string header = kHeader;
  header.replace(header.find(",cv,"), 4, ",");
  EXPECT_EQ(csv_error(header), "r.csv:1:1: header lacks column \"cv\"");

  header = kHeader;
  header.replace(header.find(",cv,"), 4, ",cv,extra,");
  EXPECT_EQ(csv_error(header), "r.csv:1:" + std::to_string(header.find("extra") + 1) +
                                   ": unknown column \"extra\" in the header");

  header = kHeader;
  header.replace(header.find(",cv,"), 4, ",cv,cv,");
  EXPECT_EQ(csv_error(header), "r.csv:1:" + std::to_string(header.find("cv,cv") + 4) +
                                   ": column \"cv\" appears twice");
}

TEST(ResultsCsv, BadNumbersAndStatusesNameLineAndColumn) {
  const std::string good = format_results_row(ok_row(1, 10), false);
  auto with_field = [&](std::size_t index, const std::string& value) {
    std::vector<std::string> fields;
    std::string field;
    for (char c : good.substr(0, good.size() - 1)) {
      if (c == ',') {
        fields.push_back(field);
        field.clear();
      } else {
        field += c;
      }
    }
    fields.push_back(field);
    fields[index] = value;
    std::string line;
    std::size_t column = 0;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (i == index) column = line.size() + 1;
      line += fields[i] + (i + 1 < fields.size() ? "," : "\n");
    }
    return std::make_pair(std::string(kHeader) + good + line, column);
  };

  auto [text, column] = with_field(13, "12.x");
  EXPECT_EQ(csv_error(text), "r.csv:3:" + std::to_string(column) +
                                 ": column time_us_median: \"12.x\" is not a finite number");
  std::tie(text, column) = with_field(5, "eight");
  EXPECT_EQ(csv_error(text), "r.csv:3:" + std::to_string(column) + ": column batch: \"eight\" is not an integer");
  std::tie(text, column) = with_field(5, "0");
  EXPECT_EQ(csv_error(text), "r.csv:3:" + std::to_string(column) + ": column batch: \"0\" is below the minimum 1");
  std::tie(text, column) = with_field(20, "fine");
  EXPECT_PRED2(starts_with, csv_error(text),
               "r.csv:3:" + std::to_string(column) + ": column status: \"fine\" is not a status");
  std::tie(text, column) = with_field(13, "");
  EXPECT_EQ(csv_error(text), "r.csv:3:" + std::to_string(column) +
                                 ": column time_us_median: \"\" is empty but the row's status is ok");
  std::tie(text, column) = with_field(16, "nan");
  EXPECT_EQ(csv_error(text), "r.csv:3:" + std::to_string(column) + ": column cv: \"nan\" is not a finite number");
  std::tie(text, column) = with_field(2, "ring");
  EXPECT_PRED2(starts_with, csv_error(text), "r.csv:3:" + std::to_string(column) + ": column layout:");

  EXPECT_EQ(csv_error(std::string(kHeader) + "a,b,c\n"), "r.csv:2:1: expected 22 fields, got 3");
  EXPECT_PRED2(starts_with, csv_error(std::string(kHeader) + "a\"b,c\n"),
               "r.csv:2:2: stray quote inside an unquoted field");
}

TEST(ResultsCsv, ResumeSkipsTerminalRowsButNotThrottledOnes) {
  ScopedTempDir dir;
  const std::string path = dir.file("r.csv");
  {
    ResultsCsvWriter writer(path);
    writer.append(ok_row(1, 10));
    writer.append(failed_row(2, PointStatus::oom, ""));
    writer.append(failed_row(4, PointStatus::skipped, "unsupported"));
    ResultRow throttled = ok_row(8, 13);
    throttled.status = PointStatus::throttled;
    writer.append(throttled);
  }
  const ResumeState state = load_resume_state(path);
  EXPECT_EQ(state.rows_read, 4);
  EXPECT_EQ(state.finished.size(), 3u);
  EXPECT_EQ(state.finished.count(resume_key("splitkv", ok_row(1, 0).point)), 1u);
  EXPECT_EQ(state.finished.count(resume_key("splitkv", ok_row(2, 0).point)), 1u);
  EXPECT_EQ(state.finished.count(resume_key("splitkv", ok_row(8, 0).point)), 0u);
  EXPECT_EQ(state.finished.count(resume_key("other_kernel", ok_row(1, 0).point)), 0u);
  EXPECT_EQ(state.gpus, (std::set<std::string>{"NVIDIA H200"}));
  EXPECT_FALSE(state.truncated_tail.has_value());
}

TEST(ResultsCsv, MissingFileReadsAsEmpty) {
  ScopedTempDir dir;
  const ResultsCsv read = read_results_csv(dir.file("absent.csv"));
  EXPECT_TRUE(read.rows.empty());
  EXPECT_FALSE(has_measured_data(read));
  EXPECT_TRUE(load_resume_state(dir.file("absent.csv")).finished.empty());
  EXPECT_FALSE(std::filesystem::exists(dir.file("absent.csv")));
}

}  // namespace
}  // namespace splitkv::tuner
