#!/usr/bin/env python3
"""FlashAttention 3's own decode kernel as a kernel under test: `splitkv sweep`'s grids, points,
CSV rows and sidecar, timed in Python through the fa3_fwd wheel's `flash_attn_with_kvcache`.

    python3 scripts/fa3_sweep.py --grid sweeps/fa3.json --out results/h200/fa3.csv --fa3-path /tmp/fa3

The points come from the C++ planner (`splitkv sweep --grid G --dry-run --shard i/N --plan-csv F`),
so a shard, a key and a batch of real lengths are the same here as in every other sweep. Rows follow
tuner/CSV_SCHEMA.md and are read by `splitkv fit` / `splitkv evaluate` with `--kernel fa3`:

  fa3                     flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                          num_splits=s) on a contiguous cache [batch, cache_capacity, kv_heads,
                          head_dim]; FA3 takes cache_seqlens as seqused_k. num_splits is FA3's static
                          bound: for batch <= 992 its prepare kernel gives each sequence
                          min(s, its own per-sequence count), so large s can time alike.
  fa3_heuristic_capacity  num_splits=0 on the same cache: FA3's own choice from max_seqlen_k =
                          cache_capacity, what flash_attn_with_kvcache does by default.
  fa3_heuristic_maxlen    num_splits=0 with max_seqlen_k = the batch's real max length. The wheel's
                          flash_attn_with_kvcache has no max_seqlen_k argument (it passes None) and
                          mha_fwd ignores max_seqlen_k unless cu_seqlens_k is given: seqlen_k is
                          k_cache.size(1). So the cache goes in as the view k_cache[:, :max_len]
                          (same memory and strides, no copy). get_scheduler_metadata(max_seqlen_k=
                          max_len) alone would not do it: mha_fwd still sizes its split buffers and
                          picks pack_gqa from k_cache.size(1) while the metadata's per-sequence
                          counts come from max_len. Without scheduler metadata mha_fwd runs its
                          prepare kernel in every call, as in the other two kernels' rows.
  Policy rows put the grid's upper bound for the shape (its largest planned split count) in
  num_splits, as splitkv_auto, fa3_dynamic and flashinfer_plan do; FA3 picks its own count.

pack_gqa is left to FA3. Only contiguous bf16 shapes run (the wheel has no paged-KV and no fp16
kernels); other shapes get `skipped` rows.

Timing, per (point, split): R calls captured in one CUDA graph, call i on rotating K/V copy i % copies
(working set >= min_working_set_l2_multiple x L2, copies capped by --max-copies and the memory budget;
short contexts in large caches rotate through their own capacity, as the C++ sweep does), R =
max(copies, enough calls for ~300 us per replay); then the grid's warm-up replays (the first point of a
shape first replays for --shape-warmup-s), then `repetitions` timed replays, each giving time / R per
call; the row holds their median, p10, p90 and cv. A clock slowdown reported by NVML while timing is
timed again once, then recorded as `throttled`.

Correctness, before every (point, split) is timed: FA3's output on copy 0 (and once per shape on the
last copy) against an fp32 reference attention of the same bf16 inputs (fresh random K/V/q, never
zeros), through flash_attn_with_kvcache and through the raw op into an output poisoned with NaN, so an
element FA3 never writes is caught. A wrong output is recorded as `invalid` with a message starting
"wrong output:", and its time columns are empty like every failure row (the schema has no status for
a wrong output, and `splitkv fit`/`evaluate` refuse unknown statuses).

Failures are rows, never a crash: `oom`, `invalid` (FA3 rejected the arguments), `launch_failed` (a
CUDA error). A sticky CUDA error loses the context: its point gets a `launch_failed` row and the
worker process exits; the supervising process starts a fresh one with --resume (up to
--max-restarts), so one bad shape costs a restart, not the run.

Resume, locking, torn tails, the sidecar's format and its checks are those of `splitkv sweep`
(tuner/CSV_SCHEMA.md). --deadline-s / --deadline-at stop before a point that would not finish in
time and leave a resumable CSV (exit 75); Ctrl-C or SIGTERM stops after the point in flight (exit
130); a second signal, a second after the first, kills at once.

Exit codes: 0 done, 1 could not run (no torch, no FA3, no GPU) or stopped on a device error,
2 invalid input, 75 stopped at the deadline, 130 interrupted; rows so far are kept in every case.

--fake-timer needs neither torch nor a GPU: it fakes FA3's times with a bandwidth-and-waves formula
(and faults on request, --fake-fault), for the CPU test of the CSV, resume and deadline logic
(tests/test_fa3_sweep.py). --estimate prints the plan's size and a rough device time.

On the GPU machine, from the repository root, as one line ($OUT is the device tool's output folder;
the wheel's folder .whl/ is git-ignored, so the call must carry it; prefix SPLITKV_GIT_SHA=<commit>
for the sidecars, the copy there has no .git). It builds the planner, runs the smoke grid (one shape,
all its split counts and both heuristic rows; ~20 s), prints its rows, and only if one is ok runs
sweeps/fa3.json until 570 s after the start:

    T0=$(date +%s); set -o pipefail; rm -rf /tmp/fa3 && python3 -m zipfile -e .whl/fa3_fwd-*.whl /tmp/fa3 && { cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITKV_ENABLE_CUDA=OFF && cmake --build build-dev -j "$(nproc)" --target splitkv; } > $OUT/build.log 2>&1 || { tail -n 30 $OUT/build.log; exit 1; }; python3 scripts/fa3_sweep.py --grid sweeps/fa3_smoke.json --out $OUT/fa3_smoke.csv --fa3-path /tmp/fa3 --splitkv build-dev/cli/splitkv --deadline-s 100 && cat $OUT/fa3_smoke.csv && grep -q ',ok,$' $OUT/fa3_smoke.csv && python3 scripts/fa3_sweep.py --grid sweeps/fa3.json --out $OUT/fa3.csv --fa3-path /tmp/fa3 --splitkv build-dev/cli/splitkv --deadline-at $((T0+570)) 2>&1 | tail -n 30

Exit 75 there means the deadline came first: put fa3.csv and fa3.json back into the tree (e.g. under
results/h200/) and run the same line with the last command as
`cp results/h200/fa3.csv results/h200/fa3.json $OUT/ && python3 scripts/fa3_sweep.py ... --out $OUT/fa3.csv --resume ...`.
"""
import argparse
import csv
import ctypes
import datetime
import fcntl
import hashlib
import io
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COLUMNS = ("gpu", "kernel", "layout", "page_size", "dtype", "batch", "num_heads", "num_kv_heads", "head_dim",
           "context_len", "cache_capacity", "length_distribution", "num_splits", "time_us_median", "time_us_p10",
           "time_us_p90", "cv", "repetitions", "kv_bytes", "tbps", "status", "message")
STATUSES = ("ok", "oom", "launch_failed", "invalid", "skipped", "throttled")
KERNEL_FIXED = "fa3"
KERNEL_CAPACITY = "fa3_heuristic_capacity"
KERNEL_MAXLEN = "fa3_heuristic_maxlen"
KERNELS = (KERNEL_FIXED, KERNEL_CAPACITY, KERNEL_MAXLEN)
POLICY_KERNELS = (KERNEL_CAPACITY, KERNEL_MAXLEN)
SIDECAR_SCHEMA = "splitkv-sweep-sidecar/1"
PLAN_COLUMNS = ("shape_index", "key", "layout", "page_size", "dtype", "batch", "num_heads", "num_kv_heads",
                "head_dim", "context_len", "cache_capacity", "length_distribution", "num_splits", "kv_bytes",
                "working_set_bytes", "footprint_bytes", "lengths")
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CONTEXT_LOST = 0, 1, 2, 3
EXIT_DEADLINE, EXIT_INTERRUPTED = 75, 130

# Relative to the largest |reference| element: bf16 output rounding is 2^-9 of it, FA3's bf16
# probabilities add about as much; a split dropped or misplaced moves outputs by a large fraction.
CHECK_RTOL = 2e-2
CHECK_ATOL = 1e-5
# Points that fail in a row with an exception of our own code (not FA3's): a bug here, and
# continuing would only fill the CSV with the same failure.
MAX_UNEXPECTED_IN_A_ROW = 20
PROG = "fa3_sweep.py"


class InputError(Exception):
    """Bad arguments, grid, plan or output file: exit 2, nothing timed."""


class LoadError(Exception):
    """torch, FlashAttention 3 or the GPU is not usable: exit 1."""


class ContextLost(Exception):
    """A sticky CUDA error: nothing more can run in this process."""


class Aborted(Exception):
    """The sweep cannot usefully go on (our own code keeps failing)."""


# ----------------------------------------------------------------------------------------------
# Points and the plan


def layout_token(layout, page_size):
    return f"paged{page_size}" if layout == "paged" else "contiguous"


def point_key(layout, page_size, dtype, batch, num_heads, num_kv_heads, head_dim, context_len, cache_capacity,
              length_distribution, num_splits):
    """SweepPoint::key(), e.g. "paged16 bf16 b8 h32/8 d128 L8192 C131072 fixed s4"."""
    return (f"{layout_token(layout, page_size)} {dtype} b{batch} h{num_heads}/{num_kv_heads} d{head_dim} "
            f"L{context_len} C{cache_capacity} {length_distribution} s{num_splits}")


def decode_lengths(text, batch, context_len, where):
    lengths = []
    for token in text.split():
        value, _, count = token.partition("*")
        try:
            value, count = int(value), int(count) if count else 1
        except ValueError:
            raise InputError(f"{where}: lengths token \"{token}\" is not LENGTH or LENGTH*COUNT")
        if not 1 <= value <= context_len or count < 1:
            raise InputError(f"{where}: length {value} x{count} is outside [1, context_len {context_len}]")
        lengths.extend([value] * count)
    if len(lengths) != batch:
        raise InputError(f"{where}: {len(lengths)} lengths for a batch of {batch}")
    return lengths


class Shape:
    """One planned shape and its split counts (ascending), with the byte counts the planner gave."""

    def __init__(self, row, where):
        self.index = int(row["shape_index"])
        self.layout = row["layout"]
        self.page_size = int(row["page_size"])
        self.dtype = row["dtype"]
        self.batch = int(row["batch"])
        self.num_heads = int(row["num_heads"])
        self.num_kv_heads = int(row["num_kv_heads"])
        self.head_dim = int(row["head_dim"])
        self.context_len = int(row["context_len"])
        self.cache_capacity = int(row["cache_capacity"])
        self.length_distribution = row["length_distribution"]
        self.kv_bytes = int(row["kv_bytes"])
        self.lengths = decode_lengths(row["lengths"], self.batch, self.context_len, where)
        self.splits = []
        self.working_set = {}
        self.footprint = {}

    def key(self, splits):
        return point_key(self.layout, self.page_size, self.dtype, self.batch, self.num_heads, self.num_kv_heads,
                         self.head_dim, self.context_len, self.cache_capacity, self.length_distribution, splits)

    def shape_key(self):
        return self.key(0).rsplit(" ", 1)[0]

    def cap(self):
        """The policy rows' num_splits: the grid's upper bound for this shape."""
        return self.splits[-1]

    def planned(self):
        """(kernel, num_splits) in timing order: FA3's own choices first, seconds after the shape's
        buffers are set up, then the split counts ascending (later timings drift slower)."""
        return [(kernel, self.cap()) for kernel in POLICY_KERNELS] + [(KERNEL_FIXED, s) for s in self.splits]

    def unsupported(self):
        if self.layout != "contiguous":
            return ("the fa3_fwd wheel has no paged-KV kernels (FLASHATTENTION_DISABLE_PAGEDKV) and this "
                    "driver times contiguous caches only")
        if self.dtype != "bf16":
            return "the fa3_fwd wheel has no fp16 kernels (FLASHATTENTION_DISABLE_FP16)"
        if self.head_dim not in FA3_HEAD_DIMS:
            return f"head_dim {self.head_dim} is not one of FA3's {FA3_HEAD_DIMS}"
        return None


class Plan:
    def __init__(self, shapes, pruned_by_reason):
        self.shapes = shapes
        self.pruned_by_reason = pruned_by_reason

    def rows(self):
        return sum(len(s.planned()) for s in self.shapes)


def parse_plan_csv(text, source):
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in PLAN_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(f"{source}: plan lacks columns {', '.join(missing)} (is the splitkv binary older than "
                         "this script?)")
    shapes, by_index = [], {}
    for row in reader:
        where = f"{source}:{reader.line_num}"
        try:
            index = int(row["shape_index"])
            shape = by_index.get(index)
            if shape is None:
                shape = by_index[index] = Shape(row, where)
                shapes.append(shape)
            splits = int(row["num_splits"])
            shape.splits.append(splits)
            shape.working_set[splits] = int(row["working_set_bytes"])
            shape.footprint[splits] = int(row["footprint_bytes"])
        except (KeyError, ValueError, TypeError) as error:
            raise InputError(f"{where}: unreadable plan line: {error}")
        key = shape.key(splits)
        if row["key"] != key:
            raise InputError(f"{where}: the planner's key \"{row['key']}\" is not \"{key}\", the one this script "
                             "builds; the two would resume different points")
    for shape in shapes:
        if shape.splits != sorted(set(shape.splits)):
            raise InputError(f"{source}: shape {shape.shape_key()}: split counts {shape.splits} are not ascending")
    return shapes


def find_splitkv(given):
    candidates = [given] if given else [os.environ.get("SPLITKV_BIN", "")] + [
        os.path.join(ROOT, folder, "cli", "splitkv") for folder in ("build-dev", "build", "build-release")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    if not given and shutil.which("splitkv"):
        return shutil.which("splitkv")
    if given:
        raise InputError(f"--splitkv {given}: not an executable file")
    raise InputError("cannot find the splitkv binary (build it: cmake -S . -B build-dev -G Ninja "
                     "-DSPLITKV_ENABLE_CUDA=OFF && cmake --build build-dev --target splitkv); or pass --splitkv")


def load_plan(splitkv, grid, shard):
    with tempfile.TemporaryDirectory(prefix="fa3_sweep_plan.") as folder:
        plan_path = os.path.join(folder, "plan.csv")
        command = [splitkv, "sweep", "--grid", grid, "--dry-run", "--shard", shard, "--plan-csv", plan_path]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as error:
            raise InputError(f"cannot run {splitkv}: {error}")
        if done.returncode != 0:
            lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise InputError(lines[-1] if lines else f"{' '.join(command)} exited {done.returncode}")
        try:
            with open(plan_path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as error:
            raise InputError(f"{splitkv} wrote no plan ({error}); is it older than --plan-csv?")
    pruned = {}
    for line in done.stdout.splitlines():
        found = re.match(r"\s+pruned\s+(\d+)\s+(\w+)\s", line)
        if found:
            pruned[found.group(2)] = int(found.group(1))
    return Plan(parse_plan_csv(text, f"plan of {grid}"), pruned)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_grid_info(path):
    """What the sidecar records of the grid. The planner has already validated the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            grid = json.load(handle)
        info = dict(path=path, sha256=sha256_file(path), name=str(grid["name"]),
                    memory_budget_gb=float(grid["memory_budget_gb"]),
                    protocol={k: grid["protocol"][k] for k in ("repetitions", "min_working_set_l2_multiple",
                                                               "warmup_replays", "min_time_s")},
                    length_files={})
        folder = os.path.dirname(os.path.abspath(path))
        for name, file_path in sorted(grid.get("length_files", {}).items()):
            resolved = file_path if os.path.isabs(file_path) else os.path.join(folder, file_path)
            info["length_files"][name] = dict(path=resolved, sha256=sha256_file(resolved))
        return info
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"{path}: {error}")


# ----------------------------------------------------------------------------------------------
# The results CSV


def result_key(kernel, key):
    return f"{kernel} {key}"


def csv_field(value):
    text = str(value).replace("\r", " ").replace("\n", " ")
    if any(c in text for c in ",\""):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_number(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return repr(float(value))


def format_row(row):
    values = []
    for column in COLUMNS:
        value = row.get(column)
        if column in ("time_us_median", "time_us_p10", "time_us_p90", "cv", "tbps"):
            values.append(csv_number(value))
        elif column in ("gpu", "kernel", "message"):
            values.append(csv_field("" if value is None else value))
        else:
            values.append(str(value))
    return ",".join(values) + "\n"


class Results:
    def __init__(self, rows, lines, torn, header):
        self.rows, self.lines, self.torn, self.header = rows, lines, torn, header

    def has_data(self):
        return bool(self.rows) or self.torn is not None


def read_results(path):
    """The rows of a results CSV (tuner/CSV_SCHEMA.md). A missing or empty file has none; a last line
    without its newline is a torn tail (offset, line, bytes), dropped."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return Results([], [], None, None)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error}")
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError(f"{path}:1:1: starts with a UTF-8 byte-order mark; save the CSV as plain UTF-8")
    torn = None
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        torn = (cut, data[:cut].count(b"\n") + 1, data[cut:])
        data = data[:cut]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: byte 0x{data[error.start]:02X} is not valid UTF-8")
    reader = csv.reader(io.StringIO(text, newline=""))
    header, rows, lines = None, [], []
    for fields in reader:
        if not fields:
            continue
        if header is None:
            header = fields
            unknown = [f for f in fields if f not in COLUMNS]
            missing = [c for c in COLUMNS if c not in fields]
            if unknown or missing or len(set(fields)) != len(fields):
                raise InputError(f"{path}:{reader.line_num}:1: header is not the results CSV's (unknown: "
                                 f"{unknown or 'none'}, missing: {missing or 'none'})")
            continue
        if len(fields) != len(header):
            raise InputError(f"{path}:{reader.line_num}:1: expected {len(header)} fields, got {len(fields)}")
        row = dict(zip(header, fields))
        if row["status"] not in STATUSES:
            raise InputError(f"{path}:{reader.line_num}: status \"{row['status']}\" is not one of {', '.join(STATUSES)}")
        try:
            row["_key"] = result_key(row["kernel"], point_key(
                row["layout"], int(row["page_size"]), row["dtype"], int(row["batch"]), int(row["num_heads"]),
                int(row["num_kv_heads"]), int(row["head_dim"]), int(row["context_len"]), int(row["cache_capacity"]),
                row["length_distribution"], int(row["num_splits"])))
        except ValueError as error:
            raise InputError(f"{path}:{reader.line_num}: {error}")
        rows.append(row)
        lines.append(reader.line_num)
    return Results(rows, lines, torn, header)


def check_consistency(results, path):
    """One GPU per file, one final row per point: what `splitkv sweep --resume` refuses otherwise."""
    finals = {}
    for row, line in zip(results.rows, results.lines):
        if row["gpu"] != results.rows[0]["gpu"]:
            raise InputError(f"{path}:{line}:1: column gpu: \"{row['gpu']}\" differs from \"{results.rows[0]['gpu']}\" "
                             f"(line {results.lines[0]}); one file holds one GPU's results")
        if row["status"] == "throttled":
            continue
        if row["_key"] in finals:
            raise InputError(f"{path}:{line}:1: duplicate row for {row['_key']} (final already at line "
                             f"{finals[row['_key']]}); two sweeps were mixed into this file")
        finals[row["_key"]] = line


def finished_keys(results):
    return {row["_key"] for row in results.rows if row["status"] != "throttled"}


def count_file(path):
    """Counts of the whole CSV, the last row of a point winning, as the sidecar reports them."""
    last = {}
    for row in read_results(path).rows:
        last[row["_key"]] = row["status"]
    ok = sum(1 for status in last.values() if status == "ok")
    return ok, len(last) - ok


class RowWriter:
    """Appends rows with one write() each, then fdatasync, under an exclusive flock."""

    def __init__(self, path, resume):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise InputError(f"{path}: another sweep is writing this file")
        # Re-read under the lock: what was checked before may have changed since.
        contents = read_results(path)
        if contents.has_data() and not resume:
            raise InputError(f"--out {path}: already holds measured rows; pass --resume to continue that sweep")
        if contents.torn is not None:
            if not resume:
                raise InputError(f"{path}: ends with a torn line; pass --resume (which cuts it off)")
            os.ftruncate(self.fd, contents.torn[0])
            self.truncated = contents.torn
        else:
            self.truncated = None
        if contents.header is not None and tuple(contents.header) != COLUMNS:
            raise InputError(f"{path}: its header orders the columns differently; appending would misalign them, "
                             "so write to a new --out")
        if os.fstat(self.fd).st_size == 0:
            self._write(",".join(COLUMNS) + "\n")
            sync_folder(os.path.dirname(os.path.abspath(path)))

    def _write(self, text):
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(self.fd, data[written:])
        os.fdatasync(self.fd)

    def append(self, row):
        self._write(format_row(row))

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def sync_folder(folder):
    try:
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse; the file itself is synced
    finally:
        os.close(fd)


def sidecar_path_for(csv_path):
    return csv_path[:-4] + ".json" if csv_path.endswith(".csv") else csv_path + ".json"


def write_json_atomically(path, document):
    temporary = f"{path}.tmp.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    sync_folder(os.path.dirname(os.path.abspath(path)))


def remove_stale_temporaries(sidecar_path):
    folder = os.path.dirname(os.path.abspath(sidecar_path))
    prefix = os.path.basename(sidecar_path) + ".tmp."
    for name in os.listdir(folder):
        if name.startswith(prefix):
            try:
                os.remove(os.path.join(folder, name))
            except OSError:
                pass


def read_sidecar(path):
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: unreadable sidecar: {error}")
    if not isinstance(document, dict) or document.get("schema") != SIDECAR_SCHEMA:
        raise InputError(f"{path}: schema is not {SIDECAR_SCHEMA}")
    return document


def same_file(a, b):
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def check_output(out, resume, grid_info, shard):
    """Refuses what `splitkv sweep` refuses, before the GPU is touched. Returns the CSV's rows."""
    folder = os.path.dirname(out)
    if folder and not os.path.isdir(folder):
        raise InputError(f"--out {out}: folder {folder} does not exist; create it first")
    if os.path.isdir(out):
        raise InputError(f"--out {out}: is a folder; give a CSV file path")
    if os.path.exists(out) and not os.path.isfile(out):
        raise InputError(f"--out {out}: is not a regular file")
    if same_file(out, grid_info["path"]):
        raise InputError(f"--out {out}: is the grid file; give a CSV path")
    if same_file(sidecar_path_for(out), grid_info["path"]):
        raise InputError(f"--out {out}: its sidecar {sidecar_path_for(out)} would overwrite the grid file")
    results = read_results(out)
    if results.has_data() and not resume:
        raise InputError(f"--out {out}: already holds {len(results.rows) + (1 if results.torn else 0)} measured "
                         "rows; pass --resume to continue that sweep, or choose another --out")
    previous = None
    if resume:
        check_consistency(results, out)
        sidecar = sidecar_path_for(out)
        if os.path.exists(sidecar):
            previous = read_sidecar(sidecar)
            grid = previous.get("grid", {})
            if grid.get("sha256") and grid["sha256"] != grid_info["sha256"]:
                raise InputError(f"{sidecar}: grid.sha256: {grid['sha256'][:12]} differs from {grid_info['path']} "
                                 f"({grid_info['sha256'][:12]} now): the grid changed since this CSV was started; "
                                 "resuming would mix grids, so write to a new --out")
            if previous.get("shard") != shard:
                raise InputError(f"{sidecar}: shard: this CSV holds shard {previous.get('shard')}, not {shard}; resume "
                                 f"it with --shard {previous.get('shard')} or write to a new --out")
            for name, entry in (grid.get("length_files") or {}).items():
                now = grid_info["length_files"].get(name)
                if now and entry.get("sha256") != now["sha256"]:
                    raise InputError(f"{sidecar}: grid.length_files.{name}: {now['path']} changed since this CSV was "
                                     "started; resuming would mix batches, so write to a new --out")
    return results, previous


# ----------------------------------------------------------------------------------------------
# Statistics and the fp32 reference


def percentile(sorted_values, fraction):
    position = fraction * (len(sorted_values) - 1)
    below = int(math.floor(position))
    above = min(below + 1, len(sorted_values) - 1)
    weight = position - below
    return sorted_values[below] * (1 - weight) + sorted_values[above] * weight


def summarize(samples):
    """Median, p10, p90 and cv (sample standard deviation / mean) as tuner/sample_stats.cpp computes them."""
    values = sorted(samples)
    mean = sum(values) / len(values)
    deviation = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return dict(time_us_median=percentile(values, 0.5), time_us_p10=percentile(values, 0.1),
                time_us_p90=percentile(values, 0.9), cv=deviation / mean if mean > 0 else 0.0,
                repetitions=len(values))


def reference_attention(torch, q, k, v, lengths, scale, budget_bytes=1 << 30):
    """fp32 decode attention of q [B, 1, H, D] over k, v [B, >= max length, Hkv, D] (bf16 views),
    sequence b reading its first lengths[b] tokens. Query head h reads kv head h // (H / Hkv), as FA3
    does. Batch and token chunks with an online softmax keep the fp32 temporaries near budget_bytes."""
    batch, _, heads, dim = q.shape
    kv_heads = k.shape[2]
    group = heads // kv_heads
    qf = q.float().reshape(batch, kv_heads, group, dim)
    out = torch.empty(batch, kv_heads, group, dim, dtype=torch.float32, device=q.device)
    lengths_device = torch.tensor(lengths, dtype=torch.int64, device=q.device)
    per_token = kv_heads * dim * 4 * 2 + heads * 4 * 3
    b0 = 0
    while b0 < batch:
        longest = max(lengths[b0:])
        rows = max(1, min(batch - b0, budget_bytes // max(1, longest * per_token)))
        b1 = b0 + rows
        span = max(lengths[b0:b1])
        step = max(1, min(span, budget_bytes // max(1, rows * per_token)))
        qc = qf[b0:b1]
        m = torch.full((rows, kv_heads, group, 1), -math.inf, dtype=torch.float32, device=q.device)
        total = torch.zeros((rows, kv_heads, group, 1), dtype=torch.float32, device=q.device)
        acc = torch.zeros((rows, kv_heads, group, dim), dtype=torch.float32, device=q.device)
        for t0 in range(0, span, step):
            t1 = min(span, t0 + step)
            kc = k[b0:b1, t0:t1].float().permute(0, 2, 1, 3)  # [rows, Hkv, t, D]
            vc = v[b0:b1, t0:t1].float().permute(0, 2, 1, 3)
            scores = torch.matmul(qc, kc.transpose(-1, -2)) * scale  # [rows, Hkv, G, t]
            positions = torch.arange(t0, t1, device=q.device)
            beyond = positions[None, :] >= lengths_device[b0:b1, None]
            scores.masked_fill_(beyond[:, None, None, :], -math.inf)
            # Every sequence holds token 0, so m is finite after the first chunk and no exp sees inf - inf.
            new_m = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
            p = torch.exp(scores - new_m)
            alpha = torch.exp(m - new_m)
            total = total * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + torch.matmul(p, vc)
            m = new_m
        out[b0:b1] = acc / total
        b0 = b1
    return out.reshape(batch, heads, dim)


def compare_to_reference(torch, out, ref):
    """None when out [B, 1, H, D] matches the fp32 reference [B, H, D]; else why not."""
    o = out.float().reshape(ref.shape)
    finite = torch.isfinite(o)
    unwritten = int((~finite).sum().item())
    if unwritten:
        return f"{unwritten} of {o.numel()} output elements are NaN/inf (not written, or overflowed)"
    error = (o - ref).abs()
    worst = int(error.argmax().item())
    max_error = float(error.reshape(-1)[worst].item())
    scale = float(ref.abs().max().item())
    tolerance = CHECK_RTOL * scale + CHECK_ATOL
    if not max_error <= tolerance:
        b, rest = divmod(worst, ref.shape[1] * ref.shape[2])
        h, d = divmod(rest, ref.shape[2])
        return (f"max abs error {max_error:.3e} at (b{b}, h{h}, d{d}) exceeds {tolerance:.3e} "
                f"({CHECK_RTOL:g} x max |reference| {scale:.3e})")
    return None


# ----------------------------------------------------------------------------------------------
# Backends: FA3 on the GPU, and the fake timer


def rotation(shape, l2_bytes, l2_multiple, budget_bytes, max_copies):
    """(copies, allocations, copies per allocation, slack tokens): rotating K/V copies so one replay
    touches l2_multiple x L2 (tuner/sweep_point.cpp's rotating_copies), within the memory budget.
    Copy c of an allocation reads tokens [c*L, c*L + L) of each capacity-sized slot; the view of a
    copy past the first still spans cache_capacity tokens, so its last sequence reaches past the
    last slot: `slack` tokens at the end keep that view inside the allocation."""
    per_alloc = max(1, shape.cache_capacity // shape.context_len)
    slack = shape.cache_capacity if per_alloc > 1 else 0
    widest = shape.splits[-1]
    wanted = max(1, math.ceil(l2_bytes * l2_multiple / max(1, shape.working_set[widest])))
    token_bytes = 2 * shape.num_kv_heads * shape.head_dim * 2
    other = shape.footprint[widest] - shape.batch * shape.cache_capacity * token_bytes
    set_bytes = (shape.batch * shape.cache_capacity + slack) * token_bytes + max(0, other)
    allocations_fit = max(1, int(budget_bytes // max(1, set_bytes)))
    copies = max(1, min(wanted, allocations_fit * per_alloc, max_copies))
    return copies, math.ceil(copies / per_alloc), per_alloc, slack if copies > 1 else 0


def calls_per_graph(shape, copies):
    """Enough calls that a replay lasts ~300 us (the C++ timer's estimate: the bytes at 4 TB/s plus a
    launch), so the graph launch stays under ~2% of a sample; at least one per copy. Unlike the C++
    timer a call of >= 300 us gets a graph of its own: its second call would only double the time."""
    estimated_call_us = 5.0 + shape.kv_bytes / 4.0e6
    return max(copies, min(64, max(1, math.ceil(300.0 / estimated_call_us))))


class Nvml:
    """NVML through ctypes: clock slowdowns (the C++ sweep's throttle rule) and clocks."""

    SLOWDOWN = 0x8 | 0x20 | 0x40 | 0x80  # hw slowdown, sw thermal, hw thermal, power brake

    def __init__(self, index):
        self.handle = None
        self.reasons = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
                return
            self.lib, self.handle = lib, handle
            self.reasons = (getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
                            or getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        except (OSError, AttributeError):
            self.handle = None

    def clock_mhz(self, which):
        if self.handle is None:
            return 0
        mhz = ctypes.c_uint(0)
        try:
            return int(mhz.value) if self.lib.nvmlDeviceGetClockInfo(self.handle, ctypes.c_int(which),
                                                                      ctypes.byref(mhz)) == 0 else 0
        except (OSError, AttributeError):
            return 0

    def slowed_down(self):
        if self.handle is None or self.reasons is None:
            return False
        reasons = ctypes.c_ulonglong(0)
        try:
            return self.reasons(self.handle, ctypes.byref(reasons)) == 0 and bool(reasons.value & self.SLOWDOWN)
        except OSError:
            return False


def cuda_driver_version():
    try:
        version = ctypes.c_int(0)
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
            return f"{version.value // 1000}.{(version.value % 1000) // 10}"
    except (OSError, AttributeError):
        pass
    return "unknown"


def nvidia_smi_driver():
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def fa3_version(interface_file):
    folder = os.path.dirname(os.path.abspath(interface_file))
    try:
        for name in sorted(os.listdir(folder)):
            found = re.match(r"fa3_fwd-(.+)\.dist-info$", name)
            if found:
                return found.group(1)
    except OSError:
        pass
    try:
        from importlib import metadata
        return metadata.version("fa3_fwd")
    except Exception:  # noqa: BLE001 - a version is information, not a requirement
        return "unknown"


class Fa3Backend:
    timer = "cuda-graph"

    def __init__(self, args):
        try:
            import torch
        except Exception as error:  # noqa: BLE001 - any failure to import is reported the same way
            raise LoadError(f"cannot import torch: {type(error).__name__}: {error}")
        self.torch = torch
        where = "sys.path"
        if args.fa3_path:
            if not os.path.isdir(args.fa3_path):
                raise LoadError(f"cannot load FlashAttention 3: --fa3-path {args.fa3_path} is not a folder")
            sys.path.insert(0, os.path.abspath(args.fa3_path))
            where = args.fa3_path
        try:
            import fa3_fwd_interface
            self.raw_fwd = torch.ops.fa3_fwd.fwd
            self.flash_attn_with_kvcache = fa3_fwd_interface.flash_attn_with_kvcache
        except BaseException as error:  # noqa: BLE001 - an extension load can raise anything
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            raise LoadError(f"cannot load FlashAttention 3 (import fa3_fwd_interface from {where}): "
                            f"{type(error).__name__}: {error}")
        self.interface_file = fa3_fwd_interface.__file__
        if not torch.cuda.is_available():
            raise LoadError("torch sees no CUDA device")
        if args.device >= torch.cuda.device_count():
            raise LoadError(f"--device {args.device}: torch sees {torch.cuda.device_count()} CUDA devices")
        torch.cuda.set_device(args.device)
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference must be fp32, not TF32
        self.device = torch.device("cuda", args.device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(args.seed)
        self.nvml = Nvml(args.device)
        self.poison = True
        self.graph_via_raw_op = False
        props = torch.cuda.get_device_properties(args.device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.facts = dict(index=args.device, name=props.name, sm_count=int(props.multi_processor_count),
                          l2_bytes=l2 or 60 * 1024 * 1024, memory_bytes=int(props.total_memory),
                          sm_clock_mhz=self.nvml.clock_mhz(1), mem_clock_mhz=self.nvml.clock_mhz(2),
                          driver_version=cuda_driver_version(), cuda_runtime_version=str(torch.version.cuda),
                          compute_capability=f"{props.major}.{props.minor}")
        self.runtime = dict(python=platform.python_version(), torch=torch.__version__, torch_cuda=str(torch.version.cuda),
                            fa3_fwd=fa3_version(self.interface_file), fa3_interface=self.interface_file,
                            fa3_interface_sha256=sha256_file(self.interface_file), nvidia_driver=nvidia_smi_driver(),
                            nvml=self.nvml.handle is not None)

    def open_shape(self, shape, grid_info, args):
        return Fa3Shape(self, shape, grid_info, args)

    def classify(self, error):
        """(status, message) of a failed call; raises ContextLost when the CUDA context is gone."""
        torch = self.torch
        text = f"{type(error).__name__}: {error}".replace("\n", " ")
        if isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in text.lower():
            return "oom", text
        self.raise_if_sticky(error)
        lowered = text.lower()
        if "cuda" in lowered or "captur" in lowered or "graph" in lowered:
            return "launch_failed", text
        if isinstance(error, RuntimeError):
            return "invalid", text  # a TORCH_CHECK in mha_fwd rejected the arguments
        raise UnexpectedError(text)

    def raise_if_sticky(self, error):
        try:
            self.torch.cuda.synchronize()
        except Exception as sticky:  # noqa: BLE001 - whatever it raises, the context is unusable
            raise ContextLost(f"{type(error).__name__}: {error}; then torch.cuda.synchronize: "
                              f"{type(sticky).__name__}: {sticky}")

    def release(self):
        torch = self.torch
        torch.cuda.synchronize()
        reserved = torch.cuda.memory_reserved()
        # Freeing cached blocks costs cudaFree calls; only worth it once the cache crowds the device.
        if reserved > 0.5 * self.facts["memory_bytes"]:
            torch.cuda.empty_cache()


class UnexpectedError(Exception):
    """A failure that is neither FA3's nor CUDA's: most likely a bug in this script."""


class Fa3Shape:
    """One shape's buffers on the GPU: rotating K/V copies, q, the lengths, the fp32 references."""

    def __init__(self, backend, shape, grid_info, args):
        torch = self.torch = backend.torch
        self.backend, self.shape, self.args = backend, shape, args
        b, h, hkv, d = shape.batch, shape.num_heads, shape.num_kv_heads, shape.head_dim
        length, capacity = shape.context_len, shape.cache_capacity
        budget = int(grid_info["memory_budget_gb"] * 1e9)
        copies, allocations, per_alloc, slack = rotation(
            shape, backend.facts["l2_bytes"], float(grid_info["protocol"]["min_working_set_l2_multiple"]), budget,
            args.max_copies)
        self.copies = copies
        token = hkv * d
        elements = (b * capacity + slack) * token
        strides = (capacity * token, token, d, 1)
        kw = dict(dtype=torch.bfloat16, device=backend.device)
        self.k_cap, self.v_cap, self.k_max, self.v_max = [], [], [], []
        for _ in range(allocations):
            # All of it random, not just the real tokens: FA3's last tile reads past a sequence's
            # length and multiplies what it finds by zero probabilities, and 0 x NaN is NaN.
            k = torch.empty(elements, **kw).uniform_(-1, 1, generator=backend.generator)
            v = torch.empty(elements, **kw).uniform_(-1, 1, generator=backend.generator)
            for c in range(per_alloc):
                if len(self.k_cap) == copies:
                    break
                offset = c * length * token
                self.k_cap.append(k.as_strided((b, capacity, hkv, d), strides, offset))
                self.v_cap.append(v.as_strided((b, capacity, hkv, d), strides, offset))
                self.k_max.append(k.as_strided((b, length, hkv, d), strides, offset))
                self.v_max.append(v.as_strided((b, length, hkv, d), strides, offset))
        # Scores q.k / sqrt(d) with a standard deviation of 1: the softmax is far from uniform, so an
        # output that skipped or misplaced tokens differs from the reference.
        self.q = torch.empty(b, 1, h, d, **kw).uniform_(-3, 3, generator=backend.generator)
        self.seqlens = torch.tensor(shape.lengths, dtype=torch.int32, device=backend.device)
        self.scale = d ** -0.5
        self.references = {}
        self.checked_last_copy = False
        self.timed_first = False

    def views(self, kernel):
        return (self.k_max, self.v_max) if kernel == KERNEL_MAXLEN else (self.k_cap, self.v_cap)

    def caller(self, kernel, splits):
        keys, values = self.views(kernel)
        num_splits = splits if kernel == KERNEL_FIXED else 0
        fn, q, seqlens = self.backend.flash_attn_with_kvcache, self.q, self.seqlens

        def call(copy):
            return fn(q, keys[copy], values[copy], cache_seqlens=seqlens, num_splits=num_splits)
        return call

    def raw_caller(self, kernel, splits, out=None):
        """The op flash_attn_with_kvcache calls, with the arguments it passes (mirrored), optionally into
        `out`."""
        keys, values = self.views(kernel)
        num_splits = splits if kernel == KERNEL_FIXED else 0
        op, q, seqlens, scale = self.backend.raw_fwd, self.q, self.seqlens, self.scale

        def call(copy):
            return op(q, keys[copy], values[copy], out=out, seqused_k=seqlens, softmax_scale=scale, is_causal=False,
                      window_size_left=-1, window_size_right=-1, attention_chunk=0, softcap=0.0,
                      is_rotary_interleaved=True, scheduler_metadata=None, num_splits=num_splits, pack_gqa=None,
                      sm_margin=0)
        return call

    def reference(self, copy):
        if copy not in self.references:
            self.references[copy] = reference_attention(self.torch, self.q, self.k_max[copy], self.v_max[copy],
                                                        self.shape.lengths, self.scale)
        return self.references[copy]

    def check(self, kernel, splits):
        """None when FA3's output is right; else why not."""
        torch = self.torch
        copies = [0]
        if not self.checked_last_copy and self.copies > 1:
            copies.append(self.copies - 1)  # the rotating views: one check per shape that they hold the data
        for copy in copies:
            ref = self.reference(copy)
            out = self.caller(kernel, splits)(copy)
            problem = compare_to_reference(torch, out, ref)
            if problem:
                return f"flash_attn_with_kvcache on copy {copy}: {problem}"
            if self.backend.poison:
                poisoned = torch.full_like(out, float("nan"))
                try:
                    self.raw_caller(kernel, splits, out=poisoned)(copy)
                except Exception as error:  # noqa: BLE001 - the public call above worked; our mirror did not
                    self.backend.raise_if_sticky(error)
                    self.backend.poison = False
                    log(f"the NaN-poisoned output check is off from here on: torch.ops.fa3_fwd.fwd(out=...) raised "
                        f"{type(error).__name__}: {error}".replace("\n", " "))
                else:
                    problem = compare_to_reference(torch, poisoned, ref)
                    if problem:
                        return f"raw op into a NaN-poisoned output, copy {copy}: {problem}"
        self.checked_last_copy = True
        return None

    def capture(self, call, calls, stream):
        """A graph of `calls` calls over the copies. torch.cuda.graph() is not used: it runs gc.collect()
        and empty_cache() on every capture, milliseconds per point for nothing here."""
        torch = self.torch
        copies = self.copies
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for copy in range(min(copies, 2)):  # outside capture: lazy initialisation, first-call work
                call(copy)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            graph.capture_begin()
            try:
                for i in range(calls):
                    call(i % copies)
            except BaseException:
                try:
                    graph.capture_end()
                except Exception:  # noqa: BLE001 - the first error is the one to report
                    pass
                raise
            graph.capture_end()
        return graph

    def time(self, kernel, splits, protocol):
        """Per-call samples (us) of `repetitions` graph replays, and whether NVML saw a slowdown."""
        torch = self.torch
        calls = calls_per_graph(self.shape, self.copies)
        stream = torch.cuda.Stream()
        if not self.backend.graph_via_raw_op:
            try:
                graph = self.capture(self.caller(kernel, splits), calls, stream)
            except Exception as error:  # noqa: BLE001 - decided below: FA3's failure or the wrapper's
                if isinstance(error, torch.cuda.OutOfMemoryError) or "captur" not in str(error).lower():
                    raise
                self.backend.raise_if_sticky(error)
                # The wrapper's host-side work (a torch.tensor([]) for absent split buffers) is the only
                # difference from the op it calls; the graph would hold the same kernels.
                self.backend.graph_via_raw_op = True
                log(f"flash_attn_with_kvcache cannot be captured in a CUDA graph here ({type(error).__name__}: "
                    f"{error}); graphs call torch.ops.fa3_fwd.fwd with the same arguments from here on"
                    .replace("\n", " "))
        if self.backend.graph_via_raw_op:
            graph = self.capture(self.raw_caller(kernel, splits), calls, stream)
        try:
            if int(protocol["warmup_replays"]) < 1:
                graph.replay()  # the first replay uploads the graph; never time it
            if not self.timed_first:
                # After a shape's buffers are set up its first replays run slow (bench_peers.py measured
                # up to 13% on the first contender's median): keep the GPU busy for a while first.
                self.timed_first = True
                warm_start = time.perf_counter()
                while time.perf_counter() - warm_start < self.args.shape_warmup_s:
                    graph.replay()
                    torch.cuda.synchronize()
            for _ in range(int(protocol["warmup_replays"])):
                graph.replay()
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            replays = 1
            min_time_s = float(protocol["min_time_s"])
            if min_time_s > 0:
                start.record()
                graph.replay()
                stop.record()
                stop.synchronize()
                replay_s = max(start.elapsed_time(stop) * 1e-3, 1e-9)
                replays = max(1, math.ceil(min_time_s / replay_s))
            samples, slowed = [], False
            for _ in range(int(protocol["repetitions"])):
                start.record()
                for _ in range(replays):
                    graph.replay()
                stop.record()
                stop.synchronize()
                samples.append(start.elapsed_time(stop) * 1000.0 / (calls * replays))
                slowed = slowed or self.backend.nvml.slowed_down()
            return samples, slowed
        finally:
            del graph

    def close(self):
        self.k_cap = self.v_cap = self.k_max = self.v_max = None
        self.q = self.seqlens = None
        self.references = {}
        self.backend.release()


def fa3_block_n(head_dim):
    """FA3's kBlockN on sm90 for non-paged decode (tile_size_fwd_sm90)."""
    return 192 if head_dim <= 64 else 176 if head_dim <= 128 else 128 if head_dim <= 192 else 80


def fake_time_us(shape, kernel, splits, sms=132, bandwidth=3.6e12):
    """A plausible FA3 decode time: waves of (batch x kv_heads x splits) CTAs over the SMs, each
    reading its share of the longest sequence's blocks, plus a launch floor and the combine."""
    block_n = fa3_block_n(shape.head_dim)
    if kernel == KERNEL_FIXED:
        chosen = splits
    else:
        seen = shape.cache_capacity if kernel == KERNEL_CAPACITY else shape.context_len
        ctas = shape.batch * shape.num_kv_heads
        chosen = 1 if ctas >= 0.8 * sms else max(1, min(128, math.ceil(seen / block_n), round(sms / ctas)))
    blocks = math.ceil(shape.context_len / block_n)
    used = max(1, min(chosen, blocks))
    waves = math.ceil(shape.batch * shape.num_kv_heads * used / sms)
    cta_bytes = math.ceil(blocks / used) * block_n * shape.head_dim * 2 * 2
    time_us = 6.0 + waves * cta_bytes / (bandwidth / sms) * 1e6
    if used > 1:
        time_us += 2.0 + shape.batch * shape.num_heads * used * (shape.head_dim + 1) * 4 / 2e12 * 1e6
    return time_us


class FakeBackend:
    """No torch, no GPU: FA3's times from fake_time_us, and faults where --fake-fault asks for them."""

    timer = "fake"

    def __init__(self, args):
        self.args = args
        self.faults = []
        for spec in args.fake_fault:
            pattern, _, kind = spec.rpartition("=")
            if kind not in ("oom", "invalid", "wrong", "launch_failed", "sticky", "throttled", "unexpected") or not pattern:
                raise InputError(f"--fake-fault {spec}: expected SUBSTRING=KIND with KIND one of oom, invalid, wrong, "
                                 "launch_failed, sticky, throttled, unexpected")
            self.faults.append((pattern, kind))
        self.facts = dict(index=args.device, name=args.fake_gpu, sm_count=132, l2_bytes=62914560,
                          memory_bytes=150110011392, sm_clock_mhz=1980, mem_clock_mhz=3201, driver_version="fake",
                          cuda_runtime_version="fake", compute_capability="9.0")
        self.runtime = dict(python=platform.python_version(), torch="none", fa3_fwd="fake", timer="fake")

    def fault(self, key):
        for pattern, kind in self.faults:
            if pattern in key:
                return kind
        return None

    def open_shape(self, shape, grid_info, args):
        return FakeShape(self, shape, grid_info)

    def classify(self, error):
        if isinstance(error, FakeFault):
            return error.status, str(error)
        raise UnexpectedError(f"{type(error).__name__}: {error}")

    def release(self):
        pass


class FakeFault(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class FakeShape:
    def __init__(self, backend, shape, grid_info):
        self.backend, self.shape, self.grid_info = backend, shape, grid_info

    def _fault(self, kernel, splits):
        return self.backend.fault(result_key(kernel, self.shape.key(splits)))

    def check(self, kernel, splits):
        kind = self._fault(kernel, splits)
        if kind == "wrong":
            return "flash_attn_with_kvcache on copy 0: max abs error 1.000e+00 at (b0, h0, d0) exceeds 2.000e-02 (fake)"
        if kind in ("oom", "invalid", "launch_failed"):
            raise FakeFault(kind, f"fake fault: {kind}")
        if kind == "sticky":
            raise ContextLost("fake fault: cudaErrorIllegalAddress: an illegal memory access was encountered")
        if kind == "unexpected":
            raise TypeError("fake fault: a bug in the driver")
        return None

    def time(self, kernel, splits, protocol):
        if self.backend.args.fake_point_s > 0:
            time.sleep(self.backend.args.fake_point_s)
        base = fake_time_us(self.shape, kernel, splits)
        seed = int(hashlib.sha256(result_key(kernel, self.shape.key(splits)).encode()).hexdigest()[:8], 16)
        samples = [base * (1 + 0.004 * (((seed >> (i % 24)) + 7 * i) % 11 - 5) / 5)
                   for i in range(int(protocol["repetitions"]))]
        return samples, self._fault(kernel, splits) == "throttled"

    def close(self):
        pass


# ----------------------------------------------------------------------------------------------
# The sweep


def log(text):
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()


def format_duration(seconds):
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_sha():
    forced = os.environ.get("SPLITKV_GIT_SHA")
    if forced:
        return forced
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=20).stdout.strip()
        if len(sha) != 40:
            return "unknown"
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=20).stdout.strip()
        return sha + "-dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def tool_version(splitkv):
    try:
        done = subprocess.run([splitkv, "--version"], capture_output=True, text=True, timeout=20)
        return done.stdout.strip().split()[-1] if done.returncode == 0 and done.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class StopFlag:
    def __init__(self):
        self.requested = False
        self.reason = ""
        self.first_at = 0.0

    def handler(self, signal_number, frame):
        del frame
        if self.requested:
            # A supervisor forwarding a signal the worker also got from the terminal arrives at once;
            # a person's second Ctrl-C comes later and means "now".
            if time.monotonic() - self.first_at > 1.0:
                signal.signal(signal_number, signal.SIG_DFL)
                os.kill(os.getpid(), signal_number)
            return
        self.requested = True
        self.first_at = time.monotonic()
        self.reason = signal.Signals(signal_number).name


class Sweep:
    def __init__(self, args, plan, grid_info, backend, writer, finished, previous, splitkv, deadline_at, stop):
        self.args, self.plan, self.grid_info, self.backend = args, plan, grid_info, backend
        self.writer, self.finished, self.previous = writer, finished, previous
        self.deadline_at = deadline_at
        self.stop = stop
        self.lock = threading.Lock()
        self.planned = plan.rows()
        self.already = sum(1 for s in plan.shapes for k, n in s.planned() if result_key(k, s.key(n)) in finished)
        self.written = self.ok = self.failed = 0
        self.point_seconds = []
        self.shape_seconds = []
        self.unexpected_in_a_row = 0
        self.last_progress = 0.0
        self.start = time.monotonic()
        self.current = ""
        self.sidecar_path = sidecar_path_for(args.out)
        self.sidecar = self.new_sidecar(splitkv)
        self.done = False

    def new_sidecar(self, splitkv):
        previous = self.previous or {}
        kernels = list(KERNELS) + [k for k in previous.get("kernels", []) if k not in KERNELS]
        grid = dict(path=self.grid_info["path"], sha256=self.grid_info["sha256"], name=self.grid_info["name"])
        if self.grid_info["length_files"]:
            grid["length_files"] = self.grid_info["length_files"]
        pruned = self.plan.pruned_by_reason
        runtime = dict(self.backend.runtime, timer=self.backend.timer, max_copies=self.args.max_copies,
                       graph_call="flash_attn_with_kvcache",
                       shape_warmup_s=self.args.shape_warmup_s, seed=self.args.seed,
                       check=f"fp32 reference, max abs error <= {CHECK_RTOL:g} x max |reference| + {CHECK_ATOL:g}",
                       command=" ".join([os.path.relpath(os.path.abspath(__file__))]
                                        + [a for a in sys.argv[1:] if a != "--worker"]))
        return {
            "schema": SIDECAR_SCHEMA,
            "tool": {"name": "scripts/fa3_sweep.py", "version": tool_version(splitkv)},
            "git_sha": git_sha(),
            "results_csv": self.args.out,
            "grid": grid,
            "kernels": kernels,
            "search": "exhaustive",
            "shard": self.args.shard,
            "memory_budget_gb": self.grid_info["memory_budget_gb"],
            "protocol": self.grid_info["protocol"],
            "device": self.backend.facts,
            "started_at": previous.get("started_at") or now_utc(),
            "finished_at": None,
            "state": "running",
            "message": "",
            "runs": int(previous.get("runs", 0)) + 1,
            "counts": {"planned": self.planned, "ok": 0, "failed": 0, "pruned": sum(pruned.values()),
                       "pruned_by_reason": pruned, "search_skipped": 0},
            "runtime": runtime,
        }

    def write_sidecar(self, state=None, message=None, finished=False):
        with self.lock:
            if getattr(self.backend, "graph_via_raw_op", False):
                self.sidecar["runtime"]["graph_call"] = "torch.ops.fa3_fwd.fwd (flash_attn_with_kvcache did not capture)"
            if state:
                self.sidecar["state"] = state
            if message is not None:
                self.sidecar["message"] = message
            if finished:
                self.sidecar["finished_at"] = now_utc()
            self.sidecar["counts"]["ok"], self.sidecar["counts"]["failed"] = count_file(self.args.out)
            write_json_atomically(self.sidecar_path, self.sidecar)

    def resume_command(self):
        parts = ["python3", "scripts/fa3_sweep.py", "--grid", self.args.grid, "--out", self.args.out, "--resume"]
        if self.args.shard != "0/1":
            parts += ["--shard", self.args.shard]
        if self.args.fa3_path:
            parts += ["--fa3-path", self.args.fa3_path]
        if self.args.splitkv:
            parts += ["--splitkv", self.args.splitkv]
        if self.args.fake_timer:
            parts += ["--fake-timer"]
        return " ".join(parts)

    # -- time keeping

    def expected_point_s(self):
        recent = self.point_seconds[-20:]
        return max(recent) if recent else 0.5

    def expected_shape_s(self):
        recent = self.shape_seconds[-20:]
        return max(recent) if recent else 1.0

    def time_left(self):
        return None if self.deadline_at is None else self.deadline_at - time.time()

    def out_of_time(self, need_s):
        left = self.time_left()
        return left is not None and left < need_s + self.args.deadline_reserve_s

    # -- rows

    def record(self, shape, kernel, splits, status, message="", stats=None):
        row = dict(gpu=self.backend.facts["name"], kernel=kernel, layout=shape.layout, page_size=shape.page_size,
                   dtype=shape.dtype, batch=shape.batch, num_heads=shape.num_heads, num_kv_heads=shape.num_kv_heads,
                   head_dim=shape.head_dim, context_len=shape.context_len, cache_capacity=shape.cache_capacity,
                   length_distribution=shape.length_distribution, num_splits=splits, time_us_median=None,
                   time_us_p10=None, time_us_p90=None, cv=None, repetitions=0, kv_bytes=shape.kv_bytes, tbps=None,
                   status=status, message=message[:600] if message else "")
        if stats and status in ("ok", "throttled"):
            row.update(stats)
            row["tbps"] = shape.kv_bytes / (stats["time_us_median"] * 1e-6) / 1e12
        self.writer.append(row)
        self.written += 1
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1
        self.progress(row, force=status not in ("ok", "skipped"))

    def progress(self, row, force=False):
        now = time.monotonic()
        if not force and now - self.last_progress < self.args.progress_s:
            return
        self.last_progress = now
        done = self.already + self.written
        elapsed = now - self.start
        rate = self.written / elapsed if elapsed > 0 else 0.0
        remaining = self.planned - done
        eta = remaining / rate if rate > 0 else None
        if row["status"] == "ok":
            outcome = f"{row['time_us_median']:.1f} us ({row['tbps']:.2f} TB/s)"
        else:
            outcome = f"{row['status']}: {row['message']}" if row["message"] else row["status"]
        deadline = ""
        if self.deadline_at is not None:
            deadline = f" deadline in {format_duration(self.time_left())}"
        log(f"[{done}/{self.planned}] {100.0 * done / max(1, self.planned):.1f}% {rate:.1f} pt/s ETA "
            f"{format_duration(eta)}{deadline} {row['kernel']} {point_key(row['layout'], row['page_size'], row['dtype'], row['batch'], row['num_heads'], row['num_kv_heads'], row['head_dim'], row['context_len'], row['cache_capacity'], row['length_distribution'], row['num_splits'])} -> {outcome}")

    # -- the loop

    def measure(self, context, kernel, splits):
        """(status, message, stats) of one point; raises ContextLost or Aborted."""
        protocol = self.grid_info["protocol"]
        try:
            problem = context.check(kernel, splits)
            if problem:
                return "invalid", "wrong output: " + problem, None
            stats = None
            for attempt in range(1 + self.args.throttle_retries):
                samples, slowed = context.time(kernel, splits, protocol)
                if not samples or not all(math.isfinite(x) and x > 0 for x in samples):
                    return "launch_failed", "timer returned no finite positive samples", None
                stats = summarize(samples)
                if not slowed:
                    self.unexpected_in_a_row = 0
                    return "ok", "", stats
            self.unexpected_in_a_row = 0
            return "throttled", "NVML reported a thermal/hardware clock slowdown while timing", stats
        except ContextLost:
            raise
        except Exception as error:  # noqa: BLE001 - every failure of a point becomes its row
            return self.failure(error)

    def failure(self, error):
        try:
            status, message = self.backend.classify(error)
            self.unexpected_in_a_row = 0
            return status, message, None
        except UnexpectedError as unexpected:
            self.unexpected_in_a_row += 1
            if self.unexpected_in_a_row >= MAX_UNEXPECTED_IN_A_ROW:
                raise Aborted(f"{MAX_UNEXPECTED_IN_A_ROW} points in a row failed in this script's own code, the "
                              f"last with {unexpected}")
            return "launch_failed", f"unexpected {unexpected}", None

    def run_shape(self, shape):
        pending = [(k, n) for k, n in shape.planned() if result_key(k, shape.key(n)) not in self.finished]
        if not pending:
            return True
        reason = shape.unsupported()
        if reason:
            for kernel, splits in pending:
                self.record(shape, kernel, splits, "skipped", reason)
            return True
        if self.out_of_time(self.expected_shape_s() + self.expected_point_s()):
            return False
        self.current = shape.shape_key()
        shape_start = time.monotonic()
        try:
            context = self.backend.open_shape(shape, self.grid_info, self.args)
        except Exception as error:  # noqa: BLE001 - a shape that cannot be set up fails all its points
            try:
                if isinstance(error, ContextLost):
                    raise
                status, message, _ = self.failure(error)
            except ContextLost as lost:
                for kernel, splits in pending:
                    self.record(shape, kernel, splits, "launch_failed",
                                f"setting up the shape: the CUDA context was lost: {lost}")
                raise
            for kernel, splits in pending:
                self.record(shape, kernel, splits, status, f"setting up the shape: {message}")
            self.release_quietly(self.backend.release)
            return True
        self.shape_seconds.append(time.monotonic() - shape_start)
        lost = False
        try:
            for kernel, splits in pending:
                if self.stop.requested:
                    return False
                if self.out_of_time(self.expected_point_s() * 1.5):
                    return False
                self.current = result_key(kernel, shape.key(splits))
                point_start = time.monotonic()
                try:
                    status, message, stats = self.measure(context, kernel, splits)
                except ContextLost as error:
                    lost = True
                    self.record(shape, kernel, splits, "launch_failed", f"the CUDA context was lost: {error}")
                    raise
                self.point_seconds.append(time.monotonic() - point_start)
                self.record(shape, kernel, splits, status, message, stats)
        finally:
            if not lost:  # a lost context cannot free anything; the process is leaving
                self.release_quietly(context.close)
        return True

    def release_quietly(self, free):
        """Frees a shape's memory; a failure there is a CUDA error like any other (ContextLost when the
        context is gone), or, being only cleanup, nothing to record."""
        try:
            free()
        except ContextLost:
            raise
        except Exception as error:  # noqa: BLE001 - freeing may fail after a device error
            try:
                self.backend.classify(error)
            except UnexpectedError:
                pass

    def run(self):
        """Returns (state, message, exit code)."""
        for shape in self.plan.shapes:
            if self.stop.requested:
                break
            if not self.run_shape(shape):
                if self.stop.requested:
                    break
                return ("interrupted", f"stopped before the deadline with {self.written} rows written to "
                        f"{self.args.out}; run again with --resume to continue", EXIT_DEADLINE)
        if self.stop.requested:
            return ("interrupted", f"interrupted by {self.stop.reason}; {self.written} rows are saved in "
                    f"{self.args.out}; run again with --resume to continue", EXIT_INTERRUPTED)
        return "complete", "", EXIT_OK

    def watchdog(self):
        """Past the deadline (plus grace) with a point still in flight: record the state and leave,
        before the device tool's hard limit takes the process without a word."""
        if self.deadline_at is None:
            return None

        def fire():
            if self.done:
                return
            try:
                self.write_sidecar("interrupted", f"a point overran the deadline ({self.current}); {self.written} rows "
                                   f"are saved in {self.args.out}; run again with --resume to continue", finished=True)
            finally:
                log(f"the deadline passed inside {self.current}; leaving (rows so far are saved)")
                os._exit(EXIT_DEADLINE)
        timer = threading.Timer(max(0.0, self.deadline_at + self.args.deadline_grace_s - time.time()), fire)
        timer.daemon = True
        timer.start()
        return timer


def run_worker(args, deadline_at):
    # From the start, so a signal while torch loads still ends in a clean stop rather than a traceback.
    stop = StopFlag()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, stop.handler)
    shard = args.shard
    splitkv = find_splitkv(args.splitkv)
    grid_info = read_grid_info(args.grid)
    plan = load_plan(splitkv, args.grid, shard)
    results, previous = check_output(args.out, args.resume, grid_info, shard)
    backend = FakeBackend(args) if args.fake_timer else Fa3Backend(args)
    gpu = backend.facts["name"]
    if previous and previous.get("device", {}).get("name") not in (None, gpu):
        raise InputError(f"{sidecar_path_for(args.out)}: measured on \"{previous['device']['name']}\", this device is "
                         f"\"{gpu}\"; write to a new --out for another GPU")
    for row, line in zip(results.rows, results.lines):
        if row["gpu"] != gpu:
            raise InputError(f"{args.out}:{line}: holds rows measured on \"{row['gpu']}\", this device is \"{gpu}\"; "
                             "write to a new --out for another GPU")
    writer = RowWriter(args.out, args.resume)
    try:
        if writer.truncated:
            log(f"{args.out}:{writer.truncated[1]}: cut off a torn last line ({len(writer.truncated[2])} bytes)")
        sweep = Sweep(args, plan, grid_info, backend, writer, finished_keys(results), previous, splitkv, deadline_at,
                      stop)
        remove_stale_temporaries(sweep.sidecar_path)
        if sweep.already:
            log(f"resume: {args.out} holds {len(results.rows)} rows; {sweep.already} of the {sweep.planned} planned rows "
                f"are done, {sweep.planned - sweep.already} left")
        log(f"{len(plan.shapes)} shapes, {sweep.planned} rows planned (shard {shard}) on {gpu}, timer {backend.timer}"
            + (f", deadline in {format_duration(sweep.time_left())}" if deadline_at is not None else ""))
        sweep.write_sidecar("running")
        timer = sweep.watchdog()
        code = EXIT_OK
        try:
            with NoGrad(backend):
                state, message, code = sweep.run()
        except ContextLost as lost:
            state, code = "aborted", EXIT_CONTEXT_LOST
            message = (f"the CUDA context was lost at {sweep.current}: {lost}; {sweep.written} rows are saved in "
                       f"{args.out}; a fresh process continues with --resume")
        except Aborted as aborted:
            state, code = "aborted", EXIT_FAILED
            message = f"stopped at {sweep.current}: {aborted}; fix the cause and run again with --resume"
        sweep.done = True
        if timer:
            timer.cancel()
        sweep.write_sidecar(state, message, finished=True)
        log(f"{state}: {sweep.written} rows written ({sweep.ok} ok, {sweep.failed} failed), {sweep.already} already "
            f"done, in {format_duration(time.monotonic() - sweep.start)}")
        if message:
            log(message)
        if state != "complete" and code != EXIT_CONTEXT_LOST:
            log(f"resume with: {sweep.resume_command()}")
        return code
    finally:
        writer.close()


class NoGrad:
    """torch.no_grad() for the real backend, nothing for the fake one."""

    def __init__(self, backend):
        self.inner = backend.torch.no_grad() if hasattr(backend, "torch") else None

    def __enter__(self):
        if self.inner is not None:
            self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        if self.inner is not None:
            return self.inner.__exit__(*exc)
        return False


# Costs behind --estimate, on an H200 from Python: host time to capture one FA3 call (the custom op's
# Python dispatch and mha_fwd's host work), a call's floor on the GPU (prepare, split and combine
# kernels back to back), the fixed work of a point (eager warm-up, two checked calls, instantiation,
# synchronisations) and of a shape besides its fill and references.
ESTIMATE_CAPTURE_S_PER_CALL = 120e-6
ESTIMATE_CALL_FLOOR_US = 8.0
ESTIMATE_POINT_S = 4e-3
ESTIMATE_SHAPE_S = 10e-3
ESTIMATE_TBPS = 3.5


def estimate_seconds(shape, grid_info, max_copies, shape_warmup_s, l2_bytes=62914560):
    """(setup seconds, seconds per planned row) of one shape."""
    protocol = grid_info["protocol"]
    copies, allocations, _, slack = rotation(shape, l2_bytes, float(protocol["min_working_set_l2_multiple"]),
                                             int(grid_info["memory_budget_gb"] * 1e9), max_copies)
    calls = calls_per_graph(shape, copies)
    filled = allocations * (shape.batch * shape.cache_capacity + slack) * shape.num_kv_heads * shape.head_dim * 4
    setup = ESTIMATE_SHAPE_S + filled / 1.5e12 + 2 * shape.kv_bytes * 4 / 1.0e12 + shape_warmup_s
    call_us = max(ESTIMATE_CALL_FLOOR_US, 3.0 + shape.working_set[shape.splits[-1]] / (ESTIMATE_TBPS * 1e6))
    replays = max(1, int(protocol["warmup_replays"])) + int(protocol["repetitions"])
    per_row = ESTIMATE_POINT_S + calls * ESTIMATE_CAPTURE_S_PER_CALL + replays * calls * call_us * 1e-6
    return setup, per_row


def estimate(args):
    """A rough device time of the plan (the costs above; trust the ranking of grids more than the minutes)."""
    splitkv = find_splitkv(args.splitkv)
    grid_info = read_grid_info(args.grid)
    plan = load_plan(splitkv, args.grid, args.shard)
    supported = [s for s in plan.shapes if not s.unsupported()]
    setup = rows_s = 0.0
    for shape in supported:
        shape_s, row_s = estimate_seconds(shape, grid_info, args.max_copies, args.shape_warmup_s)
        setup += shape_s
        rows_s += row_s * len(shape.planned())
    rows = sum(len(s.planned()) for s in supported)
    total = setup + rows_s
    print(f"grid      {args.grid} shard {args.shard}: {len(plan.shapes)} shapes ({len(supported)} FA3 can run), "
          f"{plan.rows()} rows ({plan.rows() - 2 * len(plan.shapes)} fixed-split points + 2 policy rows per shape)")
    print(f"estimate  ~{total / 60:.1f} min on one H200 ({setup / 60:.1f} min setting up shapes, {rows_s / 60:.1f} min "
          f"timing rows, {rows_s / max(1, rows) * 1e3:.1f} ms per row)")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# Supervision and the command line


def supervise(args, argv, deadline_at):
    """Runs the sweep in a child process and starts a fresh one (with --resume) when a sticky CUDA error
    took the child's context, while time and --max-restarts last."""
    extra = ["--worker"]
    if deadline_at is not None:
        extra += ["--deadline-at", repr(deadline_at)]
    child = {"process": None}
    stopping = {"value": False}

    def forward(signal_number, frame):
        del frame
        stopping["value"] = True
        if child["process"] is not None and child["process"].poll() is None:
            child["process"].send_signal(signal_number)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, forward)
    restarts = 0
    while True:
        command = [sys.executable, os.path.abspath(__file__)] + argv + extra
        child["process"] = subprocess.Popen(command)
        code = child["process"].wait()
        if code < 0:
            return 128 - code  # killed by a signal, as a shell reports it
        if code != EXIT_CONTEXT_LOST:
            return code
        left = None if deadline_at is None else deadline_at - time.time()
        if stopping["value"] or restarts >= args.max_restarts or (left is not None and left < args.restart_min_s):
            log(f"not restarting after the lost CUDA context ({restarts} restarts so far, "
                f"{'no deadline' if left is None else format_duration(left) + ' left'}); resume with --resume")
            return EXIT_FAILED
        restarts += 1
        log(f"the CUDA context was lost; restart {restarts} of {args.max_restarts} in a fresh process, with --resume")
        if "--resume" not in extra:
            extra.append("--resume")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", required=True, help="grid JSON (tuner/GRID_SCHEMA.md), e.g. sweeps/fa3.json")
    parser.add_argument("--out", help="results CSV to append to (tuner/CSV_SCHEMA.md); its folder must exist; the "
                        "sidecar goes next to it. Required unless --estimate")
    parser.add_argument("--resume", action="store_true", help="continue a sweep into an --out that holds rows: final "
                        "rows are skipped, a torn last line is cut off. Without it a non-empty --out is refused")
    parser.add_argument("--shard", default="0/1", help="time shard i of N (i/N): the planner's round-robin over shapes")
    parser.add_argument("--deadline-s", type=float, help="stop cleanly this many seconds after the start, before a "
                        "point that would not finish in time (exit 75, resumable)")
    parser.add_argument("--deadline-at", type=float, help="the same deadline as a Unix time (e.g. $(( $(date +%%s) + "
                        "570 ))): counts the build and the smoke run before the sweep too")
    parser.add_argument("--deadline-reserve-s", type=float, default=8.0, help="seconds kept free before the deadline "
                        "for the sidecar and the process exit (default 8)")
    parser.add_argument("--deadline-grace-s", type=float, default=4.0, help="a point still running this long after the "
                        "deadline ends the process, sidecar written first (default 4)")
    parser.add_argument("--fa3-path", help="folder where the fa3_fwd wheel was unpacked (python3 -m zipfile -e "
                        "WHEEL FOLDER); default: import fa3_fwd_interface from sys.path")
    parser.add_argument("--splitkv", help="the splitkv binary that plans the grid; default $SPLITKV_BIN, "
                        "build-dev/cli/splitkv, build/cli/splitkv, then PATH")
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    parser.add_argument("--max-copies", type=int, default=256, help="cap on rotating K/V copies, i.e. calls per graph "
                        "(default 256: capture costs ~0.1 ms of host time per call; the cap binds only for shapes "
                        "under ~0.7 MB, whose time is launch latency rather than bytes)")
    parser.add_argument("--shape-warmup-s", type=float, default=0.02, help="busy replays before a shape's first timed "
                        "point (default 0.02)")
    parser.add_argument("--throttle-retries", type=int, default=1, help="a throttled point is timed again this many "
                        "times before its row says throttled (default 1)")
    parser.add_argument("--max-restarts", type=int, default=3, help="fresh processes after lost CUDA contexts (default 3)")
    parser.add_argument("--restart-min-s", type=float, default=30.0, help="no restart with less time than this left "
                        "before the deadline (default 30)")
    parser.add_argument("--no-restart", action="store_true", help="run in this process, without a supervisor")
    parser.add_argument("--progress-s", type=float, default=5.0, help="seconds between progress lines (default 5; "
                        "failures are always printed)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random K/V/q (default 0)")
    parser.add_argument("--estimate", action="store_true", help="print the plan's size and a rough H200 time; time "
                        "nothing")
    parser.add_argument("--fake-timer", action="store_true", help="no torch, no GPU: fake FA3's times (tests)")
    parser.add_argument("--fake-gpu", default="NVIDIA H200", help="the gpu column of --fake-timer rows")
    parser.add_argument("--fake-point-s", type=float, default=0.0, help="--fake-timer: seconds each point takes")
    parser.add_argument("--fake-fault", action="append", default=[], metavar="SUBSTRING=KIND",
                        help="--fake-timer: fail the points whose 'kernel key' contains SUBSTRING; KIND: oom, invalid, "
                        "wrong, launch_failed, sticky (the context is lost), throttled, unexpected")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    found = re.fullmatch(r"(\d+)/(\d+)", args.shard)
    if not found or int(found.group(2)) < 1 or int(found.group(1)) >= int(found.group(2)):
        parser.error(f"--shard {args.shard}: expected i/N with 0 <= i < N, e.g. 0/2")
    args.shard = f"{int(found.group(1))}/{int(found.group(2))}"
    if not args.estimate and not args.out:
        parser.error("--out is required unless --estimate")
    if args.max_copies < 1:
        parser.error("--max-copies must be at least 1")
    if args.fake_fault and not args.fake_timer:
        parser.error("--fake-fault needs --fake-timer")
    return args


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    started = time.time()
    args = parse_args(argv)
    deadline_at = args.deadline_at
    if deadline_at is None and args.deadline_s is not None:
        deadline_at = started + args.deadline_s
    try:
        if args.estimate:
            return estimate(args)
        if args.worker or args.no_restart:
            code = run_worker(args, deadline_at)
            if code == EXIT_CONTEXT_LOST:
                # Everything is on disk. Interpreter shutdown would now free CUDA memory in a dead
                # context, and an abort there would hide this exit code from the supervisor.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(EXIT_CONTEXT_LOST if args.worker else EXIT_FAILED)
            return code
        return supervise(args, argv, deadline_at)
    except InputError as error:
        log(str(error))
        return EXIT_BAD_INPUT
    except LoadError as error:
        log(str(error))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
