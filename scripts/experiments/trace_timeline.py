#!/usr/bin/env python3
"""One call's critical path from `auto_timeline_probe --trace-csv` files (kernels/NOTES.md, session 25):
per shape and mode, the median over samples of each per-CTA mark, in ns after the sample's first
grid-dependency wait (so a late start, a slow issue or a late check reads off one line), for the
groups that carry an item, then when idle groups finish their check or decision, then the combine.

  python3 scripts/experiments/trace_timeline.py results/h200/experiments/trace/trace_chain4.csv.gz

Columns: item marks (start, issued, after_issue, first_tile, epilogue, end, exit), idle groups'
check and decision, the last split exit, the combine's last entry, first wait return and last exit.
"""
import collections
import csv
import gzip
import statistics
import sys

ITEM_MARKS = ("start", "issued", "after_issue", "first_tile", "epilogue", "end")


def open_trace(path):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")


def median_or_dash(values):
    return f"{statistics.median(values):.0f}" if values else "-"


def summarise(path):
    with open_trace(path) as f:
        rows = list(csv.DictReader(f))
    samples = collections.defaultdict(list)
    for row in rows:
        key = (int(row["batch"]), int(row.get("num_heads") or 0), int(row["context_len"]), row["mode"])
        samples[key + (row["sample"],)].append(row)
    marks = collections.defaultdict(lambda: collections.defaultdict(list))
    for (*shape, _), records in samples.items():
        split = [r for r in records if r["kernel"] == "split" and r["after_wait_ns"]]
        if not split:
            continue
        origin = min(int(r["after_wait_ns"]) for r in split)
        out = marks[tuple(shape)]
        for r in split:
            if r["item0_start_ns"]:
                for mark in ITEM_MARKS:
                    value = r.get(f"item0_{mark}_ns")
                    if value:
                        out[mark].append(int(value) - origin)
                if r["exit_ns"]:
                    out["exit"].append(int(r["exit_ns"]) - origin)
            else:
                for mark in ("check", "decision"):
                    value = r.get(f"{mark}_ns")
                    if value:
                        out[f"idle_{mark}"].append(int(value) - origin)
        out["last_exit"].append(max(int(r["exit_ns"]) for r in split if r["exit_ns"]) - origin)
        combine = [r for r in records if r["kernel"] == "combine"]
        if combine:
            out["combine_entry"].append(max(int(r["entry_ns"]) for r in combine) - origin)
            waits = [int(r["after_wait_ns"]) for r in combine if r["after_wait_ns"]]
            if waits:
                out["combine_wait"].append(min(waits) - origin)
            out["combine_exit"].append(max(int(r["exit_ns"]) for r in combine if r["exit_ns"]) - origin)
    columns = list(ITEM_MARKS) + ["exit", "idle_check", "idle_decision", "last_exit", "combine_entry",
                                  "combine_wait", "combine_exit"]
    print(f"{path}: ns after the first grid-dependency wait, median over samples")
    print(f"{'B':>3} {'H':>3} {'L':>6} {'mode':<6} " + " ".join(f"{c:>13}" for c in columns))
    for shape in sorted(marks):
        batch, heads, length, mode = shape
        print(f"{batch:>3} {heads:>3} {length:>6} {mode:<6} " +
              " ".join(f"{median_or_dash(marks[shape][c]):>13}" for c in columns))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summarise(p)
