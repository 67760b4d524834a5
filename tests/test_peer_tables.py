#!/usr/bin/env python3
"""Tables and regret reports for the peers' kernels (heuristics/FIT.md, "Peer kernels"), without a GPU:
FlashAttention 3 rows from scripts/fa3_sweep.py --fake-timer (and the same rows relabelled as FlashInfer's
on a paged cache) are fitted with `splitkv fit --kernel`, the headers compiled in one translation unit
with the committed H200 table and asked what the fit's own report says they answer, `fit --check` run on
them as written and as edited, and `splitkv evaluate --kernel` checked on a hand-written CSV whose
policy-row regrets are known exactly.

    python3 tests/test_peer_tables.py --splitkv build/cli/splitkv --cxx c++ --scratch /tmp/peer_tables_test
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FA3_SWEEP = os.path.join(ROOT, "scripts", "fa3_sweep.py")
OUR_HEADER = os.path.join(ROOT, "heuristics", "generated", "num_splits_h200.hpp")
HAND_CSV = os.path.join(ROOT, "heuristics", "tests", "fixtures", "peer_fa3_policy_rows.csv")
WARNINGS = ["-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Wshadow", "-Werror"]

SPLITKV = CXX = SCRATCH = None

# Contiguous bf16 shapes FA3 runs: a core of batches and lengths, and the capacity scenario (fixed
# lengths in 131072-token caches); the validation grid's batches and lengths lie between them.
GRID = {
    "name": "peer_tables",
    "memory_budget_gb": 32,
    "protocol": {"repetitions": 3, "min_working_set_l2_multiple": 3, "warmup_replays": 1, "min_time_s": 0},
    "layouts": [{"layout": "contiguous"}],
    "dtypes": ["bf16"],
    "batch": [1, 4, 16, 64],
    "heads": [[32, 8], [32, 32]],
    "head_dim": [128],
    "context_len": [1024, 4096, 16384],
    "cache_capacity": ["x1"],
    "length_distribution": ["fixed"],
    "num_splits": [1, 2, 3, 4, 6, 8, 12, 16, 32],
    "blocks": [
        {"comment": "core"},
        {"comment": "capacity scenario", "heads": [[32, 8]], "batch": [1, 4, 16], "cache_capacity": [131072],
         "context_len": [1024, 8192, 32768]},
    ],
}
VALIDATION = dict(GRID, name="peer_tables_validation", batch=[2, 8, 24], context_len=[2048, 6000],
                  heads=[[32, 8]], blocks=[{"comment": "off-grid"}])


def splitkv(*args, expect=0, cwd=ROOT):
    done = subprocess.run([SPLITKV, *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    if done.returncode != expect:
        raise AssertionError(f"splitkv {' '.join(args)}: exit {done.returncode}, expected {expect}\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def fake_sweep(grid, out):
    path = os.path.join(SCRATCH, grid["name"] + ".json")
    with open(path, "w") as handle:
        json.dump(grid, handle)
    done = subprocess.run([sys.executable, FA3_SWEEP, "--splitkv", SPLITKV, "--grid", path, "--out", out,
                           "--fake-timer"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"fa3_sweep.py: exit {done.returncode}\n{done.stderr}")


def rows_of(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def read_table(path):
    """The rows of a report CSV, checked as a strict reader (pandas among them) would: one header, every
    row as wide, numbers where numbers belong. With pandas present, pandas reads it too."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    assert len(set(header)) == len(header), f"{path}: repeated column names"
    for i, row in enumerate(rows[1:], 2):
        assert len(row) == len(header), f"{path}:{i}: {len(row)} fields, the header has {len(header)}"
    try:
        import pandas  # noqa: F401 (optional)
    except ImportError:
        pass
    else:
        frame = pandas.read_csv(path)
        assert list(frame.columns) == header and len(frame) == len(rows) - 1
    return [dict(zip(header, row)) for row in rows[1:]]


def write_relabelled(source, out, kernels, page_size):
    """`source`'s rows as another kernel's on a paged cache: kernel names mapped by `kernels` (rows of
    other kernels dropped), layout paged with `page_size`; its sidecar copied with the kernels renamed."""
    with open(source, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames
        rows = [r for r in reader if r["kernel"] in kernels]
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow(dict(r, kernel=kernels[r["kernel"]], layout="paged", page_size=str(page_size)))
    with open(source[:-4] + ".json") as handle:
        sidecar = json.load(handle)
    sidecar["kernels"] = sorted(set(kernels.values()))
    sidecar["results_csv"] = out
    with open(out[:-4] + ".json", "w") as handle:
        json.dump(sidecar, handle, indent=1)


def ok_rows(path, kernels):
    return sum(1 for r in rows_of(path) if r["status"] == "ok" and r["kernel"] in kernels)


# Asks the three tables about shapes on stdin ("batch kv_heads head_dim length page" per line):
# our H200 table, FA3's call site of the fa3 table, FlashInfer's of the flashinfer table.
PROBE = r"""
#include "@OURS@"
#include "@FA3@"
#include "@FLASHINFER@"

#include <cstdio>

namespace ours = splitkv::generated::h200;
namespace fa3 = splitkv::generated::fa3_h200;
namespace flashinfer = splitkv::generated::flashinfer_h200;

static_assert(sizeof(fa3::kKernel) == sizeof("fa3") && fa3::kSmCount == 132, "FA3's table, measured on 132 SMs");
static_assert(sizeof(flashinfer::kKernel) == sizeof("flashinfer"), "FlashInfer's table");

int main() {
  int batch = 0, kv = 0, head_dim = 0, length = 0, page = 0;
  while (std::scanf("%d %d %d %d %d", &batch, &kv, &head_dim, &length, &page) == 5) {
    const flashinfer::FlashInferSplitKv fi =
        flashinfer::num_splits_flashinfer(batch, kv * 4, kv, head_dim, page, length, flashinfer::kSmCount);
    const fa3::ShapeInfo shape{batch, kv * 4, kv, head_dim, length, length, 0};
    std::printf("%d %d %d %d %d %d %d\n", ours::determine_num_splits_real_length(batch, kv, head_dim, length, 0),
                fa3::num_splits_heuristic_fa3(batch, kv * 4, kv, head_dim, length, fa3::kSmCount),
                fa3::num_splits_heuristic_fa3(batch * 2, kv * 4, kv, head_dim, length, 2 * fa3::kSmCount),
                fa3::determine_num_splits(shape), fi.num_splits, fi.kv_chunk_pages,
                flashinfer::determine_num_splits_real_length(batch, kv, head_dim, length, page));
  }
  return 0;
}
"""


class PeerTablesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = os.path.join(SCRATCH, "results", "h200")
        os.makedirs(cls.results)
        cls.fa3 = os.path.join(cls.results, "fa3.csv")
        cls.fa3_validation = os.path.join(cls.results, "fa3_validation.csv")
        fake_sweep(GRID, cls.fa3)
        fake_sweep(VALIDATION, cls.fa3_validation)
        cls.flashinfer = os.path.join(cls.results, "flashinfer.csv")
        write_relabelled(cls.fa3, cls.flashinfer, {"fa3": "flashinfer", "fa3_heuristic_capacity": "flashinfer_heuristic"},
                         16)
        # The default output path is named after the kernel: run where heuristics/generated/ exists.
        os.makedirs(os.path.join(SCRATCH, "heuristics", "generated"))
        cls.fit_fa3 = splitkv("fit", cls.fa3, "--kernel", "fa3", cwd=SCRATCH).stdout
        cls.fit_flashinfer = splitkv("fit", cls.flashinfer, "--kernel", "flashinfer", cwd=SCRATCH).stdout
        cls.fa3_header = os.path.join(SCRATCH, "heuristics", "generated", "num_splits_fa3_h200.hpp")
        cls.flashinfer_header = os.path.join(SCRATCH, "heuristics", "generated", "num_splits_flashinfer_h200.hpp")

    def test_fit_uses_the_fixed_split_rows_and_the_sidecars_sms(self):
        self.assertTrue(os.path.exists(self.fa3_header), self.fit_fa3)
        self.assertTrue(os.path.exists(self.flashinfer_header), self.fit_flashinfer)
        fixed = ok_rows(self.fa3, {"fa3"})
        policy = ok_rows(self.fa3, {"fa3_heuristic_capacity", "fa3_heuristic_maxlen"})
        self.assertGreater(policy, 0)
        self.assertIn(f"{fixed} ok, ", self.fit_fa3)
        self.assertIn("132 SMs from the sidecar; kernel fa3", self.fit_fa3)
        self.assertIn("namespace splitkv::generated::fa3_h200: ", self.fit_fa3)
        self.assertIn("num_splits_heuristic_fa3(...)", self.fit_fa3)
        self.assertIn("num_splits_flashinfer(...)", self.fit_flashinfer)
        with open(self.fa3_header) as handle:
            header = handle.read()
        self.assertIn(f"{fixed} ok and fitted; none excluded; {policy} policy rows kept for evaluation, not fitted",
                      header)
        self.assertIn("//   gpu        NVIDIA H200, 132 SMs (SM count from the sidecar)", header)
        self.assertIn(f"splitkv fit {os.path.relpath(self.fa3, SCRATCH)} --kernel fa3 --out "
                      "heuristics/generated/num_splits_fa3_h200.hpp\n", header)

    def test_headers_compile_together_and_answer_what_the_fit_reports(self):
        source = os.path.join(SCRATCH, "probe.cpp")
        with open(source, "w") as handle:
            handle.write(PROBE.replace("@OURS@", OUR_HEADER).replace("@FA3@", self.fa3_header)
                         .replace("@FLASHINFER@", self.flashinfer_header))
        binary = os.path.join(SCRATCH, "probe")
        done = subprocess.run([CXX, "-std=c++17", *WARNINGS, source, "-o", binary], capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)

        # What the fit picked for every training and validation shape (its `ours` column).
        report = os.path.join(SCRATCH, "fa3_report", "regret.csv")
        os.makedirs(os.path.dirname(report))
        splitkv("evaluate", self.fa3, "--kernel", "fa3", "--validation", self.fa3_validation, "--out", report,
                "--no-cross-validation")
        fi_report = os.path.join(SCRATCH, "flashinfer_report.csv")
        splitkv("evaluate", self.flashinfer, "--kernel", "flashinfer", "--out", fi_report, "--no-cross-validation")
        fa3_points = [r for r in read_table(report[:-4] + "_points.csv") if r["dataset"] in ("in_sample", "validation")]
        fi_points = [r for r in read_table(fi_report[:-4] + "_points.csv") if r["dataset"] == "in_sample"]
        self.assertEqual({r["dataset"] for r in fa3_points}, {"in_sample", "validation"})
        probes = [(int(r["batch"]), int(r["num_kv_heads"]), int(r["head_dim"]), int(r["context_len"]), 16)
                  for r in fa3_points]
        answers = subprocess.run([binary], input="".join(" ".join(map(str, p)) + "\n" for p in probes),
                                 capture_output=True, text=True, timeout=60).stdout.split("\n")
        for probe, row, line in zip(probes, fa3_points, answers):
            ours, fa3, fa3_on_twice_the_sms, fa3_shape, fi_splits, fi_chunk, fi_table = map(int, line.split())
            self.assertEqual(fa3, int(row["ours_splits"]), (probe, row["dataset"]))
            self.assertEqual(fa3_shape, fa3)
            self.assertEqual(fa3_on_twice_the_sms, fa3)  # twice the batch on twice the SMs: the same CTAs per SM
            self.assertEqual(fi_splits, fi_table)
            pages = -(-probe[3] // 16)
            self.assertEqual(fi_chunk, -(-pages // fi_splits))
            self.assertGreaterEqual(ours, 1)
        self.assertEqual(len(answers) - 1, len(probes))
        by_shape = {(int(r["batch"]), int(r["num_kv_heads"]), int(r["context_len"]), int(r["cache_capacity"])):
                    int(r["ours_splits"]) for r in fi_points}
        for probe, line in zip(probes, answers):
            key = (probe[0], probe[1], probe[3], probe[3])
            if key in by_shape:  # the training shapes with caches sized to their length
                self.assertEqual(int(line.split()[4]), by_shape[key], probe)

    def test_fit_check_passes_on_the_header_and_fails_on_an_edited_one(self):
        # The header records the paths it was fitted with: check it where it was written, from there.
        csv_path, header = os.path.relpath(self.fa3, SCRATCH), os.path.relpath(self.fa3_header, SCRATCH)

        def check(expect, out=header):
            return splitkv("fit", csv_path, "--kernel", "fa3", "--out", out, "--check", expect=expect, cwd=SCRATCH)

        self.assertIn("num_splits_fa3_h200.hpp is up to date with results/h200/fa3.csv", check(0).stdout)
        with open(self.fa3_header) as handle:
            text = handle.read()

        def edited(old, new, expect):
            self.assertIn(old, text)
            try:
                with open(self.fa3_header, "w") as handle:
                    handle.write(text.replace(old, new, 1))
                return check(expect).stderr
            finally:
                with open(self.fa3_header, "w") as handle:
                    handle.write(text)

        self.assertIn("differs from what results/h200/fa3.csv produces",
                      edited("// Drop-in for FlashAttention 3's", "// Drop in for FlashAttention 3's", 1))
        row = re.search(r"\n      \{ *(\d+),", text).group(0)  # the first row of kRows
        value = re.search(r"\d+", row).group(0)
        self.assertIn("table edited", edited(row, row.replace(value, str(int(value) + 1), 1), 2))
        self.assertIn("kKernel: fitted on the rows of kernel fa2, not fa3",
                      edited('kKernel[] = "fa3";', 'kKernel[] = "fa2";', 2))
        self.assertIn("kInputSha256", check(2, OUR_HEADER).stderr)  # our own H200 table is not FA3's
        check(0)

    def test_evaluate_reports_the_peers_rules_in_the_regret_format(self):
        report = os.path.join(SCRATCH, "fa3_cv", "regret.csv")
        os.makedirs(os.path.dirname(report))
        done = splitkv("evaluate", self.fa3, "--kernel", "fa3", "--validation", self.fa3_validation, "--out", report)
        rows = read_table(report)
        self.assertEqual(list(rows[0])[-1], "ours_speedup")
        datasets = {r["dataset"] for r in rows}
        self.assertTrue({"in_sample", "cv_leave_one_context_len_out", "cv_leave_one_batch_out",
                         "cv_leave_one_ctas_out", "validation"} <= datasets, datasets)
        policies = {r["policy"] for r in rows if r["dataset"] == "in_sample"}
        self.assertTrue({"ours", "fa3_heuristic_capacity", "fa3_heuristic_maxlen", "fa3_dynamic",
                         "flashinfer_one_wave", "fa2_capacity", "vllm_v1_v2"} <= policies, policies)
        # Only our tables are refitted per fold.
        self.assertEqual({r["policy"] for r in rows if r["dataset"].startswith("cv_")}, {"ours", "ours_capacity_only"})
        in_slice = {(r["batch"], r["num_kv_heads"], r["context_len"]) for r in rows_of(self.fa3)
                    if r["cache_capacity"] == "131072" and 1024 <= int(r["context_len"]) <= 32768}
        self.assertEqual(len(in_slice), 9)
        slice_rows = {r["policy"]: r for r in rows if r["dataset"] == "in_sample" and r["subset"] == "capacity_131072"}
        self.assertEqual(int(slice_rows["fa3_heuristic_capacity"]["shapes"]), 9)
        self.assertEqual(int(slice_rows["ours"]["shapes"]), 9)
        self.assertIn(f"x faster than fa3_heuristic_capacity there (geomean over 9 shapes", done.stdout)
        with open(report[:-4] + ".md") as handle:
            markdown = handle.read()
        self.assertIn("## FlashAttention 3's own rule against our table", markdown)
        self.assertIn("| validation | all |", markdown)
        points = read_table(report[:-4] + "_points.csv")
        policy = [r for r in points if r["dataset"] == "in_sample"][0]
        self.assertEqual((policy["fa3_heuristic_capacity_splits"], policy["fa3_heuristic_capacity_match"]),
                         ("", "policy_row"))

        fi_report = os.path.join(SCRATCH, "flashinfer_cv.csv")
        splitkv("evaluate", self.flashinfer, "--kernel", "flashinfer", "--out", fi_report, "--no-cross-validation")
        self.assertIn("flashinfer_heuristic", {r["policy"] for r in read_table(fi_report)})

    def test_policy_row_regret_on_a_hand_computed_csv(self):
        # heuristics/tests/fixtures/peer_fa3_policy_rows.csv: shape A (b1 L8192 in a 131072 cache) fastest
        # 50 us at 4 splits, FA3 from the capacity 75 us, from the max length 50 us; B (b4 L2048, 131072)
        # fastest 30 us, 45 and 30 us; C (b16 L4096, cache 4096) fastest 20 us, 22 and 18 us (faster than
        # every fixed count: the policy rows are not measurements); D has a policy row only.
        report = os.path.join(SCRATCH, "hand", "regret.csv")
        os.makedirs(os.path.dirname(report))
        done = splitkv("evaluate", HAND_CSV, "--kernel", "fa3", "--out", report, "--no-cross-validation")
        with open(report) as handle:
            lines = handle.read().splitlines()
        cube = lambda v: f"{v ** (1 / 3):.4f}"  # noqa: E731
        for expected in [
                "in_sample,all,ours,3,1.0000,1.0000,1.0000,1.0000,1.0000,1.0000",
                f"in_sample,all,fa3_heuristic_capacity,3,{cube(1.5 * 1.5 * 1.1)},1.5000,1.5000,0.0000,1.0000,"
                f"{cube(1.5 * 1.5 * 1.1)}",
                f"in_sample,all,fa3_heuristic_maxlen,3,{cube(0.9)},1.0000,1.0000,1.0000,1.0000,{cube(0.9)}",
                "in_sample,capacity_131072,fa3_heuristic_capacity,2,1.5000,1.5000,1.5000,0.0000,1.0000,1.5000",
                "in_sample,capacity_131072,fa3_heuristic_maxlen,2,1.0000,1.0000,1.0000,1.0000,1.0000,1.0000",
                "in_sample,capacity_eq_length,fa3_heuristic_maxlen,1,0.9000,0.9000,0.9000,1.0000,1.0000,0.9000"]:
            self.assertIn(expected, lines)
        self.assertIn("ours is 1.5000x faster than fa3_heuristic_capacity there (geomean over 2 shapes", done.stdout)
        points = {int(r["batch"]): r for r in read_table(report[:-4] + "_points.csv")}
        self.assertEqual(sorted(points), [1, 4, 16])  # D is no shape: it has no fixed-split time
        self.assertEqual(points[16]["fastest_time_us"], "20.000")
        self.assertEqual(points[16]["fa3_heuristic_maxlen_regret"], "0.9000")
        self.assertEqual(points[1]["ours_splits"], "4")
        header = os.path.join(SCRATCH, "hand", "num_splits_fa3_h200.hpp")
        splitkv("fit", HAND_CSV, "--kernel", "fa3", "--out", header)
        with open(header) as handle:
            self.assertIn("16 rows, 9 ok and fitted; none excluded; 6 policy rows kept for evaluation, not fitted; "
                          "1 rows of other kernels ignored", handle.read())


def main():
    global SPLITKV, CXX, SCRATCH
    argv = sys.argv[1:]
    if any(flag not in argv for flag in ("--splitkv", "--cxx", "--scratch")):
        sys.exit(__doc__)
    values = {flag: argv[argv.index(flag) + 1] for flag in ("--splitkv", "--cxx", "--scratch")}
    SPLITKV = os.path.abspath(values["--splitkv"])
    CXX = values["--cxx"]
    SCRATCH = os.path.abspath(values["--scratch"])
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    rest = [a for i, a in enumerate(argv) if a not in values and (i == 0 or argv[i - 1] not in values)]
    unittest.main(argv=[sys.argv[0], "-v"] + rest)


if __name__ == "__main__":
    main()
