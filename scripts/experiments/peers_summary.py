#!/usr/bin/env python3
"""The peers figures from one `scripts/bench_peers.py` CSV: ours at the heuristic's choice against
SDPA cuDNN (geomean speedup over all shapes and over batch <= 16, the worst shape; and at batch <= 16
with ours at the split search's best count) and against SDPA flash, where speedup = the peer's time
/ ours. The same sums as the report's peers section (scripts/plot_report.py), for an A/B on the
device (scripts/experiments/capacity_ab.sh).

  python3 scripts/experiments/peers_summary.py results/h200/peers.csv"""
import collections
import math
import sys

from peers_csv import timed_rows


def summarise(path):
    shapes = collections.defaultdict(dict)
    for row, t in timed_rows(path):
        key = (row["group"], row["batch"], row["num_heads"], row["num_kv_heads"], row["head_dim"],
               row["context_len"], row["cache_capacity"])
        shapes[key][row["contender"]] = t
    parts = []
    for peer in ("sdpa_cudnn", "sdpa_flash"):
        for subset, keep in (("all", lambda k: True), ("B<=16", lambda k: int(k[1]) <= 16)):
            s = [v[peer] / v["splitkv_heuristic"] for k, v in shapes.items()
                 if peer in v and "splitkv_heuristic" in v and keep(k)]
            if s:
                parts.append(f"{peer} {subset} {math.exp(sum(map(math.log, s)) / len(s)):.3f}x "
                             f"(n={len(s)}, worst {min(s):.3f})")
    # The same against ours at the split search's best count: what a perfect table would give, so
    # the gap between the two is the table's share of a miss.
    s = [v["sdpa_cudnn"] / v["splitkv_best"] for k, v in shapes.items()
         if "sdpa_cudnn" in v and "splitkv_best" in v and int(k[1]) <= 16]
    if s:
        parts.append(f"sdpa_cudnn B<=16 at the best count {math.exp(sum(map(math.log, s)) / len(s)):.3f}x (n={len(s)})")
    print(f"{path}: " + "; ".join(parts))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summarise(p)
