#!/usr/bin/env python3
"""CI checks of the reports (heuristics/REPORTS.md), run from the repository root by ctest:

    check_report.py regenerate --splitkv build/cli/splitkv --scratch DIR
        scripts/report.sh --out-dir DIR on the committed CSVs, then: the columns and row counts of
        paged_vs_contiguous.csv and capacity_scenario.csv against what full.csv holds; a sample of
        their best splits, times and ratios recomputed from the raw rows of full.csv; every plot a
        non-empty PNG that summary.md links to; the committed reports byte for byte what the
        committed measurements give.
    check_report.py bad-inputs --splitkv build/cli/splitkv --scratch DIR
        each bad input exits 2 with a message naming what is missing, and writes nothing.

Standard library only (the plots are drawn by scripts/report.sh's own python).
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

RESULTS = "results/h200"
FIXTURES = "heuristics/tests/fixtures"
PLOTS = ["best_splits_heatmap.png", "best_splits_heatmap_head_dim.png", "speedup_over_fa2_capacity.png",
         "speedup_over_vllm.png", "paged_vs_contiguous_ratio.png", "tbps_vs_ceiling.png", "capacity_scenario.png",
         "peers_time.png"]
COMMITTED = ["paged_vs_contiguous.csv", "capacity_scenario.csv", "report/fit.md", "report/regret.csv",
             "report/regret.md", "report/regret_points.csv", "report/summary.md"]
LAYOUT_POLICIES = ["ours", "fa2_capacity", "fa2_real_length"]
CAPACITY_POLICIES = ["ours", "ours_capacity_only", "fa2_capacity", "fa2_real_length"]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def raw_shapes():
    """full.csv, independently of splitkv: {(layout label, shape...): {splits: median}} of ok rows."""
    header, rows = read(os.path.join(RESULTS, "full.csv"))
    shapes = defaultdict(dict)
    for r in rows:
        if r["status"] != "ok":
            continue
        label = "contiguous" if r["layout"] == "contiguous" else f"paged{r['page_size']}"
        key = (label, r["dtype"], int(r["batch"]), int(r["num_heads"]), int(r["num_kv_heads"]), int(r["head_dim"]),
               int(r["context_len"]), int(r["cache_capacity"]))
        shapes[key][int(r["num_splits"])] = float(r["time_us_median"])
    return shapes


def fastest(timings):
    best = min(timings.values())
    return min(s for s, t in timings.items() if t == best), best


def close(a, b, tolerance):
    return abs(a - b) <= tolerance


def timing_columns(prefix, policies):
    out = [f"{prefix}best_splits", f"{prefix}best_time_us", f"{prefix}best_tbps"]
    for p in policies:
        out += [f"{prefix}{p}_splits", f"{prefix}{p}_timed_splits", f"{prefix}{p}_time_us"]
    return out


def check_layout_comparison(path, shapes):
    header, rows = read(path)
    page_sizes = sorted({int(k[0][5:]) for k in shapes if k[0] != "contiguous"})
    expected = ["gpu", "kernel", "dtype", "batch", "num_heads", "num_kv_heads", "head_dim", "context_len",
                "cache_capacity", "kv_bytes", "fastest_layout"] + timing_columns("contiguous_", LAYOUT_POLICIES)
    for p in page_sizes:
        expected += timing_columns(f"paged{p}_", LAYOUT_POLICIES) + [f"paged{p}_ratio_best"]
        expected += [f"paged{p}_ratio_{policy}" for policy in LAYOUT_POLICIES]
    check(header == expected, f"{path}: columns {header} != expected {expected}")
    by_rest = defaultdict(set)
    for key in shapes:
        by_rest[key[1:]].add(key[0])
    expected_rows = sum(1 for labels in by_rest.values() if "contiguous" in labels and len(labels) > 1)
    check(len(rows) == expected_rows, f"{path}: {len(rows)} rows, full.csv has {expected_rows} shapes measured "
                                      f"contiguous and paged")
    check(len({tuple(r[c] for c in expected[2:9]) for r in rows}) == len(rows), f"{path}: a shape appears twice")
    sample = rows[::41] + rows[-1:]
    for r in sample:
        rest = (r["dtype"], int(r["batch"]), int(r["num_heads"]), int(r["num_kv_heads"]), int(r["head_dim"]),
                int(r["context_len"]), int(r["cache_capacity"]))
        where = f"{path}: shape {rest}"
        contiguous = shapes[("contiguous",) + rest]
        c_splits, c_time = fastest(contiguous)
        check(int(r["contiguous_best_splits"]) == c_splits, f"{where}: contiguous best splits {r['contiguous_best_splits']} != {c_splits}")
        check(close(float(r["contiguous_best_time_us"]), c_time, 0.0006), f"{where}: contiguous best time")
        for p in page_sizes:
            label = f"paged{p}"
            paged = shapes.get((label,) + rest)
            if not check((paged is None) == (r[f"{label}_ratio_best"] == ""), f"{where}: {label} presence"):
                continue
            if paged is None:
                continue
            p_splits, p_time = fastest(paged)
            check(int(r[f"{label}_best_splits"]) == p_splits, f"{where}: {label} best splits")
            check(close(float(r[f"{label}_ratio_best"]), p_time / c_time, 6e-5),
                  f"{where}: {label}_ratio_best {r[f'{label}_ratio_best']} != {p_time / c_time:.6f} from full.csv")
            for policy in LAYOUT_POLICIES:
                # The time standing for the policy's choice is the raw median of its timed split count.
                pt = paged[int(r[f"{label}_{policy}_timed_splits"])]
                ct = contiguous[int(r[f"contiguous_{policy}_timed_splits"])]
                check(close(float(r[f"{label}_ratio_{policy}"]), pt / ct, 6e-5),
                      f"{where}: {label}_ratio_{policy} {r[f'{label}_ratio_{policy}']} != {pt / ct:.6f} from full.csv")
    return len(rows), len(sample)


def check_capacity(path, shapes):
    header, rows = read(path)
    expected = ["gpu", "kernel", "layout", "page_size", "dtype", "batch", "num_heads", "num_kv_heads", "head_dim",
                "context_len", "cache_capacity", "kv_bytes", "sized_best_splits", "sized_best_time_us", "best_splits",
                "best_time_us", "best_tbps", "capacity_cost"]
    for p in CAPACITY_POLICIES:
        expected += [f"{p}_splits", f"{p}_timed_splits", f"{p}_time_us", f"{p}_regret"]
    expected += ["fa2_capacity_over_ours", "fa2_capacity_over_sized_best"]
    check(header == expected, f"{path}: columns {header} != expected {expected}")
    expected_rows = sum(1 for k in shapes if k[7] > k[6] and (k[:7] + (k[6],)) in shapes)
    check(len(rows) == expected_rows, f"{path}: {len(rows)} rows, full.csv has {expected_rows} capacity pairs")
    check(any(r["layout"] == "contiguous" for r in rows), f"{path}: no contiguous rows")
    sample = rows[::17] + rows[-1:]
    for r in sample:
        label = "contiguous" if r["layout"] == "contiguous" else f"paged{r['page_size']}"
        key = (label, r["dtype"], int(r["batch"]), int(r["num_heads"]), int(r["num_kv_heads"]), int(r["head_dim"]),
               int(r["context_len"]))
        big, sized = shapes[key + (int(r["cache_capacity"]),)], shapes[key + (int(r["context_len"]),)]
        _, big_time = fastest(big)
        _, sized_time = fastest(sized)
        where = f"{path}: {key} C{r['cache_capacity']}"
        check(close(float(r["capacity_cost"]), big_time / sized_time, 6e-5), f"{where}: capacity_cost")
        fa2, ours = big[int(r["fa2_capacity_timed_splits"])], big[int(r["ours_timed_splits"])]
        check(close(float(r["fa2_capacity_over_ours"]), fa2 / ours, 6e-5), f"{where}: fa2_capacity_over_ours")
        check(int(r["fa2_capacity_timed_splits"]) <= int(r["fa2_capacity_splits"]),
              f"{where}: FA2's splits holding tokens exceed what it asked for")
    return len(rows), len(sample)


def regenerate(args):
    out = args.scratch
    shutil.rmtree(out, ignore_errors=True)
    run = subprocess.run(["scripts/report.sh", "--out-dir", out, "--splitkv", args.splitkv],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout)
    if run.returncode != 0:
        print(f"FAIL: scripts/report.sh exited {run.returncode}")
        return 1
    shapes = raw_shapes()
    n, sampled = check_layout_comparison(os.path.join(out, "paged_vs_contiguous.csv"), shapes)
    print(f"paged_vs_contiguous.csv: {n} rows, {sampled} recomputed from full.csv")
    n, sampled = check_capacity(os.path.join(out, "capacity_scenario.csv"), shapes)
    print(f"capacity_scenario.csv: {n} rows, {sampled} recomputed from full.csv")
    with open(os.path.join(out, "report", "summary.md"), encoding="utf-8") as f:
        summary = f.read()
    for name in PLOTS:
        path = os.path.join(out, "report", name)
        if check(os.path.isfile(path), f"{path}: not written"):
            with open(path, "rb") as f:
                head = f.read(8)
            check(os.path.getsize(path) > 1000 and head == b"\x89PNG\r\n\x1a\n", f"{path}: not a non-empty PNG")
        check(f"]({name})" in summary, f"summary.md does not link {name}")
    for name in COMMITTED:
        committed, regenerated = os.path.join(RESULTS, name), os.path.join(out, name)
        if not check(os.path.isfile(committed), f"{committed}: not committed; run scripts/report.sh and commit it"):
            continue
        with open(committed, "rb") as a, open(regenerated, "rb") as b:
            check(a.read() == b.read(), f"{committed} differs from what scripts/report.sh gives from the committed "
                                        f"measurements (see {regenerated}); rerun scripts/report.sh and commit")
    return 0


def bad_inputs(args):
    scratch = args.scratch
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    # A results folder whose peers.csv comes from another GPU, and one without peers.csv.
    other_gpu = os.path.join(scratch, "other_gpu_peers")
    no_peers = os.path.join(scratch, "no_peers")
    for folder in (other_gpu, no_peers):
        os.makedirs(folder)
        for name in ("full.csv", "full.json", "validation.csv", "validation.json"):
            shutil.copy(os.path.join(RESULTS, name), folder)
    with open(os.path.join(RESULTS, "peers.csv"), encoding="utf-8") as f:
        peers = f.read()
    with open(os.path.join(other_gpu, "peers.csv"), "w", encoding="utf-8") as f:
        f.write(peers.replace("NVIDIA H200,", "NVIDIA A100-SXM4-80GB,"))

    out, cap = os.path.join(scratch, "out.csv"), os.path.join(scratch, "cap.csv")
    report_out = os.path.join(scratch, "report_out")
    compare = [args.splitkv, "compare"]
    cases = [
        ("no paged rows", compare + [f"{FIXTURES}/tiny_h200.csv", "--out", out, "--capacity-out", cap],
         r"tiny_h200\.csv: no paged rows with status ok \(layouts measured: contiguous\)", [out, cap]),
        ("no contiguous rows", compare + [f"{FIXTURES}/compare_paged_only.csv", "--out", out],
         r"compare_paged_only\.csv: no contiguous rows with status ok \(layouts measured: paged16\)", [out]),
        ("no capacity pairs", compare + [f"{FIXTURES}/compare_no_capacity.csv", "--out", out, "--capacity-out", cap],
         r"no contiguous shape was measured both at a cache_capacity above its context_len and at "
         r"cache_capacity = context_len", [out, cap]),
        ("train CSV of another GPU", compare + [f"{FIXTURES}/compare_tiny.csv", "--train",
                                                f"{FIXTURES}/compare_tiny_a100.csv", "--out", out],
         r'gpu "NVIDIA H200" differs from "NVIDIA A100-SXM4-80GB" in .*compare_tiny_a100\.csv', [out]),
        ("two GPUs in one file", compare + [f"{FIXTURES}/mixed_gpus.csv", "--out", out],
         r'mixed_gpus\.csv:4:1: column gpu: "NVIDIA A100-SXM4-80GB" differs from "NVIDIA H200"', [out]),
        ("missing file", compare + [f"{FIXTURES}/nope.csv", "--out", out], r"nope\.csv: cannot open: no such file",
         [out]),
        ("output is the input", compare + [f"{FIXTURES}/compare_tiny.csv", "--out", f"{FIXTURES}/compare_tiny.csv"],
         r"--out .*compare_tiny\.csv: is an input of the comparison", []),
        ("report: peers of another GPU", ["scripts/report.sh", "--results-dir", other_gpu, "--out-dir", report_out,
                                          "--splitkv", args.splitkv],
         r"inputs of different GPUs: .*peers\.csv is NVIDIA A100-SXM4-80GB", [report_out]),
        ("report: no peers.csv", ["scripts/report.sh", "--results-dir", no_peers, "--out-dir", report_out,
                                  "--splitkv", args.splitkv], r"no_peers/peers\.csv: no such file", [report_out]),
    ]
    for name, command, pattern, outputs in cases:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        text = run.stdout.strip()
        print(f"{name}: exit {run.returncode}: {text.splitlines()[-1] if text else ''}")
        check(run.returncode == 2, f"{name}: exit {run.returncode}, expected 2\n{text}")
        check(re.search(pattern, text) is not None, f"{name}: output does not match {pattern!r}\n{text}")
        for path in outputs:
            written = os.path.isfile(path) or (os.path.isdir(path) and any(os.scandir(path)))
            check(not written, f"{name}: {path} was written")
    with open(f"{FIXTURES}/compare_tiny.csv", encoding="utf-8") as f:
        check(f.readline().startswith("gpu,kernel,layout"), "compare_tiny.csv was overwritten")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["regenerate", "bad-inputs"])
    parser.add_argument("--splitkv", required=True)
    parser.add_argument("--scratch", required=True)
    args = parser.parse_args()
    code = regenerate(args) if args.mode == "regenerate" else bad_inputs(args)
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures or code else 0


if __name__ == "__main__":
    sys.exit(main())
