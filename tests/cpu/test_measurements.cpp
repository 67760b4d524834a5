#include "splitkv/heuristics/measurements.hpp"

#include <string>

#include <gtest/gtest.h>

#include "heuristics_test_support.hpp"
#include "splitkv/tuner/sha256.hpp"
#include "splitkv/tuner/sidecar.hpp"
#include "tuner_test_support.hpp"

namespace splitkv::heuristics {
namespace {

using testing::csv_text;
using testing::decode_point;
using testing::timed_row;
using splitkv::testing::contains;
using splitkv::testing::ScopedTempDir;
using splitkv::testing::write_text;

std::string error_of(const std::string& text, const std::string& source = "bad.csv", LoadOptions options = {}) {
  try {
    measurements_from_text(text, source, options);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

std::vector<tuner::ResultRow> three_rows() {
  const auto p = decode_point(4, 8192);
  return {timed_row(p, 1, 50.0), timed_row(p, 2, 40.0), timed_row(p, 4, 35.0)};
}

TEST(Measurements, GroupsOkRowsByShape) {
  auto rows = three_rows();
  const auto other = decode_point(1, 1024);
  rows.push_back(timed_row(other, 2, 9.0));
  rows.push_back(timed_row(other, 1, 12.0));
  tuner::ResultRow failed = timed_row(other, 4, 0);
  failed.status = tuner::PointStatus::oom;
  failed.time_us_median = failed.time_us_p10 = failed.time_us_p90 = failed.cv = failed.tbps = tuner::ResultRow::kMissing;
  rows.push_back(failed);
  const std::string text = csv_text(rows);
  const Measurements m = measurements_from_text(text, "results/x.csv");
  EXPECT_EQ(m.gpu, "NVIDIA H200");
  EXPECT_EQ(m.kernel, "splitkv");
  EXPECT_EQ(m.sm_count, 132);
  EXPECT_EQ(m.sm_count_source, "known GPU list");
  EXPECT_EQ(m.sha256, tuner::sha256_hex(text));
  EXPECT_EQ(m.counts.rows, 6);
  EXPECT_EQ(m.counts.ok, 5);
  EXPECT_EQ(m.counts.excluded.at("oom"), 1);
  ASSERT_EQ(m.shapes.size(), 2u);
  // Sorted by shape: batch 1 before batch 4; timings ascending in splits.
  EXPECT_EQ(m.shapes[0].point.batch, 1);
  ASSERT_EQ(m.shapes[0].timings.size(), 2u);
  EXPECT_EQ(m.shapes[0].timings[0].num_splits, 1);
  EXPECT_EQ(m.shapes[0].timings[1].num_splits, 2);
  EXPECT_EQ(m.shapes[0].timings[1].line, 5);  // header is line 1
  EXPECT_EQ(m.shapes[1].timings.size(), 3u);
  EXPECT_EQ(m.shapes[1].find(4)->time_us, 35.0);
  EXPECT_EQ(m.shapes[1].find(3), nullptr);
}

TEST(Measurements, ThrottledRowsAreExcludedAndSupersededByALaterRow) {
  auto rows = three_rows();
  tuner::ResultRow throttled = rows[2];
  throttled.status = tuner::PointStatus::throttled;
  throttled.time_us_median = 99.0;
  rows.insert(rows.begin() + 2, throttled);  // the resume re-measured it afterwards
  const Measurements m = measurements_from_text(csv_text(rows), "x.csv");
  EXPECT_EQ(m.counts.superseded, 1);
  EXPECT_EQ(m.counts.ok, 3);
  EXPECT_EQ(m.shapes[0].find(4)->time_us, 35.0);
  // A throttled row nobody re-measured is excluded and counted.
  rows = three_rows();
  rows[1].status = tuner::PointStatus::throttled;
  const Measurements alone = measurements_from_text(csv_text(rows), "x.csv");
  EXPECT_EQ(alone.counts.excluded.at("throttled"), 1);
  EXPECT_EQ(alone.shapes[0].find(2), nullptr);
}

TEST(Measurements, BadFilesNameFileLineAndReason) {
  auto rows = three_rows();
  EXPECT_PRED2(contains, error_of(""), "bad.csv: is empty");
  EXPECT_PRED2(contains, error_of(tuner::format_results_header()), "bad.csv: holds no complete data rows");

  std::string no_cv = csv_text(rows);
  no_cv.replace(no_cv.find(",cv,"), 4, ",");
  EXPECT_PRED2(contains, error_of(no_cv), "bad.csv:1:1: header lacks column \"cv\"");

  rows[2].time_us_median = -3.5;
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "bad.csv:4: time_us_median -3.5 is not a positive finite time");
  rows[2].time_us_median = 0;
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "bad.csv:4: time_us_median 0 is not a positive");

  std::string nan_text = csv_text(three_rows());
  nan_text.replace(nan_text.rfind(",35,"), 4, ",nan,");
  EXPECT_PRED2(contains, error_of(nan_text), "bad.csv:4:");
  EXPECT_PRED2(contains, error_of(nan_text), "time_us_median: \"nan\" is not a finite number");

  rows = three_rows();
  rows[2].cv = -0.1;
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "bad.csv:4: cv -0.1 is not a finite number >= 0");

  rows = three_rows();
  rows[2].gpu = "NVIDIA A100-SXM4-80GB";
  // One GPU per file and one final row per point: tuner::check_results_consistency's rule.
  EXPECT_PRED2(contains, error_of(csv_text(rows)),
               "bad.csv:4:1: column gpu: \"NVIDIA A100-SXM4-80GB\" differs from \"NVIDIA H200\" (line 2)");

  rows = three_rows();
  rows.push_back(rows[0]);
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "bad.csv:5:1: duplicate row for splitkv contiguous bf16 b4 h32/8");
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "(final already at line 2)");

  rows = three_rows();
  for (auto& r : rows) r.status = tuner::PointStatus::oom;
  for (auto& r : rows) r.time_us_median = r.time_us_p10 = r.time_us_p90 = r.cv = r.tbps = tuner::ResultRow::kMissing;
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "none of its 3 rows has status ok");
}

TEST(Measurements, UnknownGpuNeedsAnSmCount) {
  auto rows = three_rows();
  for (auto& r : rows) r.gpu = "Mystery GPU";
  EXPECT_PRED2(contains, error_of(csv_text(rows)), "cannot tell the SM count of \"Mystery GPU\"");
  LoadOptions options;
  options.sm_count = 100;
  EXPECT_EQ(measurements_from_text(csv_text(rows), "x.csv", options).sm_count, 100);
}

TEST(Measurements, KernelSelection) {
  auto rows = three_rows();
  auto other = three_rows();
  for (auto& r : other) r.kernel = "unpacked_gqa";
  rows.insert(rows.end(), other.begin(), other.end());
  const std::string text = csv_text(rows);
  const Measurements m = measurements_from_text(text, "x.csv");
  EXPECT_EQ(m.kernel, "splitkv");  // ours, when several kernels are present
  EXPECT_EQ(m.counts.other_kernels, 3);
  LoadOptions options;
  options.kernel = "unpacked_gqa";
  EXPECT_EQ(measurements_from_text(text, "x.csv", options).kernel, "unpacked_gqa");
  options.kernel = "nope";
  EXPECT_PRED2(contains, error_of(text, "x.csv", options), "no ok rows of kernel \"nope\"");
}

std::vector<tuner::ResultRow> fp8_rows(int batch = 4) {
  auto p = decode_point(batch, 8192);
  p.kv_dtype = KvDtype::fp8_e4m3;
  return {timed_row(p, 1, 30.0), timed_row(p, 2, 22.0), timed_row(p, 4, 21.0)};
}

TEST(KvDtypeClass, SpellingRoundTrips) {
  for (KvDtypeClass c : {KvDtypeClass::sixteen_bit, KvDtypeClass::fp8_e4m3}) {
    EXPECT_EQ(parse_kv_dtype_class(to_string(c)), c);
  }
  EXPECT_EQ(to_string(KvDtypeClass::sixteen_bit), "16bit");
  EXPECT_EQ(to_string(KvDtypeClass::fp8_e4m3), "fp8_e4m3");
  // The classes, not the dtype column's values: bf16 and fp16 are one class.
  EXPECT_EQ(parse_kv_dtype_class("bf16"), std::nullopt);
  EXPECT_EQ(parse_kv_dtype_class("fp8"), std::nullopt);
}

// bf16 and fp16 rows pool into the 16bit class; fp8_e4m3 rows are their own; a file with both
// classes needs the flag, and a class the file lacks is refused by name.
TEST(Measurements, KvDtypeClassSelection) {
  auto sixteen = three_rows();
  auto fp16 = decode_point(2, 8192);
  fp16.dtype = DType::fp16;
  sixteen.push_back(timed_row(fp16, 1, 20.0));
  const Measurements only16 = measurements_from_text(csv_text(sixteen), "x.csv");
  EXPECT_EQ(only16.kv_dtype, KvDtypeClass::sixteen_bit);
  EXPECT_EQ(only16.shapes.size(), 2u);  // bf16 and fp16 together
  EXPECT_EQ(only16.kv_dtypes_present, (std::vector<KvDtypeClass>{KvDtypeClass::sixteen_bit}));
  EXPECT_EQ(kv_dtype_argument(only16), "");

  const Measurements only8 = measurements_from_text(csv_text(fp8_rows()), "x.csv");
  EXPECT_EQ(only8.kv_dtype, KvDtypeClass::fp8_e4m3);
  ASSERT_EQ(only8.shapes.size(), 1u);
  EXPECT_EQ(only8.shapes[0].point.kv_dtype, KvDtype::fp8_e4m3);
  EXPECT_EQ(only8.shapes[0].total_tokens, 4 * 8192);  // kv_bytes count one byte per element
  EXPECT_EQ(kv_dtype_argument(only8), " --kv-dtype fp8_e4m3");

  auto mixed = sixteen;
  for (const auto& r : fp8_rows()) mixed.push_back(r);
  tuner::ResultRow failed = fp8_rows(8).front();
  failed.status = tuner::PointStatus::oom;
  failed.time_us_median = failed.time_us_p10 = failed.time_us_p90 = failed.cv = failed.tbps = tuner::ResultRow::kMissing;
  mixed.push_back(failed);
  const std::string text = csv_text(mixed);
  const std::string both = error_of(text, "results/h200/mixed.csv");
  EXPECT_PRED2(contains, both,
               "results/h200/mixed.csv: ok rows of kernel splitkv for two KV cache classes, 16bit (bf16/fp16, 4 rows) "
               "and fp8_e4m3 (3 rows); a table is fitted for one: pass --kv-dtype 16bit or --kv-dtype fp8_e4m3");

  LoadOptions options;
  options.kv_dtype = KvDtypeClass::fp8_e4m3;
  const Measurements picked8 = measurements_from_text(text, "x.csv", options);
  EXPECT_EQ(picked8.kv_dtype, KvDtypeClass::fp8_e4m3);
  EXPECT_EQ(picked8.shapes.size(), 1u);
  EXPECT_EQ(picked8.counts.ok, 3);
  EXPECT_EQ(picked8.counts.other_kv_dtypes, 4);
  EXPECT_EQ(picked8.counts.excluded.at("oom"), 1);  // its own class's failure
  EXPECT_EQ(picked8.kv_dtypes_present.size(), 2u);
  options.kv_dtype = KvDtypeClass::sixteen_bit;
  const Measurements picked16 = measurements_from_text(text, "x.csv", options);
  EXPECT_EQ(picked16.shapes.size(), 2u);
  EXPECT_EQ(picked16.counts.other_kv_dtypes, 3);
  EXPECT_TRUE(picked16.counts.excluded.empty());  // the fp8 failure is not this class's
  EXPECT_EQ(kv_dtype_argument(picked16), " --kv-dtype 16bit");  // the default would refuse this file

  options.kv_dtype = KvDtypeClass::fp8_e4m3;
  EXPECT_PRED2(contains, error_of(csv_text(sixteen), "x.csv", options),
               "x.csv: no ok rows of kernel splitkv with KV cache class fp8_e4m3 (--kv-dtype fp8_e4m3); its ok rows "
               "are 16bit (bf16/fp16, 4 rows)");
  options.kv_dtype = KvDtypeClass::sixteen_bit;
  EXPECT_PRED2(contains, error_of(csv_text(fp8_rows()), "x.csv", options),
               "no ok rows of kernel splitkv with KV cache class 16bit (--kv-dtype 16bit); its ok rows are fp8_e4m3 "
               "(3 rows)");
}

TEST(Measurements, MergedPartsShareTheKvDtypeClass) {
  const Measurements a = measurements_from_text(csv_text(three_rows()), "a.csv");
  const Measurements b = measurements_from_text(csv_text(fp8_rows(2)), "b.csv");
  try {
    merge_measurements({a, b});
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "b.csv: KV dtype class fp8_e4m3 differs from 16bit in a.csv");
  }
  const Measurements c = measurements_from_text(csv_text(fp8_rows(8)), "c.csv");
  const Measurements merged = merge_measurements({b, c});
  EXPECT_EQ(merged.kv_dtype, KvDtypeClass::fp8_e4m3);
  EXPECT_EQ(merged.shapes.size(), 2u);
}

TEST(Measurements, FilesAndSidecars) {
  ScopedTempDir dir;
  EXPECT_THROW(load_measurements(dir.file("missing.csv")), InputError);
  const std::string csv = dir.file("run.csv");
  write_text(csv, csv_text(three_rows()));
  EXPECT_EQ(load_measurements(csv).measured_at, "");

  tuner::Sidecar sidecar;
  sidecar.tool_version = "0.1.0";
  sidecar.device.name = "NVIDIA H200";
  sidecar.device.sm_count = 120;  // e.g. a part with fused-off SMs: the sidecar wins over the list
  sidecar.started_at = "2026-11-29T10:00:00Z";
  sidecar.finished_at = "2026-11-29T10:02:10Z";
  tuner::write_sidecar(tuner::sidecar_path_for(csv), sidecar);
  const Measurements m = load_measurements(csv);
  EXPECT_EQ(m.measured_at, "2026-11-29T10:02:10Z");
  EXPECT_EQ(m.sm_count, 120);
  EXPECT_EQ(m.sm_count_source, "sidecar");
  LoadOptions flag;
  flag.sm_count = 132;
  EXPECT_EQ(load_measurements(csv, flag).sm_count_source, "flag");

  sidecar.device.name = "NVIDIA H100 80GB HBM3";
  tuner::write_sidecar(tuner::sidecar_path_for(csv), sidecar);
  try {
    load_measurements(csv);
    ADD_FAILURE() << "a sidecar of another GPU must be refused";
  } catch (const InputError& error) {
    EXPECT_PRED2(contains, std::string(error.what()), "run.json: device.name \"NVIDIA H100 80GB HBM3\" differs");
  }
}

TEST(Measurements, PagedCapacityIsTheBlockTableSpan) {
  MeasuredShape shape;
  shape.point = decode_point(1, 1000, 1000, 8, 128, 64);
  EXPECT_EQ(shape.capacity_tokens(), 1024);  // 16 pages of 64
  EXPECT_EQ(shape.kv_tiles(), 16);
}

TEST(Measurements, DisplayPath) {
  EXPECT_EQ(display_path("results/h200/./full.csv"), "results/h200/full.csv");
  EXPECT_EQ(display_path("a/../b.csv"), "b.csv");
}

// Several training CSVs (`splitkv fit a.csv b.csv`): one set, in the one shape order, with the
// counts added up and a digest of the parts' digests; mixed GPUs, kernels or SM counts and a
// shape measured in two files are refused with both files named.
TEST(Measurements, MergedPartsFormOneTrainingSet) {
  const std::string a_text = csv_text(three_rows());
  const auto other = decode_point(1, 1024);
  const std::string b_text = csv_text({timed_row(other, 1, 12.0), timed_row(other, 2, 9.0)});
  const Measurements a = measurements_from_text(a_text, "a.csv");
  const Measurements b = measurements_from_text(b_text, "b.csv");
  const Measurements merged = merge_measurements({a, b});
  EXPECT_EQ(merged.source_display, "a.csv + b.csv");
  EXPECT_EQ(merged.sha256, tuner::sha256_hex(tuner::sha256_hex(a_text) + "\n" + tuner::sha256_hex(b_text)));
  EXPECT_EQ(merged.counts.rows, 5);
  EXPECT_EQ(merged.counts.ok, 5);
  EXPECT_EQ(merged.counts.shapes, 2);
  ASSERT_EQ(merged.shapes.size(), 2u);
  EXPECT_EQ(merged.shapes[0].point.batch, 1);  // b's shape sorts first, as in one file
  EXPECT_EQ(merged.shapes[1].point.batch, 4);
  EXPECT_EQ(merged.gpu, "NVIDIA H200");
  EXPECT_EQ(merged.sm_count, 132);
  // The order of the parts changes the digest (it is recorded), not the shapes.
  const Measurements reversed = merge_measurements({b, a});
  EXPECT_NE(reversed.sha256, merged.sha256);
  EXPECT_EQ(reversed.shapes[0].point.batch, 1);
  // One part is itself.
  EXPECT_EQ(merge_measurements({a}).sha256, a.sha256);
  // On a command line the parts are separate arguments, quoted where a shell needs it: the
  // recorded "x + y" cannot be split back when a path itself holds " + ".
  EXPECT_EQ(command_line_inputs(merged), "a.csv b.csv");
  const Measurements odd = merge_measurements(
      {measurements_from_text(a_text, "runs/a + b.csv"), measurements_from_text(b_text, "it's.csv")});
  EXPECT_EQ(odd.source_display, "runs/a + b.csv + it's.csv");
  EXPECT_EQ(command_line_inputs(odd), "'runs/a + b.csv' 'it'\\''s.csv'");

  auto error_of_merge = [](std::vector<Measurements> parts) -> std::string {
    try {
      merge_measurements(std::move(parts));
    } catch (const InputError& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string twice = error_of_merge({a, measurements_from_text(a_text, "copy.csv")});
  EXPECT_TRUE(contains(twice, "copy.csv:2: shape")) << twice;
  EXPECT_TRUE(contains(twice, "is also measured in a.csv")) << twice;
  auto rows = three_rows();
  for (auto& r : rows) r.gpu = "NVIDIA A100-SXM4-80GB";
  const std::string gpus = error_of_merge({b, measurements_from_text(csv_text(rows), "a100.csv")});
  EXPECT_TRUE(contains(gpus, "a100.csv: gpu \"NVIDIA A100-SXM4-80GB\" differs from \"NVIDIA H200\" in b.csv")) << gpus;
  Measurements other_sms = a;
  other_sms.source = "other.csv";
  other_sms.sm_count = 114;
  other_sms.shapes.clear();
  const std::string sms = error_of_merge({b, other_sms});
  EXPECT_TRUE(contains(sms, "other.csv: 114 SMs")) << sms;
  Measurements other_kernel = other_sms;
  other_kernel.sm_count = 132;
  other_kernel.kernel = "unpacked_gqa";
  const std::string kernels = error_of_merge({b, other_kernel});
  EXPECT_TRUE(contains(kernels, "other.csv: kernel unpacked_gqa differs from splitkv in b.csv")) << kernels;
}

}  // namespace
}  // namespace splitkv::heuristics
