#!/usr/bin/env python3
"""The gate of scripts/lookup_cost.py check, on a stand-in benchmark with known times.

    python3 heuristics/tests/lookup_cost_tests.py

Each case writes a fake Google Benchmark binary that prints fixed per-repetition times (the same in
every round of the gate, or given round by round), and an optional reference CSV + sidecar, then
expects the gate to pass or fail with a given reason.
"""
import csv
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "lookup_cost.py")
HEADER = os.path.join(ROOT, "heuristics", "generated", "num_splits_h200.hpp")
FA = "BM_num_splits_heuristic_fa"
OURS = "BM_runtime_dispatch_compiled_in_h200"


def fake_bench(folder, times):
    """A stand-in bench: 10 repetitions per benchmark, the i-th at times[name] + i (min = times[name]).
    `times` is one dict for every run, or a list of dicts, one per run (a round of the gate), in turn."""
    runs = times if isinstance(times, list) else [times]
    rows = [[{"run_name": name, "run_type": "iteration", "time_unit": "ns", "cpu_time": t + i}
             for name, t in run.items() for i in range(10)] for run in runs]
    path = os.path.join(folder, "bench")
    counter = os.path.join(folder, "runs")
    with open(path, "w") as f:
        f.write("#!/usr/bin/env python3\nimport json, os\n"
                f"rows, counter = {rows!r}, {counter!r}\n"
                "n = int(open(counter).read()) if os.path.exists(counter) else 0\n"
                "open(counter, 'w').write(str(n + 1))\n"
                "print(json.dumps({'benchmarks': rows[n % len(rows)]}))\n")
    os.chmod(path, 0o755)
    return path


def reference(folder, times, header_sha=None):
    path = os.path.join(folder, "lookup_cost.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "min_ns", "median_ns", "max_ns", "repetitions"])
        for name, t in times.items():
            w.writerow([name, t, t, t, 10])
    sha = header_sha or hashlib.sha256(open(HEADER, "rb").read()).hexdigest()
    with open(os.path.join(folder, "lookup_cost.json"), "w") as f:
        json.dump({"header_sha256": sha, "cpu": "test cpu", "finished_at": "now"}, f)
    return path


def run_case(name, here, ref=None, ref_sha=None, expect_fail=None, extra=()):
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, SCRIPT, "check", fake_bench(folder, here), *extra]
        command += ["--reference", reference(folder, ref, ref_sha) if ref else os.path.join(folder, "none.csv")]
        done = subprocess.run(command, capture_output=True, text=True)
        output = done.stdout + done.stderr
        ok = (done.returncode != 0) == (expect_fail is not None) and (expect_fail is None or expect_fail in output)
        print(f"{'ok  ' if ok else 'FAIL'} {name} (exit {done.returncode})")
        if not ok:
            print(output)
        return ok


def main():
    cases = [
        ("no reference, within 2.5x the yardstick", {FA: 12.0, OURS: 25.0}, None, None, None),
        ("no reference, over 2.5x the yardstick", {FA: 10.0, OURS: 26.0}, None, None,
         f"this host: {OURS} costs 26.00 ns >= 25.00 ns"),
        ("reference under 20 ns, this host 2x slower", {FA: 12.0, OURS: 25.0}, {FA: 6.0, OURS: 12.0}, None, None),
        # scale 12 / 10 and tolerance 1.25: the limit here is 30 ns; at 1.0, 24 ns, tighter than the
        # yardstick bound (30 ns).
        ("reference under 20 ns, lookup within the carried limit", {FA: 12.0, OURS: 29.0}, {FA: 10.0, OURS: 12.0},
         None, None, []),
        ("reference under 20 ns, lookup slower than scaled", {FA: 12.0, OURS: 25.0}, {FA: 10.0, OURS: 12.0}, None,
         f"this host: {OURS} costs 25.00 ns >= 24.00 ns", ["--cross-host-tolerance", "1.0"]),
        # scale 10 / 12 and tolerance 1.25: 20.83 ns here, tighter than the yardstick bound (25 ns).
        ("reference under 20 ns, lookup slower than scaled with the tolerance", {FA: 10.0, OURS: 22.0},
         {FA: 12.0, OURS: 15.0}, None, f"this host: {OURS} costs 22.00 ns >= 20.83 ns"),
        ("reference at 20 ns", {FA: 12.0, OURS: 20.0}, {FA: 12.0, OURS: 20.0}, None,
         f"reference (test cpu): {OURS} costs 20.00 ns >= 20.0 ns"),
        ("reference of another header", {FA: 12.0, OURS: 15.0}, {FA: 12.0, OURS: 15.0}, "0" * 64,
         "measured another header"),
        # Rounds: each benchmark's cost is its minimum over every round, so a slow round moves nothing.
        ("one slow round of ours", [{FA: 10.0, OURS: 20.0}, {FA: 10.0, OURS: 20.0}, {FA: 10.0, OURS: 35.0},
                                    {FA: 10.0, OURS: 20.0}, {FA: 10.0, OURS: 20.0}], None, None, None),
        ("a host that runs both slower in some rounds", [{FA: 10.0, OURS: 22.0}, {FA: 14.0, OURS: 30.8},
                                                          {FA: 11.0, OURS: 24.2}, {FA: 12.0, OURS: 26.4},
                                                          {FA: 10.0, OURS: 22.0}], {FA: 10.0, OURS: 12.0}, None, None),
        ("a lookup over the bound in every round", [{FA: 10.0, OURS: 26.0}, {FA: 12.0, OURS: 31.2},
                                                     {FA: 10.0, OURS: 26.5}, {FA: 10.0, OURS: 26.0},
                                                     {FA: 11.0, OURS: 28.6}], None, None,
         f"this host: {OURS} costs 26.00 ns >= 25.00 ns"),
    ]
    results = [run_case(*case) for case in cases]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
