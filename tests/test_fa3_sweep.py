#!/usr/bin/env python3
"""scripts/fa3_sweep.py without a GPU or torch (--fake-timer): the planner's --plan-csv, the rows and
sidecar that `splitkv fit`, `evaluate`, `merge` and `sweep --resume` read, resume after a torn line,
a throttled row or an interrupt, the deadline, fault rows, the restart after a lost CUDA context, and
the one-line refusals.

    python3 tests/test_fa3_sweep.py --splitkv build/cli/splitkv --scratch /tmp/fa3_sweep_test
"""
import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "fa3_sweep.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import fa3_sweep  # noqa: E402

SPLITKV = None
SCRATCH = None

# Contiguous bf16 shapes FA3 runs (fixed and ragged lengths, a cache larger than the lengths, two
# head dims) beside a paged and an fp16 shape it must skip.
GRID = {
    "name": "fa3_test",
    "memory_budget_gb": 8,
    "protocol": {"repetitions": 3, "min_working_set_l2_multiple": 3, "warmup_replays": 1, "min_time_s": 0},
    "dtypes": ["bf16"],
    "heads": [[32, 8]],
    "head_dim": [128],
    "length_distribution": ["fixed"],
    "num_splits": [1, 2, 4, 8, 16, 32, 64],
    "blocks": [
        {"layouts": [{"layout": "contiguous"}], "batch": [1, 4, 16, 64], "heads": [[32, 8], [32, 32]],
         "context_len": [512, 2048, 8192, 32768], "cache_capacity": ["x1"]},
        {"layouts": [{"layout": "contiguous"}], "batch": [4], "head_dim": [64], "context_len": [1000],
         "cache_capacity": [4000], "length_distribution": ["uniform", "long_tail"]},
        {"layouts": [{"layout": "paged", "page_size": 16}], "batch": [2], "context_len": [1024],
         "cache_capacity": ["x1"]},
        {"layouts": [{"layout": "contiguous"}], "dtypes": ["fp16"], "batch": [2], "context_len": [1024],
         "cache_capacity": ["x1"]},
    ],
}
SMALL = dict(GRID, name="fa3_test_small", blocks=GRID["blocks"][1:])


def write_grid(name, grid):
    path = os.path.join(SCRATCH, name)
    with open(path, "w") as handle:
        json.dump(grid, handle, indent=1)
    return path


def run(*args, expect=None, env=None, timeout=240):
    done = subprocess.run([sys.executable, SCRIPT, "--splitkv", SPLITKV, *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))
    if expect is not None and done.returncode != expect:
        raise AssertionError(f"exit {done.returncode}, expected {expect}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done


def splitkv(*args, expect=0):
    done = subprocess.run([SPLITKV, *args], capture_output=True, text=True, timeout=600)
    if done.returncode != expect:
        raise AssertionError(f"splitkv {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def rows_of(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def keys_of(rows):
    return [fa3_sweep.result_key(r["kernel"], fa3_sweep.point_key(
        r["layout"], int(r["page_size"]), r["dtype"], int(r["batch"]), int(r["num_heads"]), int(r["num_kv_heads"]),
        int(r["head_dim"]), int(r["context_len"]), int(r["cache_capacity"]), r["length_distribution"],
        int(r["num_splits"]))) for r in rows]


def sidecar_of(csv_path):
    with open(csv_path[:-4] + ".json") as handle:
        return json.load(handle)


def sha256_of(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def fresh(name):
    path = os.path.join(SCRATCH, name)
    for suffix in ("", ".csv", ".json"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path + ".csv"


class Fa3SweepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.grid = write_grid("fa3_test.json", GRID)
        cls.small = write_grid("fa3_test_small.json", SMALL)
        cls.plan = fa3_sweep.load_plan(SPLITKV, cls.grid, "0/1")
        cls.planned = cls.plan.rows()

    def test_plan_csv_matches_the_planner(self):
        plan_path = os.path.join(SCRATCH, "plan.csv")
        report = splitkv("sweep", "--grid", self.grid, "--dry-run", "--plan-csv", plan_path).stdout
        with open(plan_path) as handle:
            lines = handle.read().splitlines()
        self.assertEqual(lines[0].split(","), list(fa3_sweep.PLAN_COLUMNS))
        planned = int(report.split(" planned in ")[0].split()[-1])
        self.assertEqual(len(lines) - 1, planned)
        shapes = fa3_sweep.parse_plan_csv("\n".join(lines) + "\n", plan_path)  # checks every key
        self.assertEqual(sum(len(s.splits) for s in shapes), planned)
        for shape in shapes:
            self.assertEqual(len(shape.lengths), shape.batch)
            self.assertEqual(shape.lengths[0], shape.context_len)  # sequence 0 holds the max
            self.assertTrue(all(1 <= n <= shape.context_len for n in shape.lengths))
            self.assertTrue(all(s == 1 or s <= -(-shape.context_len // 64) for s in shape.splits))
        ragged = [s for s in shapes if s.length_distribution != "fixed"]
        self.assertEqual(len(ragged), 2)
        self.assertTrue(all(len(set(s.lengths)) > 1 for s in ragged))
        fixed_b64 = [line for line in lines[1:] if ",contiguous bf16 b64 h32/8 d128 L8192 C8192 fixed s1," in line]
        self.assertEqual([line.rsplit(",", 1)[1] for line in fixed_b64], ["8192*64"])  # one run, not 64 numbers
        self.assertGreater(self.plan.pruned_by_reason.get("splits_exceed_tiles", 0), 0)

    def test_rows_are_read_by_fit_evaluate_merge_and_resume(self):
        out = fresh("full")
        run("--grid", self.grid, "--out", out, "--fake-timer", expect=0)
        rows = rows_of(out)
        with open(out) as handle:
            self.assertEqual(handle.readline().rstrip("\n").split(","), list(fa3_sweep.COLUMNS))
        self.assertEqual(len(rows), self.planned)
        self.assertEqual(len(set(keys_of(rows))), len(rows))
        by_kernel = {k: [r for r in rows if r["kernel"] == k] for k in fa3_sweep.KERNELS}
        self.assertEqual(len(by_kernel["fa3_heuristic_capacity"]), len(self.plan.shapes))
        self.assertEqual(len(by_kernel["fa3_heuristic_maxlen"]), len(self.plan.shapes))
        caps = {s.shape_key(): s.splits[-1] for s in self.plan.shapes}
        for row in by_kernel["fa3_heuristic_capacity"] + by_kernel["fa3_heuristic_maxlen"]:
            key = fa3_sweep.point_key(row["layout"], int(row["page_size"]), row["dtype"], int(row["batch"]),
                                      int(row["num_heads"]), int(row["num_kv_heads"]), int(row["head_dim"]),
                                      int(row["context_len"]), int(row["cache_capacity"]),
                                      row["length_distribution"], 0).rsplit(" ", 1)[0]
            self.assertEqual(int(row["num_splits"]), caps[key])  # the grid's bound, as device policies do
        for row in rows:
            if row["layout"] == "paged" or row["dtype"] == "fp16":
                self.assertEqual(row["status"], "skipped")
                self.assertEqual(row["time_us_median"], "")
            else:
                self.assertEqual(row["status"], "ok", row)
                self.assertGreater(float(row["time_us_median"]), 0)
                self.assertAlmostEqual(float(row["tbps"]),
                                       int(row["kv_bytes"]) / float(row["time_us_median"]) / 1e6, places=9)
        kv = {s.shape_key(): s.kv_bytes for s in self.plan.shapes}
        self.assertTrue(all(int(r["kv_bytes"]) == kv[k.split(" ", 1)[1].rsplit(" ", 1)[0]]
                            for r, k in zip(rows, keys_of(rows))))

        sidecar = sidecar_of(out)
        self.assertEqual(sidecar["schema"], "splitkv-sweep-sidecar/1")
        self.assertEqual(sidecar["state"], "complete")
        self.assertEqual(sidecar["grid"]["sha256"], sha256_of(self.grid))
        self.assertEqual(sidecar["counts"]["planned"], self.planned)
        skipped = sum(1 for r in rows if r["status"] == "skipped")
        self.assertEqual((sidecar["counts"]["ok"], sidecar["counts"]["failed"]), (len(rows) - skipped, skipped))
        self.assertEqual(sidecar["device"]["sm_count"], 132)
        self.assertEqual(sidecar["kernels"], list(fa3_sweep.KERNELS))
        self.assertIsNotNone(sidecar["finished_at"])

        header = os.path.join(SCRATCH, "num_splits_fake.hpp")
        fit = splitkv("fit", out, "--kernel", "fa3", "--out", header).stdout
        self.assertIn("kernel fa3", fit)
        self.assertIn("132 SMs from the sidecar", fit)
        self.assertTrue(os.path.getsize(header) > 0)
        report = splitkv("evaluate", out, "--kernel", "fa3", "--out", os.path.join(SCRATCH, "regret.csv"),
                         "--no-cross-validation").stdout
        self.assertIn("oracle", report)
        # Several kernels in one file: fit refuses to guess which one.
        splitkv("fit", out, "--out", header, expect=2)
        # The C++ sweep's resume checks read the same CSV and sidecar (gpu, duplicates, grid sha, shard).
        self.assertIn(f"holds {len(rows)} rows", splitkv("sweep", "--grid", self.grid, "--out", out,
                                                          "--dry-run", "--resume").stdout)
        # A complete file resumes to nothing new.
        run("--grid", self.grid, "--out", out, "--fake-timer", "--resume", expect=0)
        self.assertEqual(rows_of(out), rows)
        self.assertEqual(sidecar_of(out)["runs"], 2)

        shards = []
        for index in (0, 1):
            shard = fresh(f"shard{index}")
            run("--grid", self.grid, "--out", shard, "--fake-timer", "--shard", f"{index}/2", expect=0)
            shards.append(shard)
        merged = fresh("merged")
        splitkv("merge", *shards, "--out", merged)
        self.assertEqual(sorted(keys_of(rows_of(merged))), sorted(keys_of(rows)))

    def test_deadline_then_resume(self):
        out = fresh("deadline")
        started = time.monotonic()
        # 14 points of 0.5 s against 6 s: it stops part-way, whatever the machine's start-up costs.
        done = run("--grid", self.small, "--out", out, "--fake-timer", "--fake-point-s", "0.5", "--deadline-s", "6",
                   "--deadline-reserve-s", "0.2", expect=75)
        self.assertLess(time.monotonic() - started, 30)
        self.assertIn("resume with:", done.stderr)
        partial = rows_of(out)
        planned = fa3_sweep.load_plan(SPLITKV, self.small, "0/1").rows()
        self.assertGreater(len(partial), 0)
        self.assertLess(len(partial), planned)
        sidecar = sidecar_of(out)
        self.assertEqual(sidecar["state"], "interrupted")
        run("--grid", self.small, "--out", out, "--fake-timer", expect=2)  # rows there: --resume needed
        run("--grid", self.small, "--out", out, "--fake-timer", "--resume", expect=0)
        rows = rows_of(out)
        self.assertEqual(rows[:len(partial)], partial)
        self.assertEqual(len(rows), planned)
        self.assertEqual(len(set(keys_of(rows))), planned)
        self.assertEqual(sidecar_of(out)["state"], "complete")

    def test_torn_line_is_cut_on_resume(self):
        out = fresh("torn")
        run("--grid", self.small, "--out", out, "--fake-timer", "--fake-fault", "s2=invalid", expect=0)
        complete = rows_of(out)
        with open(out) as handle:
            lines = handle.readlines()
        with open(out, "w") as handle:
            handle.writelines(lines[:-2])
            handle.write(lines[-2][:25])  # a kill in the middle of a write
        self.assertIn("already holds", run("--grid", self.small, "--out", out, "--fake-timer", expect=2).stderr)
        done = run("--grid", self.small, "--out", out, "--fake-timer", "--fake-fault", "s2=invalid", "--resume",
                   expect=0)
        self.assertIn("cut off a torn last line", done.stderr)
        self.assertEqual(sorted(keys_of(rows_of(out))), sorted(keys_of(complete)))

    def test_fault_rows(self):
        out = fresh("faults")
        done = run("--grid", self.small, "--out", out, "--fake-timer", "--fake-fault", "uniform s2=oom",
                   "--fake-fault", "uniform s4=wrong", "--fake-fault", "long_tail s2=throttled",
                   "--fake-fault", "long_tail s4=unexpected", "--fake-fault", "long_tail s8=launch_failed", expect=0)
        rows = {k: r for k, r in zip(keys_of(rows_of(out)), rows_of(out))}
        fixed = " contiguous bf16 b4 h32/8 d64 L1000 C4000 "
        self.assertEqual(rows["fa3" + fixed + "uniform s2"]["status"], "oom")
        wrong = rows["fa3" + fixed + "uniform s4"]
        self.assertEqual(wrong["status"], "invalid")
        self.assertTrue(wrong["message"].startswith("wrong output: "))
        self.assertEqual(wrong["time_us_median"], "")
        throttled = rows["fa3" + fixed + "long_tail s2"]
        self.assertEqual(throttled["status"], "throttled")
        self.assertNotEqual(throttled["time_us_median"], "")  # throttled rows keep their numbers
        self.assertTrue(rows["fa3" + fixed + "long_tail s4"]["message"].startswith("unexpected TypeError"))
        self.assertEqual(rows["fa3" + fixed + "long_tail s8"]["status"], "launch_failed")
        self.assertIn("-> oom", done.stderr)  # failures are always printed
        # Throttled is not final: a resume times it again and appends the new row.
        run("--grid", self.small, "--out", out, "--fake-timer", "--resume", expect=0)
        again = rows_of(out)
        self.assertEqual(len(again), len(rows) + 1)
        self.assertEqual(keys_of(again[-1:]), ["fa3" + fixed + "long_tail s2"])
        self.assertEqual(again[-1]["status"], "ok")
        splitkv("evaluate", out, "--kernel", "fa3", "--out", os.path.join(SCRATCH, "faults_regret.csv"),
                "--no-cross-validation")

    def test_lost_context_restarts_with_resume(self):
        out = fresh("sticky")
        done = run("--grid", self.small, "--out", out, "--fake-timer", "--fake-fault", "uniform s4=sticky", expect=0)
        self.assertIn("restart 1 of 3", done.stderr)
        rows = rows_of(out)
        self.assertEqual(len(rows), fa3_sweep.load_plan(SPLITKV, self.small, "0/1").rows())
        self.assertEqual(len(set(keys_of(rows))), len(rows))
        lost = [r for r in rows if r["status"] not in ("ok", "skipped")]
        self.assertEqual(len(lost), 1)
        self.assertEqual(lost[0]["status"], "launch_failed")
        self.assertIn("context was lost", lost[0]["message"])
        sidecar = sidecar_of(out)
        self.assertEqual((sidecar["state"], sidecar["runs"]), ("complete", 2))
        out = fresh("sticky_no_restart")
        run("--grid", self.small, "--out", out, "--fake-timer", "--fake-fault", "uniform s4=sticky", "--no-restart",
            expect=1)
        self.assertEqual(sidecar_of(out)["state"], "aborted")

    def test_interrupt_leaves_a_resumable_csv(self):
        out = fresh("interrupt")
        process = subprocess.Popen([sys.executable, SCRIPT, "--splitkv", SPLITKV, "--grid", self.small, "--out", out,
                                    "--fake-timer", "--fake-point-s", "0.2"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not os.path.exists(out) or len(rows_of(out)) < 2):
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        self.assertEqual(process.returncode, 130, stderr)
        self.assertIn("interrupted by SIGINT", stderr)
        self.assertEqual(sidecar_of(out)["state"], "interrupted")
        run("--grid", self.small, "--out", out, "--fake-timer", "--resume", expect=0)
        rows = rows_of(out)
        self.assertEqual(len(set(keys_of(rows))), len(rows))
        self.assertEqual(len(rows), fa3_sweep.load_plan(SPLITKV, self.small, "0/1").rows())

    def test_refusals(self):
        out = fresh("refusals")
        missing = os.path.join(SCRATCH, "no_such_folder", "x.csv")
        self.assertIn("does not exist", run("--grid", self.small, "--out", missing, "--fake-timer", expect=2).stderr)
        self.assertIn("is the grid file", run("--grid", self.small, "--out", self.small, "--fake-timer",
                                              expect=2).stderr)
        bad_grid = write_grid("bad.json", dict(SMALL, head_dim=[96]))
        self.assertIn("head_dim 96", run("--grid", bad_grid, "--out", out, "--fake-timer", expect=2).stderr)
        run("--grid", self.small, "--out", out, "--fake-timer", "--shard", "1/2", expect=0)
        self.assertIn("holds shard 1/2", run("--grid", self.small, "--out", out, "--fake-timer", "--resume",
                                             expect=2).stderr)
        changed = write_grid("fa3_test_small.json", dict(SMALL, description="edited"))
        self.assertIn("grid changed", run("--grid", changed, "--out", out, "--fake-timer", "--resume", "--shard", "1/2",
                                          expect=2).stderr)
        write_grid("fa3_test_small.json", SMALL)
        other_gpu = run("--grid", self.small, "--out", out, "--fake-timer", "--resume", "--shard", "1/2",
                        "--fake-gpu", "NVIDIA H100 80GB HBM3", expect=2).stderr
        self.assertIn("this device is \"NVIDIA H100 80GB HBM3\"", other_gpu)
        # Without the fake timer: no torch here (or no wheel at the path): one line, exit 1.
        done = run("--grid", self.small, "--out", fresh("no_fa3"), "--fa3-path", os.path.join(SCRATCH, "nope"),
                   expect=1)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        self.assertTrue(done.stderr.startswith("fa3_sweep.py: cannot "), done.stderr)
        estimate = run("--grid", self.grid, "--estimate", expect=0).stdout
        self.assertIn(f"{self.planned} rows", estimate)
        self.assertIn("min on one H200", estimate)


def main():
    global SPLITKV, SCRATCH
    argv = sys.argv[1:]
    if "--splitkv" not in argv or "--scratch" not in argv:
        sys.exit(__doc__)
    SPLITKV = os.path.abspath(argv[argv.index("--splitkv") + 1])
    SCRATCH = os.path.abspath(argv[argv.index("--scratch") + 1])
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    rest = [a for i, a in enumerate(argv) if a not in ("--splitkv", "--scratch") and
            (i == 0 or argv[i - 1] not in ("--splitkv", "--scratch"))]
    unittest.main(argv=[sys.argv[0], "-v"] + rest)


if __name__ == "__main__":
    main()
