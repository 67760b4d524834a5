#!/usr/bin/env python3
"""fp8 (e4m3) KV cache decode on one GPU: splitkv's fp8 kernel against FlashAttention 3's.

    python3 scripts/bench_fp8_peers.py --lib build/kernels/libsplitkv_c.so \\
        --heuristic-lib build/heuristics/libsplitkv_heuristics_c.so --fa3-path /tmp/fa3 \\
        --out results/h200/peers_fp8.csv
    python3 scripts/bench_fp8_peers.py --summarize results/h200/peers_fp8.csv   # no torch, no GPU

Both kernels read the same e4m3 codes of a contiguous cache [batch, capacity, kv_heads, head_dim]
with fp32 descales per (sequence, kv head), FA3's `(batch, num_kv_heads)` k_descale / v_descale.
What differs is the query: splitkv takes it in bf16; FlashAttention 3's fp8 kernel needs q in e4m3
as well (it has no mixed bf16 x fp8 path), so FA3 gets the same query quantized per (sequence, kv
head) with its q_descale. Its output is checked against an fp32 reference of its own quantized
query, ours against the bf16 one: each is held to what it was asked to compute.

Contenders, per shape:
  splitkv_fp8_heuristic  our fp8 kernel at the split count of the compiled-in table for this GPU and
                         the fp8 cache (splitkv_num_splits_kv_dtype)
  splitkv_fp8_auto       num_splits = auto, the table's choice looked up on the device
  splitkv_fp8_best       the fastest fixed count (search rows: splitkv_fp8_split_search)
  fa3_fp8_heuristic      flash_attn_with_kvcache(num_splits=0): FA3's own choice, its default
  fa3_fp8_best           FA3's fastest fixed count (search rows: fa3_fp8_split_search)

Timing is scripts/bench_peers.py's (time_graph): R calls in one CUDA graph over rotating K/V copies
(working set >= 3x L2), replayed untimed for >= 20 ms, then the median of 15 replays, with p10/p90.
Before a contender is timed its output goes to a tensor poisoned with NaN (ours: the out buffer; FA3:
the raw op's `out=`) and is compared with the fp32 reference of the dequantized inputs; relative error
(max |out - ref| / max |ref|) above 2e-2 is recorded as `wrong`.

Only what the FA3 wheel runs is timed here: contiguous caches (it has no paged KV). The fp8 kernel's
paged layout is measured against our bf16 kernel by `decode_kernel_bench` (kernels/DESIGN.md).
cuDNN has no fp8-KV decode through torch's SDPA (it takes one dtype for q, k and v, and no descales),
so it is not a contender.

The CSV's columns are bench_peers.py's plus kv_dtype; kv_bytes counts the e4m3 codes (one byte per
element). A JSON sidecar beside it says what ran, where and when. --summarize writes the markdown
comparison (default results/<gpu>/report/fp8_peers.md beside the CSV's folder) from a committed CSV.
"""
import argparse
import csv
import ctypes
import datetime
import math
import os
import sys
import traceback
import types

SPLITKV_KV_DTYPE_FP8_E4M3 = 1
SPLITKV_DTYPE_BF16 = 0
# Largest e4m3 magnitude; codes are scaled so each (sequence, kv head) uses the whole range.
E4M3_MAX = 448.0
CHECK_RTOL = 2e-2
FIELDS = ["gpu", "group", "kv_dtype", "batch", "num_heads", "num_kv_heads", "head_dim", "context_len",
          "cache_capacity", "contender", "num_splits", "time_us_median", "time_us_p10", "time_us_p90", "kv_bytes",
          "tbps", "max_rel_error", "status", "message"]
SEARCH_CONTENDERS = ("splitkv_fp8_split_search", "fa3_fp8_split_search")
torch = None


# bench_peers.py's timing, checks, library handle and sidecar; its import_script loads the other
# sibling scripts (scripts/ is not a package).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers as bench  # noqa: E402


class Shape:
    def __init__(self, group, batch, num_heads, num_kv_heads, context_len, head_dim=128):
        self.group, self.batch, self.num_heads, self.num_kv_heads = group, batch, num_heads, num_kv_heads
        self.context_len, self.head_dim, self.capacity = context_len, head_dim, context_len

    def kv_bytes(self):  # K + V e4m3 codes
        return 2 * self.batch * self.context_len * self.num_kv_heads * self.head_dim

    def label(self):
        return f"B{self.batch} {self.num_heads}/{self.num_kv_heads} d{self.head_dim} L{self.context_len}"


def shapes():
    out = [Shape("llama_gqa", b, 32, 8, L) for b in (1, 4, 16, 64) for L in (1024, 4096, 16384, 65536)]
    # The rest of tuner/bench/fp8_bandwidth_shapes.csv, the shapes the fp8 vs bf16 targets are set on.
    out += [Shape("bandwidth", 32, 32, 8, 32768), Shape("bandwidth", 128, 32, 8, 16384)]
    out += [Shape("head_dim", b, 32, 8, 8192, head_dim=d) for d in (64, 256) for b in (1, 16)]
    out += [Shape("mha", 16, 32, 32, 4096), Shape("mha", 1, 32, 32, 32768)]
    return out


class Buffers:
    """`copies` e4m3 caches with their descales, the bf16 query and FA3's e4m3 query."""

    def __init__(self, s, l2_bytes, generator):
        self.copies = max(1, min(64, math.ceil(3 * l2_bytes / max(1, s.kv_bytes()))))
        dims = (s.batch, s.capacity, s.num_kv_heads, s.head_dim)
        self.k, self.v, self.k_descale, self.v_descale = [], [], [], []
        for _ in range(self.copies):
            for codes, descales in ((self.k, self.k_descale), (self.v, self.v_descale)):
                # Normal values per (sequence, kv head) with their own spread, quantized to the full e4m3
                # range: the descale carries the spread, as a serving engine's per-head scales do.
                spread = torch.empty(s.batch, 1, s.num_kv_heads, 1, device="cuda").uniform_(0.5, 2.0,
                                                                                            generator=generator)
                values = torch.randn(dims, device="cuda", generator=generator) * spread
                amax = values.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-6)
                codes.append((values * (E4M3_MAX / amax)).to(torch.float8_e4m3fn))
                descales.append((amax / E4M3_MAX).reshape(s.batch, s.num_kv_heads).contiguous())
                del values
        self.q = torch.empty(s.batch, s.num_heads, s.head_dim, device="cuda").uniform_(
            -3, 3, generator=generator).to(torch.bfloat16)
        group = s.num_heads // s.num_kv_heads
        grouped = self.q.float().view(s.batch, s.num_kv_heads, group, s.head_dim)
        q_amax = grouped.abs().amax(dim=(2, 3)).clamp_min(1e-6)  # [B, Hkv]: FA3's q_descale shape
        self.q_descale = (q_amax / E4M3_MAX).contiguous()
        self.q_fp8 = (grouped / self.q_descale[:, :, None, None]).to(torch.float8_e4m3fn).view(
            s.batch, 1, s.num_heads, s.head_dim)
        self.out = torch.empty_like(self.q)
        self.seqlens = torch.full((s.batch,), s.context_len, device="cuda", dtype=torch.int32)


def reference(s, buffers, q):
    """fp32 attention of q [B, H, D] (float) on copy 0's dequantized cache, a few sequences at a time."""
    group = s.num_heads // s.num_kv_heads
    out = torch.empty(s.batch, s.num_heads, s.head_dim, device="cuda")
    per_sequence = 2 * s.context_len * s.num_kv_heads * s.head_dim * 4
    step = max(1, int(4e9 // per_sequence))
    for b0 in range(0, s.batch, step):
        b1 = min(s.batch, b0 + step)
        k = (buffers.k[0][b0:b1].float() * buffers.k_descale[0][b0:b1, None, :, None]).transpose(1, 2)
        v = (buffers.v[0][b0:b1].float() * buffers.v_descale[0][b0:b1, None, :, None]).transpose(1, 2)
        qg = q[b0:b1].view(b1 - b0, s.num_kv_heads, group, s.head_dim)
        scores = torch.matmul(qg, k.transpose(-1, -2)) / math.sqrt(s.head_dim)
        out[b0:b1] = torch.matmul(torch.softmax(scores, dim=-1), v).reshape(b1 - b0, s.num_heads, s.head_dim)
        del k, v, scores
    return out


def relative_error(out, ref):
    return ((out.float().reshape(ref.shape) - ref).abs().max() / ref.abs().max()).item()


class Splitkv(bench.Splitkv):
    """bench_peers.py's handle on our libraries plus the fp8 entry points: the call with a KV dtype
    and the table lookups by KV cache (the compiled-in fp8 table)."""

    def __init__(self, lib_path, heuristic_path):
        super().__init__(lib_path, heuristic_path)
        f = self.lib.splitkv_decode_attention_kv_dtype
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_int] * 12 + [ctypes.c_float] + [ctypes.c_void_p] * 13
        h = self.heuristic
        if not hasattr(h, "splitkv_num_splits_kv_dtype"):
            raise RuntimeError(f"{heuristic_path}: no splitkv_num_splits_kv_dtype (a library older than the fp8 tables)")
        h.splitkv_num_splits_kv_dtype.restype = ctypes.c_int
        h.splitkv_num_splits_kv_dtype.argtypes = [ctypes.c_char_p] + [ctypes.c_int] * 9
        h.splitkv_auto_splits_table_kv_dtype.restype = ctypes.c_int
        h.splitkv_auto_splits_table_kv_dtype.argtypes = [ctypes.c_char_p] + [ctypes.c_int] * 6 + [
            ctypes.c_void_p, ctypes.c_int]

    def choose(self, s, gpu, sms):
        return self.heuristic.splitkv_num_splits_kv_dtype(gpu.encode(), sms, SPLITKV_KV_DTYPE_FP8_E4M3, s.batch,
                                                          s.num_heads, s.num_kv_heads, s.head_dim, s.context_len,
                                                          s.capacity, 0)

    def caller(self, s, buffers, splits, auto_table=None):
        workspace = self.workspace.data_ptr() if self._ensure_workspace(s, splits) else None

        def call(copy):
            rc = self.lib.splitkv_decode_attention_kv_dtype(
                0, SPLITKV_DTYPE_BF16, SPLITKV_KV_DTYPE_FP8_E4M3, s.batch, s.num_heads, s.num_kv_heads, s.head_dim,
                s.capacity, 0, 0, 0, splits, 0.0, buffers.q.data_ptr(), buffers.k[copy].data_ptr(),
                buffers.v[copy].data_ptr(), buffers.k_descale[copy].data_ptr(), buffers.v_descale[copy].data_ptr(),
                buffers.seqlens.data_ptr(), None, buffers.out.data_ptr(), None, workspace,
                auto_table, None, torch.cuda.current_stream().cuda_stream)
            if rc != 0:
                raise RuntimeError(self.lib.splitkv_last_error().decode())
            return buffers.out
        return call

    def auto_caller(self, s, buffers, gpu, sms):
        table = (ctypes.c_ubyte * self.auto_table_bytes)()
        rc = self.heuristic.splitkv_auto_splits_table_kv_dtype(gpu.encode(), sms, SPLITKV_KV_DTYPE_FP8_E4M3,
                                                               s.num_heads, s.num_kv_heads, s.head_dim, 0, table,
                                                               self.auto_table_bytes)
        if rc != 0:
            raise RuntimeError("splitkv_auto_splits_table_kv_dtype failed")
        device_table, bound = self.upload_auto_table(table, s)
        return self.caller(s, buffers, bound, device_table), bound


class Fa3:
    def __init__(self, path):
        sweep = bench.import_script("fa3_sweep")
        self.backend = sweep.Fa3Backend(types.SimpleNamespace(fa3_path=path, device=torch.cuda.current_device(),
                                                              seed=0))
        self.poison = True

    def runtime(self):
        return self.backend.runtime

    def caller(self, s, buffers, splits, out=None):
        """num_splits=0 is FA3's heuristic. out: the raw op into that tensor (the poisoned check)."""
        q = buffers.q_fp8
        scale = s.head_dim ** -0.5
        public, raw = self.backend.flash_attn_with_kvcache, self.backend.raw_fwd

        def call(copy):
            k, v = buffers.k[copy], buffers.v[copy]
            kd, vd = buffers.k_descale[copy], buffers.v_descale[copy]
            if out is None:
                return public(q, k, v, cache_seqlens=buffers.seqlens, q_descale=buffers.q_descale, k_descale=kd,
                              v_descale=vd, num_splits=splits)
            return raw(q, k, v, out=out, seqused_k=buffers.seqlens, q_descale=buffers.q_descale, k_descale=kd,
                       v_descale=vd, softmax_scale=scale, is_causal=False, window_size_left=-1,
                       window_size_right=-1, attention_chunk=0, softcap=0.0, is_rotary_interleaved=True,
                       scheduler_metadata=None, num_splits=splits, pack_gqa=None, sm_margin=0)[0]
        return call

    def checked_output(self, s, buffers, splits):
        """FA3's output, through the raw op into a NaN-poisoned tensor while that works."""
        if self.poison:
            poisoned = torch.full((s.batch, 1, s.num_heads, s.head_dim), float("nan"), dtype=torch.bfloat16,
                                  device="cuda")
            try:
                self.caller(s, buffers, splits, out=poisoned)(0)
                torch.cuda.synchronize()
                return poisoned
            except Exception as e:  # noqa: BLE001 - fall back to the public call's output
                torch.cuda.synchronize()
                self.poison = False
                print(f"fa3: the NaN-poisoned check is off from here on: {type(e).__name__}: {e}"
                      .replace("\n", " ")[:300], flush=True)
        return self.caller(s, buffers, splits)(0)


def split_candidates(s, tokens_per_block):
    blocks = math.ceil(s.context_len / tokens_per_block)
    return [c for c in bench.SPLIT_CANDIDATES if c <= max(1, blocks)]


def run(args):
    props = torch.cuda.get_device_properties(0)
    gpu, sms, l2 = props.name, props.multi_processor_count, props.L2_cache_size
    ours = Splitkv(args.lib, args.heuristic_lib)
    extra = {"splitkv_table": "fp8 dispatch"}  # splitkv_num_splits_kv_dtype: the GPU's table for fp8 caches
    fa3 = fa3_error = None
    try:
        fa3 = Fa3(args.fa3_path)
        extra["fa3"] = fa3.runtime()
    except Exception as e:  # noqa: BLE001 - the FA3 rows say why; ours still run
        fa3_error = f"FlashAttention 3 did not load: {type(e).__name__}: {e}".replace("\n", " ")[:300]
        extra["fa3"] = {"error": fa3_error}
        print(f"bench_fp8_peers.py: {fa3_error}", file=sys.stderr, flush=True)
    generator = torch.Generator(device="cuda").manual_seed(0)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    state = "complete"
    try:
        with open(args.out, "w", newline="") as out_file:
            writer = csv.DictWriter(out_file, fieldnames=FIELDS)
            writer.writeheader()
            for s in shapes():
                torch.cuda.empty_cache()
                buffers = Buffers(s, l2, generator)
                ref_ours = reference(s, buffers, buffers.q.float())
                q_fa3 = (buffers.q_fp8.float().view(s.batch, s.num_kv_heads, -1, s.head_dim) *
                         buffers.q_descale[:, :, None, None]).reshape(s.batch, s.num_heads, s.head_dim)
                ref_fa3 = reference(s, buffers, q_fa3)
                run_shape(s, buffers, ref_ours, ref_fa3, ours, fa3, fa3_error, gpu, sms, writer, out_file)
                buffers = None
    except KeyboardInterrupt:
        state = "interrupted"
    write_sidecar(args, gpu, sms, l2, started, state, extra)


def run_shape(s, buffers, ref_ours, ref_fa3, ours, fa3, fa3_error, gpu, sms, writer, out_file):
    summary = {}

    def new_row(contender, splits=""):
        return dict(gpu=gpu, group=s.group, kv_dtype="fp8_e4m3", batch=s.batch, num_heads=s.num_heads,
                    num_kv_heads=s.num_kv_heads, head_dim=s.head_dim, context_len=s.context_len,
                    cache_capacity=s.capacity, contender=contender, num_splits=splits, kv_bytes=s.kv_bytes(),
                    status="ok", message="")

    def write(row):
        writer.writerow(row)
        out_file.flush()
        if row["contender"] not in SEARCH_CONTENDERS:
            summary[row["contender"]] = row.get("time_us_median") or row["status"]
        return row

    def record(contender, call, splits, checked_output, ref):
        row = new_row(contender, splits)
        try:
            err = relative_error(checked_output(), ref)
            row["max_rel_error"] = f"{err:.3e}"
            if not err <= CHECK_RTOL:  # NaN (an unwritten element) fails too
                row["status"], row["message"] = "wrong", f"relative error {err:.3e} against the fp32 reference"
            med, p10, p90 = bench.time_graph(call, buffers.copies)
            row.update(time_us_median=f"{med:.3f}", time_us_p10=f"{p10:.3f}", time_us_p90=f"{p90:.3f}",
                       tbps=f"{s.kv_bytes() / med / 1e6:.4f}")
        except Exception as e:  # noqa: BLE001 - a contender that cannot run a shape is a row, not a crash
            torch.cuda.synchronize()
            row["status"], row["message"] = "error", f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
        return write(row)

    def ours_checked(call):
        def output():
            buffers.out.fill_(float("nan"))
            call(0)
            torch.cuda.synchronize()
            return buffers.out
        return output

    def search(contender, best_name, candidates, make_call, checked_output, ref):
        best = None
        for splits in candidates:
            row = record(contender, make_call(splits), splits, lambda: checked_output(splits), ref)
            if row["status"] == "ok" and (best is None or float(row["time_us_median"]) < float(best["time_us_median"])):
                best = row
        if best is not None:
            write(dict(best, contender=best_name))
        else:
            write(dict(new_row(best_name), status="error", message="no split count timed ok"))

    # The policies first and back to back, then the searches (bench_peers.py says why).
    choice = ours.choose(s, gpu, sms)
    call = ours.caller(s, buffers, choice)
    record("splitkv_fp8_heuristic", call, choice, ours_checked(call), ref_ours)
    if fa3_error:
        for name in ("fa3_fp8_heuristic", "fa3_fp8_best"):
            write(dict(new_row(name), status="error", message=fa3_error))
    else:
        record("fa3_fp8_heuristic", fa3.caller(s, buffers, 0), "",
               lambda: fa3.checked_output(s, buffers, 0), ref_fa3)
    auto_call, bound = ours.auto_caller(s, buffers, gpu, sms)
    record("splitkv_fp8_auto", auto_call, "auto", ours_checked(auto_call), ref_ours)
    if not fa3_error:
        # One block of keys per split at most: FA3's fp8 tiles are >= 128 tokens at these head dims.
        search("fa3_fp8_split_search", "fa3_fp8_best", split_candidates(s, 128),
               lambda n: fa3.caller(s, buffers, n), lambda n: fa3.checked_output(s, buffers, n), ref_fa3)
    search("splitkv_fp8_split_search", "splitkv_fp8_best", split_candidates(s, 64),
           lambda n: ours.caller(s, buffers, n), lambda n: ours_checked(ours.caller(s, buffers, n))(), ref_ours)
    print(f"{s.group:10s} {s.label():28s} " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)


def write_sidecar(args, gpu, sms, l2, started, state, extra):
    bench.write_sidecar(args, gpu, sms, l2, started, state, dict(extra, kv_dtype="fp8_e4m3"))


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(csv_path, out_path):
    """Markdown: per shape, ours (table, auto, best) against FA3 (heuristic, best), and the geomeans."""
    times, splits, problems = {}, {}, []
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        key = (int(r["batch"]), int(r["num_heads"]), int(r["num_kv_heads"]), int(r["head_dim"]),
               int(r["context_len"]))
        if r["contender"] in SEARCH_CONTENDERS:
            if r["status"] != "ok":
                problems.append(r)
            continue
        if r["status"] == "ok":
            times.setdefault(key, {})[r["contender"]] = (float(r["time_us_median"]), float(r["tbps"]))
            splits.setdefault(key, {})[r["contender"]] = r["num_splits"]
        else:
            problems.append(r)
    both = [k for k in times if "splitkv_fp8_heuristic" in times[k] and "fa3_fp8_heuristic" in times[k]]
    lines = [f"# fp8 (e4m3) KV cache: splitkv against FlashAttention 3", "",
             f"From `{os.path.relpath(csv_path)}` (scripts/bench_fp8_peers.py; contiguous caches, real length = "
             "capacity, per-(sequence, kv head) descales). Times are CUDA-graph medians in us; speedup = FA3's "
             "time / ours at our table's count.", "",
             "| shape | ours (table) | splits | ours auto | ours best | FA3 heuristic | FA3 best | splits | "
             "ours TB/s | FA3 heur. / ours | FA3 best / ours |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    over_heuristic, over_best = [], []
    for key in sorted(both):
        t, n = times[key], splits[key]
        ours = t["splitkv_fp8_heuristic"][0]
        fa3_h = t["fa3_fp8_heuristic"][0]
        fa3_b = t.get("fa3_fp8_best", (float("nan"), 0))[0]
        over_heuristic.append(fa3_h / ours)
        if "fa3_fp8_best" in t:
            over_best.append(fa3_b / ours)
        b, h, hk, d, L = key
        cell = lambda name: f"{t[name][0]:.1f}" if name in t else "-"
        lines.append(f"| B{b} {h}/{hk} d{d} L{L} | {ours:.1f} | {n['splitkv_fp8_heuristic']} | "
                     f"{cell('splitkv_fp8_auto')} | {cell('splitkv_fp8_best')} | {fa3_h:.1f} | {cell('fa3_fp8_best')} | "
                     f"{n.get('fa3_fp8_best', '-')} | {t['splitkv_fp8_heuristic'][1]:.2f} | {fa3_h / ours:.2f}x | "
                     f"{fa3_b / ours:.2f}x |")
    lines += ["", f"Shapes both ran: {len(both)}. Geomean speedup of ours (table) over FA3's heuristic "
              f"{geomean(over_heuristic):.3f}x (min {min(over_heuristic, default=float('nan')):.3f}x), over FA3 at "
              f"its best split {geomean(over_best):.3f}x (min {min(over_best, default=float('nan')):.3f}x)."]
    if problems:
        lines += ["", "Rows not ok:", ""] + [f"- {r['contender']} {r['num_splits']} B{r['batch']} L{r['context_len']} "
                                            f"d{r['head_dim']}: {r['status']}: {r['message']}" for r in problems[:40]]
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-3:] if not problems else lines[-len(problems[:40]) - 4:]))
    print(f"wrote {out_path}")


def main():
    global torch
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", help="libsplitkv_c.so of a CUDA build")
    parser.add_argument("--heuristic-lib", help="libsplitkv_heuristics_c.so (the compiled-in fp8 table)")
    parser.add_argument("--fa3-path", metavar="DIR", help="the unpacked fa3_fwd wheel")
    parser.add_argument("--out", help="CSV to write; its JSON sidecar goes beside it")
    parser.add_argument("--summarize", metavar="CSV", help="write the markdown report of a CSV and exit")
    parser.add_argument("--report", metavar="MD", help="where --summarize writes (default: report/fp8_peers.md "
                        "beside the CSV)")
    parser.add_argument("--git-sha", default=os.environ.get("SPLITKV_GIT_SHA", "unknown"))
    args = parser.parse_args()
    if args.summarize:
        summarize(args.summarize, args.report or os.path.join(os.path.dirname(args.summarize), "report",
                                                              "fp8_peers.md"))
        return
    if not (args.lib and args.heuristic_lib and args.fa3_path and args.out):
        parser.error("--lib, --heuristic-lib, --fa3-path and --out are required (or --summarize CSV)")
    bench.import_torch()
    torch = bench.torch
    if not torch.cuda.is_available():
        sys.exit("bench_fp8_peers.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    run(args)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(1)
