#!/usr/bin/env python3
"""What one num_splits lookup costs on the host (< 20 ns per call), measured and checked.

    scripts/lookup_cost.py measure BENCH --out results/h200/lookup_cost.csv   (on the GPU machine)
    scripts/lookup_cost.py check BENCH [--limit-ns 20] [--reference results/h200/lookup_cost.csv]

BENCH is build/heuristics/heuristics_lookup_bench (Google Benchmark, 1024 varied shapes per
benchmark). Both commands run it the same way: ROUNDS separate processes, each pinned to one CPU
(rotating over the CPUs this process may use), each running REPETITIONS interleaved repetitions of
every benchmark with fixed options (BENCH_OPTIONS), and take each benchmark's minimum CPU time per
call over all of them: on a shared host other tenants only ever add time (a 2-core CI VM measured
the same code at 23-37 ns median, 20.6-21 ns minimum, minutes apart). Rounds, because such a host
slows a process for seconds at a time, the table lookups more than FlashAttention's arithmetic
(~29 against ~15 ns, a ratio of 1.95 instead of 1.63), so that one process's minimum of 10 put the
compiled-in lookup at 1.35-2.15x the yardstick where 5 rounds' minimum put it at 1.62-1.88x (40
rounds on a 2-core VM shared with builds, cut into groups of 5). Medians do worse there: they
follow the share of slow seconds (min over rounds of the round's median: 1.58-2.17x).

`measure` writes the per-benchmark minimum, median and maximum over every repetition as CSV, and a
JSON sidecar saying what ran, where and when, with the sha256 of the generated header the bench
compiled in.

`check` is CI's gate. The 20 ns limit is about the machine that runs the lookups, the GPU machine's
host; CI's machines are slower and vary (2-core AMD EPYC VMs: 21-29 ns for code that took
11.8-12.4 ns on the GPU machine's host, where FlashAttention's few-line rule itself takes 12.7-17 ns).
So the limit is carried to this host by a yardstick timed in the same rounds, interleaved with the
lookups, FlashAttention's rule (BM_num_splits_heuristic_fa, plain integer code like ours). `check`
fails when
  - with a reference measurement (results/h200/lookup_cost.csv, from `scripts/device_run.sh lookup`
    on the GPU machine): any reference lookup is at or over the limit, or the reference measured
    another header than the committed one (re-measure after refitting), or here any lookup costs
    more than limit x fa_here / fa_reference x --cross-host-tolerance (1.25). The tolerance is
    measured, not chosen for comfort: the yardstick does not carry a lookup's cost exactly from
    one CPU to another. The compiled-in H200 lookup costs 1.67x the yardstick on the GPU machine's
    host (Intel Xeon), 1.53x on one AMD EPYC VM and 1.65-2.0x on another (10 runs and one CI run).
    The limit carried by the yardstick alone is 20 / 11.32 = 1.77x the yardstick on any host, and a
    2.0x host would fail a lookup that the GPU machine measured at 18.9 ns; with the tolerance it is
    2.21x;
  - always: any lookup costs more than --yardstick-factor (2.5) times the yardstick here. The ratio
    does not depend on the host's speed; it is 1.6-2.0 on a 2-core AMD EPYC VM (minimum of 10), so a
    lookup that got 25-55% slower relative to plain integer code fails on any host.
It prints the unscaled numbers, and every round's minimum, either way.
"""
import argparse
import csv
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "heuristics", "generated", "num_splits_h200.hpp")
YARDSTICK = "BM_num_splits_heuristic_fa"
ROUNDS = 5
REPETITIONS = 10
# Fixed so that every host and every run times the same thing: each repetition runs >= 50 ms after
# 10 ms of warm-up (the benchmark before it, in random order, leaves other code and data in the
# caches and the branch predictor), in ns.
BENCH_OPTIONS = ["--benchmark_min_time=0.05", "--benchmark_min_warmup_time=0.01", "--benchmark_time_unit=ns",
                 f"--benchmark_repetitions={REPETITIONS}", "--benchmark_enable_random_interleaving=true",
                 "--benchmark_format=json"]


def run_round(bench, cpu):
    """{benchmark: [CPU ns per call, one per repetition]} from one process of `bench` on `cpu`."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    try:
        done = subprocess.run([bench, *BENCH_OPTIONS], check=True, capture_output=True, text=True, preexec_fn=pin)
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"lookup_cost: {bench} failed: {error}")
    times = {}
    for row in json.loads(done.stdout)["benchmarks"]:
        if row.get("run_type") != "iteration":
            continue
        if row.get("time_unit") != "ns":
            sys.exit(f"lookup_cost: {row['run_name']} reports {row.get('time_unit')}, expected ns")
        times.setdefault(row["run_name"], []).append(float(row["cpu_time"]))
    if not times:
        sys.exit(f"lookup_cost: {bench} reported no benchmark rows")
    return times


def run_bench(bench):
    """Per benchmark: min/median/max over every repetition of every round, and each round's minimum."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    rounds = [run_round(bench, cpus[i % len(cpus)]) for i in range(ROUNDS)]
    results = {}
    for name in sorted(set().union(*rounds)):
        if any(name not in r for r in rounds):
            sys.exit(f"lookup_cost: {name} missing from some rounds")
        every = [t for r in rounds for t in r[name]]
        results[name] = {"min_ns": min(every), "median_ns": statistics.median(every), "max_ns": max(every),
                         "repetitions": len(every), "round_min_ns": [min(r[name]) for r in rounds]}
    return results


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def print_table(results, limits=None):
    print(f"  {'benchmark':42s} {'min':>8s} {'median':>8s} {'max':>8s}" + ("   limit" if limits else ""))
    for name, r in sorted(results.items()):
        limit = (f" {limits[name]:7.2f}" if limits[name] != float("inf") else "       -") if limits else ""
        print(f"  {name:42s} {r['min_ns']:8.2f} {r['median_ns']:8.2f} {r['max_ns']:8.2f}{limit}   ns per call")


def measure(args):
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results = run_bench(args.bench)
    print_table(results)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["benchmark", "min_ns", "median_ns", "max_ns", "repetitions"])
        for name, r in results.items():
            writer.writerow([name, f"{r['min_ns']:.3f}", f"{r['median_ns']:.3f}", f"{r['max_ns']:.3f}", r["repetitions"]])
    sidecar = {
        "schema": "splitkv-lookup-cost-sidecar/1",
        "command": "scripts/lookup_cost.py measure " + " ".join(sys.argv[2:]),
        "bench": os.path.relpath(os.path.abspath(args.bench), ROOT),
        "protocol": f"Google Benchmark {' '.join(BENCH_OPTIONS)}, {ROUNDS} rounds (processes, each pinned to "
                    "one CPU), 1024 varied shapes; min/median/max over every repetition of CPU time per call",
        "header": os.path.relpath(HEADER, ROOT),
        "header_sha256": sha256(HEADER),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "host": platform.node(),
        "git_sha": os.environ.get("SPLITKV_GIT_SHA", "unknown"),
        "started_at": started,
        "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "state": "complete",
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(sidecar, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)
    print(f"lookup_cost: wrote {args.out} (cpu: {sidecar['cpu']})")


def read_reference(path):
    sidecar_path = os.path.splitext(path)[0] + ".json"
    try:
        with open(path, newline="") as f:
            rows = {r["benchmark"]: float(r["min_ns"]) for r in csv.DictReader(f)}
        with open(sidecar_path) as f:
            sidecar = json.load(f)
    except (OSError, KeyError, ValueError) as error:
        sys.exit(f"lookup_cost: cannot read the reference {path} / {sidecar_path}: {error}")
    return rows, sidecar


def check(args):
    results = run_bench(args.bench)
    if YARDSTICK not in results:
        sys.exit(f"lookup_cost: {YARDSTICK} missing from this run")
    yardstick = results[YARDSTICK]["min_ns"]
    limits = {name: args.yardstick_factor * yardstick for name in results if name != YARDSTICK}
    limits[YARDSTICK] = float("inf")
    failures = []
    if args.reference and os.path.exists(args.reference):
        reference, sidecar = read_reference(args.reference)
        if sidecar.get("header_sha256") != sha256(HEADER):
            failures.append(f"{args.reference} measured another header than {os.path.relpath(HEADER, ROOT)}: "
                            "re-measure it on the GPU machine (scripts/device_run.sh lookup)")
        for name, ns in sorted(reference.items()):
            print(f"  reference {name:42s} {ns:8.2f} ns per call (min)")
            if ns >= args.limit_ns:
                failures.append(f"reference ({sidecar.get('cpu')}): {name} costs {ns:.2f} ns >= {args.limit_ns} ns")
        if YARDSTICK not in reference:
            sys.exit(f"lookup_cost: {YARDSTICK} missing from the reference {args.reference}")
        scale = yardstick / reference[YARDSTICK]
        carried = args.limit_ns * scale * args.cross_host_tolerance
        print(f"reference: {args.reference} ({sidecar.get('cpu')}, {sidecar.get('finished_at')}); this host runs "
              f"{YARDSTICK} {scale:.2f}x as long: the {args.limit_ns} ns limit is {args.limit_ns * scale:.2f} ns here, "
              f"{carried:.2f} ns with the {args.cross_host_tolerance}x cross-host tolerance")
        for name in limits:
            limits[name] = min(limits[name], carried)
    else:
        print(f"no reference measurement from the GPU machine ({os.path.relpath(args.reference, ROOT)}): "
              f"the {args.limit_ns} ns limit is not carried to this host; the yardstick bound applies")
    print(f"yardstick {YARDSTICK}: {yardstick:.2f} ns here; bound {args.yardstick_factor}x = "
          f"{args.yardstick_factor * yardstick:.2f} ns")
    print_table(results, limits)
    print(f"each round's minimum ({ROUNDS} rounds of {REPETITIONS} repetitions):")
    for name, r in sorted(results.items()):
        print(f"  {name:42s} " + " ".join(f"{t:6.2f}" for t in r["round_min_ns"]) + "  ns per call")
    for name, r in sorted(results.items()):
        if r["min_ns"] >= limits[name]:
            failures.append(f"this host: {name} costs {r['min_ns']:.2f} ns >= {limits[name]:.2f} ns")
    over = [name for name, r in results.items() if r["min_ns"] >= args.limit_ns]
    print(f"unscaled: {'every lookup under' if not over else ', '.join(sorted(over)) + ' at or over'} "
          f"{args.limit_ns} ns on this host (minimum of {ROUNDS} x {REPETITIONS})")
    if failures:
        sys.stdout.flush()
        sys.exit("lookup_cost: FAILED\n  " + "\n  ".join(failures))
    print("lookup_cost: passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="measure on this host and write CSV + sidecar")
    m.add_argument("bench")
    m.add_argument("--out", required=True, help="CSV to write (its sidecar goes beside it as .json)")
    c = sub.add_parser("check", help="CI's gate (see above)")
    c.add_argument("bench")
    c.add_argument("--limit-ns", type=float, default=20.0)
    c.add_argument("--yardstick-factor", type=float, default=2.5,
                   help="most times the yardstick's cost a lookup may take on this host (default 2.5)")
    c.add_argument("--cross-host-tolerance", type=float, default=1.25,
                   help="how far a lookup's cost relative to the yardstick may differ between this host's "
                        "CPU and the reference's (default 1.25, measured: see above)")
    c.add_argument("--reference", default=os.path.join(ROOT, "results", "h200", "lookup_cost.csv"))
    args = parser.parse_args()
    measure(args) if args.command == "measure" else check(args)


if __name__ == "__main__":
    main()
