#!/usr/bin/env python3
"""Two builds on the same shapes: per contender (and per fixed split count of the split search), the
geomean over shapes of head time / base time, from `scripts/bench_peers.py --groups capacity_auto`
CSVs of two builds run alternately in one call. Regret against the best fixed count (what
capacity_auto_regret.py prints) moves when the fixed kernel itself changes; this says which side
moved.

  python3 scripts/experiments/capacity_auto_ab.py BASE.csv[,BASE2.csv] HEAD.csv[,HEAD2.csv]

The n-th base file is paired with the n-th head file."""
import collections
import math
import signal
import sys

from peers_csv import timed_rows


def load(path):
    return {(row["group"], row["num_heads"], row["batch"], row["head_dim"], row["context_len"], row["cache_capacity"],
             row["contender"], row["num_splits"]): t for row, t in timed_rows(path)}


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bases = [load(p) for p in sys.argv[1].split(",")]
    heads = [load(p) for p in sys.argv[2].split(",")]
    if len(bases) != len(heads):
        sys.exit("give as many base files as head files")
    ratios = collections.defaultdict(list)
    for base, head in zip(bases, heads):
        for key, t in base.items():
            if key in head:
                name = key[-2] if key[-2] != "splitkv_split_search" else f"fixed@{key[-1]}"
                ratios[name].append(head[key] / t)
    order = lambda c: (c.startswith("fixed@"), int(c[6:]) if c.startswith("fixed@") else 0, c)
    for name in sorted(ratios, key=order):
        r = ratios[name]
        print(f"{name:32s} n={len(r):4d} head/base geomean {math.exp(sum(map(math.log, r)) / len(r)):.4f}")


if __name__ == "__main__":
    main()
