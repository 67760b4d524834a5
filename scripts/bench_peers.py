#!/usr/bin/env python3
"""Side-by-side decode attention on one GPU: splitkv against PyTorch's SDPA backends (FlashAttention 2,
cuDNN), FlexAttention decoding, FlashAttention 2 varlen with a capacity-sized cache, and, when given,
FlashAttention 3 (--fa3-path) and FlashInfer (--splitkv).

Every contender is timed the same way: R back-to-back calls captured in one CUDA graph, each call on
its own K/V copy (working set >= 3x L2), replayed untimed for >= 20 ms, then the median over replays
of time / R, with p10/p90. splitkv runs through its C ABI (ctypes) on the same torch tensors, at its
generated heuristic's choice and at the best split count. Every contender's output is checked on each
shape against an fp32 reference attention computed in torch (per kv group) before it is timed
(max_abs_error; a peer's call returns its output, ours writes buffers.out).

FlashAttention 3 (`--fa3-path DIR`, the unpacked fa3_fwd wheel) is loaded by scripts/fa3_sweep.py's
loader and called through flash_attn_with_kvcache on the same tensors, cache views of the shape's
capacity: `fa3_heuristic` is num_splits=0 (FA3's own choice, what users get by default), `fa3_best`
the fastest fixed count. Its output is also checked written into a NaN-poisoned tensor.

FlashInfer cannot be called from Python here (its Python package JIT-compiles), so its batch paged
decode is the C++ tuner's kernels `flashinfer` and `flashinfer_heuristic` (tuner/FLASHINFER.md):
with `--splitkv BIN` (the CUDA build's CLI) bench_peers first runs `BIN sweep` on a grid of exactly
the peers shapes (16-token pages, every count of SPLIT_CANDIDATES; --write-flashinfer-grid PATH writes
it without torch or a GPU) and reads its CSV back: `flashinfer_plan` is FlashInfer's own plan,
`flashinfer_best` its fastest count. Those are timed in another process by the sweep's own CUDA-graph
timer (rotating copies >= 3x L2, 15 repetitions: tuner/GRID_SCHEMA.md), which checks no output;
tests/gpu/test_flashinfer_decode.cu checks the peers shapes small enough for its float64 reference.

    python3 scripts/bench_peers.py --lib build/kernels/libsplitkv_c.so \\
        --heuristic-lib build/heuristics/libsplitkv_heuristics_c.so --out results/h200/peers.csv \\
        --fa3-path /tmp/fa3 --splitkv build/cli/splitkv

Writes the CSV and a JSON sidecar (peers.csv -> peers.json: what ran, where and when; columns and
sidecar keys: heuristics/REPORTS.md, "peers.csv"). The markdown table and the
plot of time per shape per contender come from the committed CSV, on any machine: scripts/report.sh
(scripts/plot_report.py) writes them into results/<gpu>/report/summary.md ("Peers") and
report/peers_time.png. Needs a CUDA GPU and torch; runs on the GPU machine.
"""
import argparse
import csv
import ctypes
import datetime
import importlib.util
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types

# Imported by import_torch() once main() knows it will time: --write-flashinfer-grid runs on machines
# without torch.
torch = F = None

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
SPLIT_CANDIDATES = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
# The groups the peers run on; capacity_auto times ours only.
OURS_ONLY_GROUPS = ("capacity_auto",)
# FlashInfer runs paged only; 16 tokens is the page of vLLM's and FlashInfer's own examples.
FLASHINFER_PAGE_SIZE = 16
FLASHINFER_KERNELS = "flashinfer,flashinfer_heuristic"
# A hung sweep must not eat the device run; rows it wrote before the kill are still read.
FLASHINFER_TIMEOUT_S = 300


def import_torch():
    global torch, F
    import torch as torch_module
    import torch.nn.functional as functional
    torch, F = torch_module, functional


def import_script(name):
    """A sibling script as a module (scripts/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Shape:
    def __init__(self, group, batch, num_heads, num_kv_heads, context_len, head_dim=128, capacity=None):
        self.group = group
        self.batch, self.num_heads, self.num_kv_heads = batch, num_heads, num_kv_heads
        self.context_len, self.head_dim = context_len, head_dim
        self.capacity = capacity or context_len

    def kv_bytes(self):  # real K + V bytes, bf16
        return 2 * self.batch * self.context_len * self.num_kv_heads * self.head_dim * 2

    def key(self):
        return self.batch, self.num_heads, self.num_kv_heads, self.head_dim, self.context_len, self.capacity

    def label(self):
        cap = "" if self.capacity == self.context_len else f" cap{self.capacity}"
        return f"B{self.batch} {self.num_heads}/{self.num_kv_heads} d{self.head_dim} L{self.context_len}{cap}"


def shapes():
    out = []
    anchors = [(1, 32, 8, 1024), (1, 32, 8, 4096), (1, 32, 8, 16384), (1, 32, 8, 65536), (1, 32, 32, 4096),
               (1, 32, 32, 32768), (4, 32, 8, 2048), (4, 32, 8, 8192), (4, 32, 8, 32768), (8, 32, 8, 8192),
               (16, 32, 8, 1024), (16, 32, 8, 4096), (16, 32, 8, 16384), (32, 32, 8, 2048), (64, 32, 8, 1024),
               (64, 32, 8, 4096), (128, 32, 8, 2048), (16, 32, 32, 4096), (64, 32, 32, 2048)]
    out += [Shape("anchors", *a) for a in anchors]
    out += [Shape("head_dim", b, 32, 8, 8192, head_dim=d) for d in (64, 256) for b in (1, 16)]
    out += [Shape("batch_sweep", b, 32, 8, 4096) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    out += [Shape("context_sweep", b, 32, 8, L) for b in (1, 8)
            for L in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)]
    out += [Shape("capacity", b, 32, 8, L, capacity=131072) for b in (1, 4, 16) for L in (512, 2048, 8192, 16384)]
    # The capacity scenario (the 60 shapes of sweeps/ragged.json's capacity block), ours only:
    # num_splits = auto, the heuristic's count and every fixed count on the same buffers, seconds
    # apart. Separate sweeps allocate separate caches, and their comparison of auto with the best
    # fixed count moved by up to 15% on the same shape.
    out += [Shape("capacity_auto", b, h, 8, L, capacity=131072) for h in (32, 64) for b in (1, 2, 4, 8, 16)
            for L in (512, 1024, 2048, 4096, 8192, 16384)]
    return out


class Buffers:
    """`copies` K/V caches in splitkv's (and FlashAttention's) layout [B, cap, Hkv, D], plus q."""

    def __init__(self, shape, l2_bytes, generator):
        s = shape
        per_copy = 2 * s.batch * s.capacity * s.num_kv_heads * s.head_dim * 2
        real = max(1, s.kv_bytes())
        self.copies = max(1, min(64, math.ceil(3 * l2_bytes / real)))
        # Short contexts in big caches rotate inside one allocation's unused capacity.
        per_alloc = max(1, s.capacity // s.context_len)
        allocations = math.ceil(self.copies / per_alloc)
        if allocations * per_copy > 60e9:
            self.copies = max(1, int(60e9 // per_copy) * per_alloc)
            allocations = math.ceil(self.copies / per_alloc)
        kw = dict(device="cuda", dtype=torch.bfloat16)
        self.k, self.v = [], []
        for _ in range(allocations):
            # One spare sequence of slack at the end, so a copy offset into the capacity can still be
            # viewed as FlashAttention's varlen [batch * capacity, Hkv, D] tensor without going out of bounds.
            k = torch.empty(s.batch + 1, s.capacity, s.num_kv_heads, s.head_dim, **kw).uniform_(-1, 1,
                                                                                                 generator=generator)
            v = torch.empty_like(k).uniform_(-1, 1, generator=generator)
            k, v = k[:s.batch], v[:s.batch]
            for c in range(per_alloc):
                if len(self.k) == self.copies:
                    break
                self.k.append(k[:, c * s.context_len:(c + 1) * s.context_len] if per_alloc > 1 else k)
                self.v.append(v[:, c * s.context_len:(c + 1) * s.context_len] if per_alloc > 1 else v)
        # The peers' own layout [B, Hkv, L, D], contiguous, holding the same values: SDPA and Flex
        # read what they would read in their own engines.
        self.k_bhld = [k[:, :s.context_len].transpose(1, 2).contiguous() for k in self.k]
        self.v_bhld = [v[:, :s.context_len].transpose(1, 2).contiguous() for v in self.v]
        # Tokens between consecutive sequences of a copy: the allocation's capacity, also for a copy
        # sliced out of a larger cache. The kernels and FA2 varlen take it as the per-sequence stride.
        self.slot_tokens = self.k[0].stride(0) // (s.num_kv_heads * s.head_dim)
        self.q = torch.empty(s.batch, s.num_heads, s.head_dim, **kw).uniform_(-1, 1, generator=generator)
        self.out = torch.empty_like(self.q)
        self.seqlens = torch.full((s.batch,), s.context_len, device="cuda", dtype=torch.int32)


WARMUP_SECONDS = 0.02


def time_graph(call, copies, replays=15):
    """call(copy) enqueues one decode step on the current stream. Returns (median, p10, p90) µs/call."""
    calls = max(copies, 8)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in range(min(copies, 3)):  # warm-up outside capture: lazy init, autotuning
            call(c)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            call(i % copies)
    # Replay until the GPU has been busy for WARMUP_SECONDS before timing: after a shape's buffers
    # are set up, the first contender's median came out up to 13% slow on 14 of the capacity
    # scenario's 60 shapes (its p10 was not: its first replays ran slow), while the same split count
    # timed later was not.
    warm_start = time.perf_counter()
    while True:
        graph.replay()
        torch.cuda.synchronize()
        if time.perf_counter() - warm_start >= WARMUP_SECONDS:
            break
    samples = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(replays):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / calls)
    samples.sort()
    q = statistics.quantiles(samples, n=10, method="inclusive")
    return statistics.median(samples), q[0], q[-1]


class Splitkv:
    def __init__(self, lib_path, heuristic_path):
        self.lib = ctypes.CDLL(lib_path)
        f = self.lib.splitkv_decode_attention
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_int] * 11 + [ctypes.c_float] + [ctypes.c_void_p] * 9
        self.lib.splitkv_workspace_bytes.restype = ctypes.c_size_t
        self.lib.splitkv_workspace_bytes.argtypes = [ctypes.c_int] * 4
        self.lib.splitkv_last_error.restype = ctypes.c_char_p
        f = self.lib.splitkv_decode_attention_per_sequence
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_int] * 11 + [ctypes.c_float] + [ctypes.c_void_p] * 11
        self.auto_table_bytes = self.lib.splitkv_auto_table_bytes()
        self.lib.splitkv_auto_grid_bound.restype = ctypes.c_int
        self.lib.splitkv_auto_grid_bound.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.heuristic = None
        if heuristic_path:
            h = self.heuristic = ctypes.CDLL(heuristic_path)
            h.splitkv_num_splits.restype = ctypes.c_int
            h.splitkv_num_splits.argtypes = [ctypes.c_char_p] + [ctypes.c_int] * 8
            h.splitkv_auto_splits_table.restype = ctypes.c_int
            h.splitkv_auto_splits_table.argtypes = [ctypes.c_char_p] + [ctypes.c_int] * 5 + [ctypes.c_void_p,
                                                                                              ctypes.c_int]
            h.splitkv_fa2_num_splits.restype = ctypes.c_int
            h.splitkv_fa2_num_splits.argtypes = [ctypes.c_int] * 6
            h.splitkv_fa2_splits_with_work.restype = ctypes.c_int
            h.splitkv_fa2_splits_with_work.argtypes = [ctypes.c_int] * 3
        self.workspace = None
        self._auto_tables = []

    def choose(self, s, gpu_name, sm_count):
        if self.heuristic is None:
            return None
        return self.heuristic.splitkv_num_splits(gpu_name.encode(), sm_count, s.batch, s.num_heads, s.num_kv_heads,
                                                 s.head_dim, s.context_len, s.capacity, 0)

    def fa2_capacity_choice(self, s, sm_count):
        """FA2's split count from the capacity, and the splits of it that hold real tokens."""
        chosen = self.heuristic.splitkv_fa2_num_splits(s.batch, s.num_heads, s.num_kv_heads, s.head_dim,
                                                       s.capacity, sm_count)
        return chosen, self.heuristic.splitkv_fa2_splits_with_work(s.capacity, s.context_len, chosen)

    def auto_caller(self, s, buffers, gpu_name, sm_count):
        """num_splits = auto: the table's choice for the batch's effective batch and max length, looked up
        on the device from cache_seqlens; the bound is the table's largest entry for batches up to
        s.batch and lengths up to the capacity (no length read on the host)."""
        table = (ctypes.c_ubyte * self.auto_table_bytes)()
        rc = self.heuristic.splitkv_auto_splits_table(gpu_name.encode(), sm_count, s.num_heads, s.num_kv_heads,
                                                      s.head_dim, 0, table, self.auto_table_bytes)
        if rc != 0:
            raise RuntimeError("splitkv_auto_splits_table failed")
        device_table, bound = self.upload_auto_table(table, s)
        self._ensure_workspace(s, bound)
        capacity = buffers.slot_tokens

        def call(copy):
            rc = self.lib.splitkv_decode_attention_per_sequence(
                0, 0, s.batch, s.num_heads, s.num_kv_heads, s.head_dim, capacity, 0, 0, 0, bound, 0.0,
                buffers.q.data_ptr(), buffers.k[copy].data_ptr(), buffers.v[copy].data_ptr(),
                buffers.seqlens.data_ptr(), None, buffers.out.data_ptr(), None, self.workspace.data_ptr(),
                device_table, None, torch.cuda.current_stream().cuda_stream)
            if rc != 0:
                raise RuntimeError(self.lib.splitkv_last_error().decode())
        return call

    def upload_auto_table(self, table, s):
        """A filled auto table to device memory, kept for every replay of the graph that reads it, and
        the grid bound for the shape: (device pointer, bound)."""
        bound = self.lib.splitkv_auto_grid_bound(table, s.batch, s.capacity)
        device_table = torch.tensor(list(bytes(table)), dtype=torch.uint8, device="cuda")
        self._auto_tables.append(device_table)
        return ctypes.c_void_p(device_table.data_ptr()), bound

    def _ensure_workspace(self, s, splits):
        need = self.lib.splitkv_workspace_bytes(s.batch, s.num_heads, s.head_dim, splits)
        if need and (self.workspace is None or self.workspace.numel() < need):
            self.workspace = torch.empty(need, dtype=torch.uint8, device="cuda")
        return need

    def caller(self, s, buffers, splits):
        need = self._ensure_workspace(s, splits)
        ws = self.workspace.data_ptr() if need else None
        capacity = buffers.slot_tokens

        def call(copy):
            rc = self.lib.splitkv_decode_attention(
                0, 0, s.batch, s.num_heads, s.num_kv_heads, s.head_dim, capacity, 0, 0, 0, splits, 0.0,
                buffers.q.data_ptr(), buffers.k[copy].data_ptr(), buffers.v[copy].data_ptr(),
                buffers.seqlens.data_ptr(), None, buffers.out.data_ptr(), None, ws,
                torch.cuda.current_stream().cuda_stream)
            if rc != 0:
                raise RuntimeError(self.lib.splitkv_last_error().decode())
        return call


def sdpa_caller(s, buffers, backend):
    from torch.nn.attention import sdpa_kernel
    q = buffers.q.unsqueeze(2)  # [B, Hq, 1, D]

    def call(copy):
        k, v = buffers.k_bhld[copy], buffers.v_bhld[copy]
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=s.num_heads != s.num_kv_heads)
    return call


def fa2_varlen_caller(s, buffers, max_k):
    """FlashAttention 2 varlen with seqused_k: K/V allocated at capacity, max_seqlen_k as given."""
    q = buffers.q.reshape(s.batch, s.num_heads, s.head_dim)  # one query token per sequence
    cu_q = torch.arange(0, s.batch + 1, device="cuda", dtype=torch.int32)
    cap = buffers.slot_tokens
    cu_k = torch.arange(0, s.batch + 1, device="cuda", dtype=torch.int32) * cap

    def call(copy):
        k = buffers.k[copy].as_strided((s.batch * cap, s.num_kv_heads, s.head_dim),
                                       (s.num_kv_heads * s.head_dim, s.head_dim, 1))
        v = buffers.v[copy].as_strided((s.batch * cap, s.num_kv_heads, s.head_dim),
                                       (s.num_kv_heads * s.head_dim, s.head_dim, 1))
        return torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, 1, max_k, 0.0, False, False,
                                                       seqused_k=buffers.seqlens)[0]
    return call


_flex = {}


def flex_caller(s, buffers):
    from torch.nn.attention.flex_attention import flex_attention
    if "fn" not in _flex:
        # One compiled graph per shape (dynamic=False). Past dynamo's recompile limit (8 by
        # default) torch falls back to eager flex_attention, whose CPU->GPU copies break CUDA-graph
        # capture: a run timed the first 8 shapes and recorded that error for the other 11. Raise
        # the limit past the number of shapes this script times.
        import torch._dynamo
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 256))
        _flex["fn"] = torch.compile(flex_attention, dynamic=False)
    q = buffers.q.unsqueeze(2)

    def call(copy):
        k, v = buffers.k_bhld[copy], buffers.v_bhld[copy]
        return _flex["fn"](q, k, v, enable_gqa=s.num_heads != s.num_kv_heads)
    return call


def reference(s, buffers):
    """fp32 attention per kv group (no repeat_interleave: B=256 would need tens of GB)."""
    g = s.num_heads // s.num_kv_heads
    q = buffers.q.float().view(s.batch, s.num_kv_heads, g, s.head_dim)
    k = buffers.k_bhld[0].float()
    v = buffers.v_bhld[0].float()
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(s.head_dim)  # [B, Hkv, G, L]
    return torch.matmul(torch.softmax(scores, dim=-1), v).reshape(s.batch, s.num_heads, s.head_dim)


class Fa3:
    """FlashAttention 3 from the fa3_fwd wheel, loaded by scripts/fa3_sweep.py's Fa3Backend and called
    through its Fa3Shape callers (flash_attn_with_kvcache, and the raw op it calls with the same
    arguments, for the NaN-poisoned output), on bench_peers' own buffers."""

    def __init__(self, path):
        sweep = self.sweep = import_script("fa3_sweep")
        self.backend = sweep.Fa3Backend(types.SimpleNamespace(fa3_path=path, device=torch.cuda.current_device(),
                                                              seed=0))
        self.poison = True
        self.graph_via_raw_op = False

        class Views(sweep.Fa3Shape):
            # Fa3Shape's own __init__ allocates caches of its own; these are views of the shape's
            # buffers, so FA3 reads the copies every other contender reads.
            def __init__(self, backend, s, buffers):
                self.torch, self.backend = torch, backend
                cap = buffers.slot_tokens
                # Capacity-sized views of each copy, as a serving engine hands its cache over; a copy
                # offset into a larger cache reaches into the allocation's spare sequence.
                self.k_cap = [k.as_strided((s.batch, cap, s.num_kv_heads, s.head_dim), k.stride())
                              for k in buffers.k]
                self.v_cap = [v.as_strided((s.batch, cap, s.num_kv_heads, s.head_dim), v.stride())
                              for v in buffers.v]
                self.k_max = [k[:, :s.context_len] for k in buffers.k]
                self.v_max = [v[:, :s.context_len] for v in buffers.v]
                self.q = buffers.q.unsqueeze(1)  # [B, 1, H, D]: one query token per sequence
                self.seqlens = buffers.seqlens
                self.scale = s.head_dim ** -0.5

        self.views_class = Views

    def runtime(self):
        return self.backend.runtime

    def unsupported(self, s, buffers):
        """Why the wheel cannot run the shape, or None: it holds bf16 kernels for contiguous caches only."""
        if s.head_dim not in self.sweep.FA3_HEAD_DIMS:
            return f"head_dim {s.head_dim} is not one of FA3's {self.sweep.FA3_HEAD_DIMS}"
        if buffers.q.dtype != torch.bfloat16:
            return f"{buffers.q.dtype}: the fa3_fwd wheel has bf16 kernels only"
        if buffers.k[0].stride(-1) != 1 or buffers.k[0].stride(1) != s.num_kv_heads * s.head_dim:
            return "not a contiguous [batch, capacity, kv_heads, head_dim] cache (the wheel has no paged KV)"
        return None

    def split_candidates(self, s):
        # Past one block of keys per split FA3 gives each sequence its own smaller count (fa3_sweep.py's
        # docstring): larger counts would time the same partition again.
        blocks = math.ceil(s.context_len / self.sweep.fa3_block_n(s.head_dim))
        return [c for c in SPLIT_CANDIDATES if c <= max(1, blocks)]

    def contender(self, s, buffers, ref, heuristic, splits=0):
        """(call, check, timer) for record(): num_splits=0 (FA3's heuristic on the capacity-sized cache)
        or a fixed count."""
        sweep = self.sweep
        views = self.views_class(self.backend, s, buffers)
        kernel = sweep.KERNEL_CAPACITY if heuristic else sweep.KERNEL_FIXED
        public = views.caller(kernel, splits)

        def error_of(out):
            return (out.float().reshape(ref.shape) - ref).abs().max().item()

        def check(returned):
            # The public call's output, and the raw op's into an output poisoned with NaN: an element
            # FA3 never writes is NaN there, so the worse of the two is what the row reports.
            if not self.poison:
                return returned
            poisoned = torch.full_like(returned, float("nan"))
            try:
                views.raw_caller(kernel, splits, out=poisoned)(0)
                torch.cuda.synchronize()
            except Exception as e:
                torch.cuda.synchronize()
                self.poison = False
                print(f"fa3: the NaN-poisoned output check is off from here on: torch.ops.fa3_fwd.fwd(out=...) "
                      f"raised {type(e).__name__}: {e}".replace("\n", " "), flush=True)
                return returned
            worse = error_of(poisoned)
            return poisoned if not worse <= error_of(returned) else returned

        def timer(copies):
            if not self.graph_via_raw_op:
                try:
                    return time_graph(public, copies)
                except Exception as e:
                    if isinstance(e, torch.cuda.OutOfMemoryError) or "captur" not in str(e).lower():
                        raise
                    torch.cuda.synchronize()
                    # The wrapper's host-side work is all that differs from the op it calls; the graph
                    # holds the same kernels (as in fa3_sweep.py).
                    self.graph_via_raw_op = True
                    print(f"fa3: flash_attn_with_kvcache cannot be captured in a CUDA graph here "
                          f"({type(e).__name__}: {e}); graphs call torch.ops.fa3_fwd.fwd from here on"
                          .replace("\n", " "), flush=True)
            return time_graph(views.raw_caller(kernel, splits), copies)
        return public, check, timer


def peer_shapes(groups):
    return [s for s in shapes() if s.group in groups and s.group not in OURS_ONLY_GROUPS]


def flashinfer_grid(peer_list):
    """A grid (tuner/GRID_SCHEMA.md) of exactly the peers shapes, once each (shapes two groups share are
    one shape), for `splitkv sweep --kernel flashinfer,flashinfer_heuristic`."""
    blocks, seen = [], set()
    for s in peer_list:
        if s.key() in seen:
            continue
        seen.add(s.key())
        blocks.append({"comment": s.label(), "batch": [s.batch], "heads": [[s.num_heads, s.num_kv_heads]],
                       "head_dim": [s.head_dim], "context_len": [s.context_len], "cache_capacity": [s.capacity]})
    return {
        "name": "bench_peers_flashinfer",
        "description": "Written by scripts/bench_peers.py: its peers shapes for FlashInfer's batch paged decode "
                       "(tuner/FLASHINFER.md), every split count bench_peers searches plus FlashInfer's own plan. "
                       "The protocol is bench_peers' as far as the sweep has it: 15 timed replays of a CUDA graph "
                       "over rotating copies (>= 3x L2).",
        # bench_peers' own cap on one shape's buffers; the largest shapes need a few GB.
        "memory_budget_gb": 60,
        "protocol": {"repetitions": 15, "min_working_set_l2_multiple": 3, "warmup_replays": 3, "min_time_s": 0},
        "layouts": [{"layout": "paged", "page_size": FLASHINFER_PAGE_SIZE}],
        "dtypes": ["bf16"],
        "length_distribution": ["fixed"],
        "num_splits": SPLIT_CANDIDATES,
        "blocks": blocks,
    }


def write_json(path, document):
    with open(path, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")


PLAN_LINE = re.compile(r"flashinfer_heuristic plan: (?P<key>[^:]+): (?P<splits>\d+) splits? for the longest sequence")
KEY_SHAPE = re.compile(r"\bb(\d+) h(\d+)/(\d+) d(\d+) L(\d+) C(\d+)\b")


class Flashinfer:
    """FlashInfer's timings, from one `splitkv sweep` of flashinfer_grid() run before the torch loop: the
    kernels live in the C++ tuner (FlashInfer has no JIT here), so bench_peers reads their rows back."""

    def __init__(self, binary, peer_list):
        self.binary = binary
        self.rows = {}    # (shape key, kernel, num_splits) -> the sweep's last row of the point
        self.plans = {}   # shape key -> FlashInfer's split count for the longest sequence, from the plan's log
        self.info = dict(binary=binary, kernels=FLASHINFER_KERNELS, page_size=FLASHINFER_PAGE_SIZE)
        with tempfile.TemporaryDirectory(prefix="bench_peers_flashinfer.") as folder:
            grid = os.path.join(folder, "grid.json")
            out = os.path.join(folder, "flashinfer.csv")
            write_json(grid, flashinfer_grid(peer_list))
            command = [binary, "sweep", "--grid", grid, "--kernel", FLASHINFER_KERNELS, "--out", out]
            self.info["command"] = " ".join(command)
            started = time.perf_counter()
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=FLASHINFER_TIMEOUT_S)
                rc, log = done.returncode, (done.stdout or "") + (done.stderr or "")
            except subprocess.TimeoutExpired as e:
                rc = f"killed after {FLASHINFER_TIMEOUT_S} s"
                log = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                              for x in (e.stdout, e.stderr))
            except OSError as e:
                rc, log = f"not started: {e}", ""
            self.info.update(exit=rc, seconds=round(time.perf_counter() - started, 1))
            if os.path.isfile(out):
                with open(out, newline="") as f:
                    for r in csv.DictReader(f):
                        key = tuple(int(r[c]) for c in ("batch", "num_heads", "num_kv_heads", "head_dim",
                                                        "context_len", "cache_capacity"))
                        self.rows[(key, r["kernel"], int(r["num_splits"]))] = r  # a point's last row wins
            sidecar = os.path.splitext(out)[0] + ".json"
            if os.path.isfile(sidecar):
                with open(sidecar) as f:
                    swept = json.load(f)
                self.info["sweep_sidecar"] = {k: swept.get(k) for k in ("git_sha", "tool", "device", "state",
                                                                         "counts", "protocol", "message")}
        for line in log.splitlines():
            m = PLAN_LINE.search(line)
            shape = KEY_SHAPE.search(m.group("key")) if m else None
            if shape:
                self.plans[tuple(int(x) for x in shape.groups())] = int(m.group("splits"))
        self.info["rows"] = len(self.rows)
        self.failure = None if rc == 0 else " ".join([f"splitkv sweep exit {rc}"] + log.strip().splitlines()[-3:])
        if self.failure:
            self.info["log_tail"] = log.strip().splitlines()[-20:]
        print(f"flashinfer: {len(self.rows)} rows from `{self.info['command']}` in {self.info['seconds']} s"
              + (f"; {self.failure}" if self.failure else ""), flush=True)

    def contenders(self, s):
        """[(contender, num_splits, sweep row or None, message)]: FlashInfer's plan, then its best split."""
        why_missing = self.failure or "no row for the shape in the sweep's CSV"
        # One policy row per shape; its num_splits is the grid's bound, the plan's own count is in the log.
        plan = next((r for (k, kernel, _), r in self.rows.items() if k == s.key() and kernel == "flashinfer_heuristic"),
                    None)
        out = [("flashinfer_plan", self.plans.get(s.key(), "") if plan else "", plan, "" if plan else why_missing)]
        fixed = [r for (k, kernel, _), r in self.rows.items() if k == s.key() and kernel == "flashinfer"]
        ok = [r for r in fixed if r["status"] == "ok"]
        if ok:
            best = min(ok, key=lambda r: float(r["time_us_median"]))
            out.append(("flashinfer_best", int(best["num_splits"]), best, ""))
        else:
            out.append(("flashinfer_best", "", fixed[0] if fixed else None,
                        "no split count timed ok" if fixed else why_missing))
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", help="path to libsplitkv_c.so (required unless --write-flashinfer-grid)")
    parser.add_argument("--heuristic-lib", help="path to libsplitkv_heuristics_c.so (ours at the table's choice)")
    parser.add_argument("--out", help="CSV to write; its JSON sidecar is written beside it (required unless "
                        "--write-flashinfer-grid)")
    parser.add_argument("--groups", default="anchors,head_dim,batch_sweep,context_sweep,capacity",
                        help="comma-separated shape groups to run; capacity_auto (the 60 capacity-"
                        "scenario shapes, ours only: auto, the heuristic and every fixed count) is not in the default")
    parser.add_argument("--flex-groups", default="anchors", help="groups on which FlexAttention also runs (it "
                        "compiles per shape, so the default keeps it to the anchors)")
    parser.add_argument("--fa3-path", metavar="DIR", help="the unpacked fa3_fwd wheel: contenders fa3_heuristic "
                        "and fa3_best (FlashAttention 3's flash_attn_with_kvcache); absent without it")
    parser.add_argument("--splitkv", metavar="BIN", help="the CUDA build's splitkv CLI, built with FlashInfer: "
                        "contenders flashinfer_plan and flashinfer_best, from one `BIN sweep --kernel "
                        f"{FLASHINFER_KERNELS}` of the peers shapes run first; absent without it")
    parser.add_argument("--write-flashinfer-grid", metavar="PATH", help="write that sweep's grid for --groups to "
                        "PATH and exit (no torch, no GPU); `splitkv sweep --grid PATH --dry-run` plans it")
    parser.add_argument("--git-sha", default=os.environ.get("SPLITKV_GIT_SHA", "unknown"))
    args = parser.parse_args()
    groups = set(args.groups.split(","))
    if args.write_flashinfer_grid:
        grid = flashinfer_grid(peer_shapes(groups))
        write_json(args.write_flashinfer_grid, grid)
        print(f"wrote {args.write_flashinfer_grid}: {len(grid['blocks'])} shapes")
        return
    if not args.lib or not args.out:
        parser.error("--lib and --out are required")
    import_torch()
    if not torch.cuda.is_available():
        sys.exit("bench_peers.py: no CUDA device")

    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    props = torch.cuda.get_device_properties(0)
    gpu, sms, l2 = props.name, props.multi_processor_count, props.L2_cache_size
    ours = Splitkv(args.lib, args.heuristic_lib)
    flex_groups = set(args.flex_groups.split(",")) if args.flex_groups else set()
    extra = {}
    state = "complete"
    try:
        # First, before torch allocates: the sweep is a process of its own on the same GPU.
        flashinfer = None
        if args.splitkv and peer_shapes(groups):
            flashinfer = Flashinfer(args.splitkv, peer_shapes(groups))
            extra["flashinfer"] = flashinfer.info
        fa3 = fa3_error = None
        if args.fa3_path:
            try:
                fa3 = Fa3(args.fa3_path)
                extra["fa3"] = fa3.runtime()
            except Exception as e:  # the fa3 rows say why, the other contenders still run
                fa3_error = f"FlashAttention 3 did not load: {type(e).__name__}: {e}".replace("\n", " ")[:300]
                extra["fa3"] = {"error": fa3_error}
                print(f"bench_peers.py: {fa3_error}", file=sys.stderr, flush=True)
        generator = torch.Generator(device="cuda").manual_seed(0)
        run_shapes(args, gpu, sms, l2, ours, groups, flex_groups, generator, fa3, fa3_error, flashinfer)
    except KeyboardInterrupt:  # a deadline's SIGINT: every row so far is already on disk
        state = "interrupted"
    write_sidecar(args, gpu, sms, l2, started, state, extra)


def run_shapes(args, gpu, sms, l2, ours, groups, flex_groups, generator, fa3=None, fa3_error=None,
               flashinfer=None):
    from torch.nn.attention import SDPBackend
    rows = []
    fields = ["gpu", "group", "batch", "num_heads", "num_kv_heads", "head_dim", "context_len", "cache_capacity",
              "contender", "num_splits", "time_us_median", "time_us_p10", "time_us_p90", "kv_bytes", "tbps",
              "max_abs_error", "status", "message"]
    with open(args.out, "w", newline="") as out_file:
        writer = csv.DictWriter(out_file, fieldnames=fields)
        writer.writeheader()
        for s in shapes():
            if s.group not in groups:
                continue
            torch.cuda.empty_cache()
            buffers = Buffers(s, l2, generator)
            ref = reference(s, buffers)

            def new_row(contender, splits=""):
                return dict(gpu=gpu, group=s.group, batch=s.batch, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads,
                            head_dim=s.head_dim, context_len=s.context_len, cache_capacity=s.capacity,
                            contender=contender, num_splits=splits, kv_bytes=s.kv_bytes(), status="ok", message="")

            def write(row):
                writer.writerow(row)
                out_file.flush()
                rows.append(row)
                return row

            def record(contender, fn, splits="", check=None, check_may_fail=False, timer=None):
                """timer(copies) -> (median, p10, p90); default: time_graph of fn."""
                row = new_row(contender, splits)
                try:
                    if check is not None:
                        try:
                            returned = fn(0)
                            torch.cuda.synchronize()
                            err = (check(returned).float().reshape(ref.shape) - ref).abs().max().item()
                            row["max_abs_error"] = f"{err:.3e}"
                            if not err < 2e-2:
                                row["status"], row["message"] = "wrong", f"max abs error {err:.3e} vs the fp32 reference"
                        except Exception as e:
                            if not check_may_fail:
                                raise
                            # A peer's output that cannot be compared still gets its time.
                            torch.cuda.synchronize()
                            row["message"] = f"not checked: {type(e).__name__}: {e}".replace("\n", " ")[:300]
                    med, p10, p90 = timer(buffers.copies) if timer else time_graph(fn, buffers.copies)
                    row.update(time_us_median=f"{med:.3f}", time_us_p10=f"{p10:.3f}", time_us_p90=f"{p90:.3f}",
                               tbps=f"{s.kv_bytes() / med / 1e6:.4f}")
                except Exception as e:  # a contender that cannot run a shape is recorded, not fatal
                    row["status"], row["message"] = "error", f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
                    torch.cuda.synchronize()
                return write(row)

            def written_out(_):  # ours writes buffers.out; its call returns nothing to check
                return buffers.out

            def record_peer(contender, fn):
                # A peer's call returns its output: checked against the same fp32 reference as ours,
                # so the CSV shows how far each contender is from the exact attention.
                return record(contender, fn, check=lambda returned: returned, check_may_fail=True)

            def record_not_run(contender, status, message):
                row = new_row(contender)
                row["status"], row["message"] = status, message
                return write(row)

            def record_fa3():
                if fa3_error:
                    for contender in ("fa3_heuristic", "fa3_best"):
                        record_not_run(contender, "error", fa3_error)
                    return
                why = fa3.unsupported(s, buffers)
                if why:
                    for contender in ("fa3_heuristic", "fa3_best"):
                        record_not_run(contender, "skipped", why)
                    return
                call, check, timer = fa3.contender(s, buffers, ref, heuristic=True)
                record("fa3_heuristic", call, check=check, check_may_fail=True, timer=timer)
                best = None
                for splits in fa3.split_candidates(s):
                    call, check, timer = fa3.contender(s, buffers, ref, heuristic=False, splits=splits)
                    # Checked once per count: a count's partition is its own code path.
                    row = record("fa3_split_search", call, splits, check=check, check_may_fail=True, timer=timer)
                    if row["status"] == "ok" and (best is None or
                                                  float(row["time_us_median"]) < float(best["time_us_median"])):
                        best = row
                if best is not None:
                    write(dict(best, contender="fa3_best"))
                else:
                    record_not_run("fa3_best", "error", "no split count timed ok (fa3_split_search rows)")

            def record_flashinfer():
                for contender, splits, swept, message in flashinfer.contenders(s):
                    row = new_row(contender, splits)
                    if swept is None:
                        row["status"], row["message"] = "error", message[:300]
                    elif swept["status"] == "ok":
                        med = float(swept["time_us_median"])
                        row.update(time_us_median=f"{med:.3f}", time_us_p10=f"{float(swept['time_us_p10']):.3f}",
                                   time_us_p90=f"{float(swept['time_us_p90']):.3f}",
                                   tbps=f"{s.kv_bytes() / med / 1e6:.4f}",
                                   message="not checked: splitkv sweep checks no output; tests/gpu/"
                                           "test_flashinfer_decode.cu checks the peers shapes of K <= 2^26 elements")
                    else:
                        row["status"] = "skipped" if swept["status"] == "skipped" else "error"
                        row["message"] = f"splitkv sweep: {swept['status']}: {swept['message']}"[:300]
                    write(row)

            # Ours at the heuristic's count and the peers first, back to back, so the comparisons the
            # acceptance makes are timed seconds apart; the split searches (up to 14 timings of the
            # same kernel) come last, FA3's before ours. Timed after the search, the same count measured
            # up to 8% slower on the largest shapes (B8 L65536: 515 vs 475 µs). FlashInfer's rows were
            # timed before the loop, by the sweep.
            choice = ours.choose(s, gpu, sms)
            if choice is not None:
                record("splitkv_heuristic", ours.caller(s, buffers, choice), choice, written_out)
            ours_only = s.group in OURS_ONLY_GROUPS
            if s.capacity == s.context_len and not ours_only:
                record_peer("sdpa_cudnn", sdpa_caller(s, buffers, SDPBackend.CUDNN_ATTENTION))
                record_peer("sdpa_flash", sdpa_caller(s, buffers, SDPBackend.FLASH_ATTENTION))
                if s.group in flex_groups:
                    record_peer("flex_attention", flex_caller(s, buffers))
            if not ours_only:
                record_peer("fa2_varlen_maxk_real", fa2_varlen_caller(s, buffers, s.context_len))
            if s.capacity != s.context_len and not ours_only:
                record_peer("fa2_varlen_maxk_capacity", fa2_varlen_caller(s, buffers, s.capacity))
            if (fa3 or fa3_error) and not ours_only:
                record_fa3()
            if flashinfer is not None and not ours_only:
                record_flashinfer()
            if choice is not None:
                record("splitkv_auto", ours.auto_caller(s, buffers, gpu, sms), "auto", written_out)
                fa2_choice, with_work = ours.fa2_capacity_choice(s, sms)
                record("splitkv_at_fa2_capacity_choice", ours.caller(s, buffers, with_work), with_work,
                       written_out)
            tiles = math.ceil(s.context_len / 64)
            best = None
            for splits in [c for c in SPLIT_CANDIDATES if c <= max(1, tiles)]:
                row = record("splitkv_split_search", ours.caller(s, buffers, splits), splits, written_out)
                if row["status"] == "ok" and (best is None or float(row["time_us_median"]) < float(best["time_us_median"])):
                    best = row
            if best is not None:
                write(dict(best, contender="splitkv_best"))
            summary = {r["contender"]: r.get("time_us_median", "-") for r in rows if r.get("batch") == s.batch
                       and r.get("context_len") == s.context_len and r.get("head_dim") == s.head_dim
                       and r.get("num_kv_heads") == s.num_kv_heads and r.get("cache_capacity") == s.capacity
                       and r["contender"] not in SEARCH_CONTENDERS}
            print(f"{s.group:13s} {s.label():32s} " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
            buffers = None  # free the copies before the next shape allocates


# One row per candidate count; the *_best rows copy the fastest.
SEARCH_CONTENDERS = ("splitkv_split_search", "fa3_split_search")


def write_sidecar(args, gpu, sms, l2, started, state, extra=None):
    sidecar = dict(state=state, schema="splitkv-peers-sidecar/1", gpu=gpu, sm_count=sms, l2_bytes=l2, torch=torch.__version__,
                   cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), git_sha=args.git_sha,
                   host=platform.node(), started_at=started,
                   finished_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   protocol="CUDA graph of max(copies, 8) back-to-back calls over rotating K/V copies "
                            "(working set >= 3x L2, at most 64 copies), replayed untimed for >= 20 ms, then 15 replays, "
                            "median/p10/p90 of time per call",
                   command=" ".join(sys.argv),
                   # Any SPLITKV_* variable set for the run, so the sidecar says what ran.
                   environment={k: v for k, v in sorted(os.environ.items())
                                if k.startswith("SPLITKV_") and k != "SPLITKV_GIT_SHA"})
    sidecar.update(extra or {})
    try:
        sidecar["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(sidecar, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
