#!/usr/bin/env python3
"""The capacity scenario's figures from `scripts/bench_peers.py --groups capacity_auto` CSVs:
per file and contender (`splitkv_auto`, `splitkv_heuristic`), the geomean and max regret against
the fastest of ours on the same buffers (every fixed count timed, the heuristic's and FA2's
choices), how many of the shapes are within 5%, and the median of the contender's time minus the
heuristic's (µs). A last line scores the heuristic's split
count as the split search timed it (`table count in search`): the heuristic's own row is the first
contender timed on a shape's fresh buffers, and before bench_peers.py warmed every graph up that row
came out up to 13% slow where the same count in the search did not.

  python3 scripts/experiments/capacity_auto_regret.py results/h200/capacity_auto.csv"""
import collections
import math
import statistics
import sys

from peers_csv import timed_rows

FIXED = ("splitkv_split_search", "splitkv_best", "splitkv_heuristic", "splitkv_at_fa2_capacity_choice")


def summarise(path):
    times = collections.defaultdict(dict)
    for row, t in timed_rows(path):
        shape = (row["batch"], row["num_heads"], row["num_kv_heads"], row["context_len"])
        if row["contender"] in FIXED:
            times[shape]["best"] = min(times[shape].get("best", math.inf), t)
        times[shape][row["contender"]] = t
        if row["contender"] == "splitkv_split_search":
            times[shape][f"search@{row['num_splits']}"] = t
        elif row["contender"] == "splitkv_heuristic":
            times[shape]["heuristic_splits"] = row["num_splits"]
    for contender in ("splitkv_auto", "splitkv_heuristic"):
        shapes = [v for v in times.values() if contender in v and "best" in v]
        if not shapes:
            continue
        regret = [v[contender] / v["best"] for v in shapes]
        delta = [v[contender] - v["splitkv_heuristic"] for v in shapes if "splitkv_heuristic" in v]
        # Against the same count timed in the search, whose slot the first-contender effect spares.
        searched = [v[contender] - v[f"search@{v.get('heuristic_splits')}"] for v in shapes
                    if f"search@{v.get('heuristic_splits')}" in v]
        geomean = math.exp(sum(map(math.log, regret)) / len(regret))
        print(f"{path} {contender}: {len(regret)} shapes, geomean {geomean:.3f}, max {max(regret):.3f}, "
              f"within 5% {sum(r <= 1.05 for r in regret)}, minus heuristic median {statistics.median(delta):+.2f} us"
              + (f", minus its count in the search {statistics.median(searched):+.2f} us" if searched else ""))
    in_search = [v[f"search@{v['heuristic_splits']}"] / v["best"] for v in times.values()
                 if "best" in v and f"search@{v.get('heuristic_splits')}" in v]
    if in_search:
        geomean = math.exp(sum(map(math.log, in_search)) / len(in_search))
        print(f"{path} table count in search: {len(in_search)} shapes, geomean {geomean:.3f}, "
              f"max {max(in_search):.3f}, within 5% {sum(r <= 1.05 for r in in_search)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summarise(p)
