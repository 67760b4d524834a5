#!/usr/bin/env python3
"""Best-of-splits summaries of decode_kernel_bench CSVs, for the device experiments.

  kernel_bench_summary.py ab DIR TREE...   # kernel_bench_ab.sh: DIR/TREE.csv and DIR/TREE2.csv per build,
                                           # each build's faster run against the first TREE's
  kernel_bench_summary.py streams CSV...   # fp8_stream_probe.sh: callsN.csv files, one row per layout, kv dtype,
                                           # shape and N

A shape's time is the median of its fastest split count.
"""
import csv
import math
import os
import sys


def best_rows(path, key_of):
    """The fastest row (by median) per key_of(row) in one CSV; {} when the run left no CSV."""
    best = {}
    if not os.path.exists(path):
        return best
    for r in csv.DictReader(open(path)):
        key = key_of(r)
        if key not in best or float(r["time_us_median"]) < float(best[key]["time_us_median"]):
            best[key] = r
    return best


def shape_key(r):
    return (r["layout"], r["kv_dtype"],
            f"B{r['batch']} {r['num_heads']}/{r['num_kv_heads']} d{r['head_dim']} L{r['context_len']}")


def ab(folder, trees):
    runs = {run: best_rows(os.path.join(folder, run + ".csv"), shape_key) for t in trees for run in (t, t + "2")}
    keys = sorted(set.intersection(*(set(runs[t]) for t in trees)))
    # The faster of each tree's two runs: (time, TB/s).
    fastest = {t: {k: min((float(runs[r][k]["time_us_median"]), float(runs[r][k]["tbps"]))
                          for r in (t, t + "2") if k in runs[r]) for k in keys} for t in trees}
    print(f"{'layout':10s} {'kv':8s} {'shape':24s}" + "".join(f" {t + ' us':>10s}" for t in trees) +
          "".join(f" {t + ' TB/s':>10s}" for t in trees) + "".join(f" {t + '/base':>10s}" for t in trees[1:]))
    groups = {}
    for k in keys:
        b = fastest[trees[0]][k][0]
        for t in trees[1:]:
            groups.setdefault((k[:2], t), []).append(fastest[t][k][0] / b)
        print(f"{k[0]:10s} {k[1]:8s} {k[2]:24s}" + "".join(f" {fastest[t][k][0]:10.1f}" for t in trees) +
              "".join(f" {fastest[t][k][1]:10.2f}" for t in trees) +
              "".join(f" {fastest[t][k][0] / b:10.3f}" for t in trees[1:]))
    for (g, t), ratios in sorted(groups.items()):
        print(f"geomean {t}/base {g[0]} {g[1]}: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f} "
              f"over {len(ratios)} shapes")


def streams(paths):
    best = {}
    for path in paths:
        calls = path.rsplit("calls", 1)[1].split(".")[0]
        rows = best_rows(path, lambda r: (r["layout"], r["kv_dtype"], r["batch"], r["num_heads"],
                                          r["num_kv_heads"], r["context_len"]))
        best.update({key + (calls,): r for key, r in rows.items()})
    print(f"{'layout':10} {'kv':9} {'B':>4} {'H':>5} {'L':>6} {'calls':>5} {'splits':>6} {'us':>9} {'p10-p90':>17} "
          f"{'TB/s':>6}")
    for key in sorted(best, key=lambda k: (k[0], k[1], int(k[5]), int(k[2]), k[6])):
        r = best[key]
        print(f"{key[0]:10} {key[1]:9} {key[2]:>4} {key[3] + '/' + key[4]:>5} {key[5]:>6} {key[6]:>5} {r['num_splits']:>6} "
              f"{float(r['time_us_median']):9.1f} {float(r['time_us_p10']):8.1f}-{float(r['time_us_p90']):8.1f} "
              f"{float(r['tbps']):6.3f}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "ab":
        ab(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "streams":
        streams(sys.argv[2:])
    else:
        sys.exit(__doc__)
