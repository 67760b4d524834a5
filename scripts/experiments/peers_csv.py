"""Reading `scripts/bench_peers.py` CSVs for the experiment summaries: the rows that timed something."""
import csv
import math


def timed_rows(path):
    """Yields (row, median time in µs) for every row of `path` with a finite time_us_median; rows of
    contenders that failed or were skipped (an empty or non-numeric median) are left out."""
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                t = float(row["time_us_median"])
            except ValueError:
                continue
            if math.isfinite(t):
                yield row, t
