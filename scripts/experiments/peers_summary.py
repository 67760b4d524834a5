#!/usr/bin/env python3
"""Issue #6's figures from one `scripts/bench_peers.py` CSV: ours at the heuristic's choice against
SDPA cuDNN (geomean speedup over all shapes and over batch <= 16, the worst shape) and against SDPA
flash, where speedup = the peer's time / ours. The same sums as the report's peers section
(scripts/plot_report.py), for an A/B on the device (scripts/experiments/env_ab.sh).

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
    print(f"{path}: " + "; ".join(parts))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summarise(p)
