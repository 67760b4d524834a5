#!/usr/bin/env python3
"""`splitkv sweep --devices` on the fake GPU (SPLITKV_FAKE_GPUS, no CUDA needed): the workers' CSVs
merged into --out hold exactly a single-process sweep's rows, each row names its GPU; a worker killed
with SIGKILL is restarted with --resume and loses or repeats nothing; Ctrl-C and --resume of the whole
run; GPUs of two models refused; --devices 0,0; CSVs written before the gpu_index and gpu_uuid columns
still read by resume, merge, fit and evaluate.

    python3 tests/test_multi_device.py --splitkv build/cli/splitkv --scratch build/tests/multi_device_scratch
"""
import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

SPLITKV = None
SCRATCH = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID = os.path.join(ROOT, "tests", "slurm", "slurm_grid.json")  # 120 points in 18 shapes
OLD_COLUMNS = 22  # the columns before gpu_index and gpu_uuid


def env(gpus="NVIDIA H200,NVIDIA H200", point_us=0):
    e = dict(os.environ, SPLITKV_FAKE_GPUS=gpus, SPLITKV_FAKE_POINT_US=str(point_us))
    e.pop("CUDA_VISIBLE_DEVICES", None)
    return e


def splitkv(*args, expect=0, **kwargs):
    done = subprocess.run([SPLITKV, *args], capture_output=True, text=True, env=kwargs.pop("env", env()), **kwargs)
    if done.returncode != expect:
        raise AssertionError(f"splitkv {' '.join(args)}: exit {done.returncode}, expected {expect}\n"
                             f"{done.stdout}{done.stderr}")
    return done


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def folder(name):
    path = os.path.join(SCRATCH, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


class MultiDevice(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ref_dir = folder("reference")
        cls.reference = os.path.join(cls.ref_dir, "single.csv")
        splitkv("sweep", "--grid", GRID, "--out", cls.reference)
        cls.ref_rows = rows(cls.reference)

    def assert_same_rows(self, merged):
        """The merged CSV holds every row of the single-process sweep once (device columns aside)."""
        got = [tuple(r[:OLD_COLUMNS]) for r in rows(merged)[1:]]
        want = [tuple(r[:OLD_COLUMNS]) for r in self.ref_rows[1:]]
        self.assertEqual(len(got), len(set(got)), "duplicated rows")
        self.assertEqual(sorted(got), sorted(want))

    def test_workers_are_merged_and_rows_name_their_gpu(self):
        out = os.path.join(folder("merge"), "full.csv")
        done = splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "all")
        self.assertIn("complete: 120 rows from 2 workers merged into", done.stderr)
        self.assert_same_rows(out)
        header, *body = rows(out)
        self.assertEqual(header[-2:], ["gpu_index", "gpu_uuid"])
        self.assertEqual({(r[-2], r[-1]) for r in body},
                         {("0", "GPU-fa4e0000-0000-4000-8000-000000000000"),
                          ("1", "GPU-fa4e0000-0000-4000-8000-000000000001")})
        # Each worker's rows carry the device its sidecar names.
        for shard in (0, 1):
            with open(os.path.join(os.path.dirname(out), "full.shards", f"shard{shard}.json")) as handle:
                sidecar = json.load(handle)
            self.assertEqual((sidecar["shard"], sidecar["shard_by"]), (f"{shard}/2", "cost"))
            uuids = {r[-1] for r in rows(os.path.join(os.path.dirname(out), "full.shards", f"shard{shard}.csv"))[1:]}
            self.assertEqual(uuids, {sidecar["device"]["uuid"]})
        with open(out[:-4] + ".json") as handle:
            merged = json.load(handle)
        self.assertEqual(merged["shard"], "0/1")
        self.assertEqual(len(merged["devices"]), 2)
        # The progress line covers both workers.
        self.assertRegex(done.stderr, r"\[120/120\] 100\.0% .* \| w0 gpu0 \d+/\d+ done \| w1 gpu1 \d+/\d+ done")

    def test_killed_worker_is_restarted_and_loses_nothing(self):
        work = folder("killed")
        out = os.path.join(work, "full.csv")
        shard1 = os.path.join(work, "full.shards", "shard1.csv")
        sweep = subprocess.Popen([SPLITKV, "sweep", "--grid", GRID, "--out", out, "--devices", "0,1"],
                                 env=env(point_us=20000), stderr=subprocess.PIPE, text=True)
        victim = None
        deadline = time.time() + 20
        while time.time() < deadline and victim is None:
            time.sleep(0.05)
            if os.path.exists(shard1) and len(rows(shard1)) > 6:
                for pid in os.listdir("/proc"):
                    try:
                        with open(f"/proc/{pid}/cmdline", "rb") as handle:
                            cmdline = handle.read().split(b"\0")
                        with open(f"/proc/{pid}/stat") as handle:
                            parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                    except (OSError, ValueError, IndexError):
                        continue
                    if parent == sweep.pid and b"1/2" in cmdline:
                        victim = int(pid)
        self.assertIsNotNone(victim, "worker 1 never started writing rows")
        os.kill(victim, signal.SIGKILL)
        _, stderr = sweep.communicate(timeout=60)
        self.assertEqual(sweep.returncode, 0, stderr)
        self.assertRegex(stderr, r"worker 1 \(GPU 1, shard 1/2\) ended with signal 9 .*restarting it with --resume")
        self.assert_same_rows(out)
        with open(os.path.join(work, "full.shards", "shard1.log")) as handle:
            log = handle.read()
        self.assertRegex(log, r"complete: \d+ rows written .*, [1-9]\d* already done")

    def test_ctrl_c_then_resume(self):
        work = folder("interrupted")
        out = os.path.join(work, "full.csv")
        sweep = subprocess.Popen([SPLITKV, "sweep", "--grid", GRID, "--out", out, "--devices", "all"],
                                 env=env(point_us=20000), stderr=subprocess.PIPE, text=True)
        time.sleep(0.6)
        sweep.send_signal(signal.SIGINT)
        _, stderr = sweep.communicate(timeout=30)
        self.assertEqual(sweep.returncode, 130, stderr)
        self.assertIn("resume with: splitkv sweep --grid", stderr)
        self.assertIn("--resume --devices all", stderr)
        self.assertFalse(os.path.exists(out), "an interrupted run merged")
        splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "all", expect=2)  # rows there: --resume needed
        splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "0,1,0", "--resume", expect=2)  # 3 workers, not 2
        splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "all", "--resume")
        self.assert_same_rows(out)
        splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "all", "--resume")  # done: merged again
        self.assert_same_rows(out)

    def test_two_gpu_models_are_refused(self):
        work = folder("mixed")
        out = os.path.join(work, "full.csv")
        done = splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "all",
                       env=env(gpus="NVIDIA H200,NVIDIA H100 80GB HBM3"), expect=2)
        self.assertIn('GPU 0 is "NVIDIA H200" but GPU 1 is "NVIDIA H100 80GB HBM3"', done.stderr)
        self.assertIn("refusing to mix them", done.stderr)
        self.assertEqual(os.listdir(work), [])
        # One model out of the two is fine.
        splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "1", env=env(gpus="NVIDIA H200,NVIDIA H100 80GB HBM3"))
        self.assertEqual({r[0] for r in rows(out)[1:]}, {"NVIDIA H100 80GB HBM3"})

    def test_two_workers_may_share_one_gpu(self):
        out = os.path.join(folder("shared"), "full.csv")
        done = splitkv("sweep", "--grid", GRID, "--out", out, "--devices", "0,0", env=env(gpus="NVIDIA H200"))
        self.assertIn("GPU 0 (x2, shared)", done.stderr)
        self.assert_same_rows(out)
        self.assertEqual({r[-2] for r in rows(out)[1:]}, {"0"})

    def test_shard_by_cost_partitions_and_resume_keeps_it(self):
        work = folder("shard_by")
        shards = [os.path.join(work, f"s{i}.csv") for i in range(3)]
        for i, path in enumerate(shards):
            splitkv("sweep", "--grid", GRID, "--out", path, "--shard", f"{i}/3", "--shard-by", "cost")
        done = splitkv("sweep", "--grid", GRID, "--out", shards[0], "--shard", "0/3", "--resume", expect=2)
        self.assertIn("dealt by cost, not index", done.stderr)
        merged = os.path.join(work, "merged.csv")
        splitkv("merge", *shards, "--out", merged)
        self.assert_same_rows(merged)

    def test_csvs_without_the_device_columns_still_read(self):
        work = folder("old_csv")
        old = os.path.join(work, "old.csv")
        # A CSV as written before gpu_index and gpu_uuid, cut in the middle of the sweep.
        with open(old, "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            for row in self.ref_rows[:60]:
                writer.writerow(row[:OLD_COLUMNS])
        with open(self.reference[:-4] + ".json") as handle:
            sidecar = json.load(handle)
        sidecar["results_csv"] = old
        sidecar.pop("shard_by")  # nor did sidecars say how shards were dealt, or the GPU's UUID
        sidecar["device"].pop("uuid")
        with open(old[:-4] + ".json", "w") as handle:
            json.dump(sidecar, handle, indent=2)
        # Resume appends in the file's own layout: every line keeps 22 fields.
        splitkv("sweep", "--grid", GRID, "--out", old, "--resume")
        old_rows = rows(old)
        self.assertEqual({len(r) for r in old_rows}, {OLD_COLUMNS})
        self.assert_same_rows(old)
        # fit, evaluate and merge read it.
        splitkv("fit", old, "--out", os.path.join(work, "table.hpp"))
        splitkv("evaluate", old, "--no-cross-validation", "--out", os.path.join(work, "regret.csv"))
        new = os.path.join(work, "new.csv")
        splitkv("sweep", "--grid", GRID, "--out", new)
        with open(new[:-4] + ".json") as handle:
            self.assertEqual(json.load(handle)["device"]["uuid"], "GPU-fa4e0000-0000-4000-8000-000000000000")
        s0, s1 = os.path.join(work, "s0.csv"), os.path.join(work, "s1.csv")
        splitkv("sweep", "--grid", GRID, "--out", s0, "--shard", "0/2")
        splitkv("sweep", "--grid", GRID, "--out", s1, "--shard", "1/2")
        with open(s0, newline="") as handle:  # shard 0 as an old file: its last two columns dropped
            body = [r[:OLD_COLUMNS] for r in csv.reader(handle)]
        with open(s0, "w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(body)
        merged = os.path.join(work, "merged.csv")
        splitkv("merge", s0, s1, "--out", merged)
        self.assert_same_rows(merged)
        devices = {tuple(r[-2:]) for r in rows(merged)[1:]}
        self.assertEqual(devices, {("", ""), ("0", "GPU-fa4e0000-0000-4000-8000-000000000000")})


def main():
    global SPLITKV, SCRATCH
    parser = argparse.ArgumentParser()
    parser.add_argument("--splitkv", required=True)
    parser.add_argument("--scratch", required=True)
    args, rest = parser.parse_known_args()
    SPLITKV = os.path.abspath(args.splitkv)
    SCRATCH = os.path.abspath(args.scratch)
    os.makedirs(SCRATCH, exist_ok=True)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
