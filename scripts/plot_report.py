#!/usr/bin/env python3
"""Plots and summary.md for one GPU's results, from the CSVs splitkv already wrote.

    scripts/plot_report.py --results results/h200/full.csv --validation results/h200/validation.csv \\
        --peers results/h200/peers.csv --regret results/h200/report/regret.csv \\
        --regret-points results/h200/report/regret_points.csv \\
        --paged-vs-contiguous results/h200/paged_vs_contiguous.csv \\
        --capacity results/h200/capacity_scenario.csv --report-dir results/h200/report

scripts/report.sh runs it after `splitkv fit`, `splitkv evaluate` and `splitkv compare`; use that. It
reads only those CSVs (their columns: tuner/CSV_SCHEMA.md, heuristics/FIT.md, heuristics/REPORTS.md, the
header of peers.csv) and writes summary.md and the PNG plots into --report-dir. Every number in the summary
is a measured median from them; nothing is modelled.

Exit codes: 0 written; 1 matplotlib is missing; 2 bad input (a missing file or column, a file without data
rows, inputs of different GPUs), in which case nothing is written.
"""
import argparse
import csv
import hashlib
import math
import os
import sys
from collections import defaultdict

H200_DATASHEET_TBPS = 4.8  # HBM3e, NVIDIA H200 SXM datasheet


class BadInput(Exception):
    pass


# ---- reading ----------------------------------------------------------------------------------------------

def read_csv(path, required, what):
    """Rows of a CSV as dicts. A repeated column name keeps its first position (regret_points.csv holds the
    oracle's columns twice: once as the oracle, once as the `oracle` policy)."""
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file ({what})")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise BadInput(f"{path}: is empty ({what})")
        index = {}
        for i, name in enumerate(header):
            index.setdefault(name, i)
        missing = [c for c in required if c not in index]
        if missing:
            raise BadInput(f"{path}: lacks column(s) {', '.join(missing)} ({what})")
        rows = [{name: r[i] for name, i in index.items()} for r in reader if r]
    if not rows:
        raise BadInput(f"{path}: holds no data rows ({what})")
    return rows


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def gpu_of(rows, path):
    gpus = sorted({r["gpu"] for r in rows})
    if len(gpus) != 1:
        raise BadInput(f"{path}: holds rows of several GPUs ({', '.join(gpus)})")
    return gpus[0]


def layout_label(row):
    return "contiguous" if row["layout"] == "contiguous" else f"paged{row['page_size']}"


def geomean(values):
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def nearest_rank(values, q):
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


def shape_label(r, layout=True):
    cap = "" if r["cache_capacity"] == r["context_len"] else f" C{r['cache_capacity']}"
    lay = (layout_label(r) + " ") if layout else ""
    return (f"{lay}{r['dtype']} B{r['batch']} {r['num_heads']}/{r['num_kv_heads']} d{r['head_dim']} "
            f"L{r['context_len']}{cap}")


def tokens_label(n):
    n = int(n)
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def pct(v):
    return f"{100.0 * v:.1f}%"


class Inputs:
    def __init__(self, args):
        self.args = args
        self.results = read_csv(args.results, ["gpu", "layout", "page_size", "status"], "results of the sweep")
        self.gpu = gpu_of(self.results, args.results)
        self.validation = (read_csv(args.validation, ["gpu"], "validation results") if args.validation else None)
        points = read_csv(args.regret_points, ["dataset", "layout", "page_size", "dtype", "batch", "num_heads",
                                               "num_kv_heads", "head_dim", "context_len", "cache_capacity",
                                               "fastest_splits", "fastest_time_us", "ours_splits", "ours_time_us",
                                               "fa2_capacity_splits", "fa2_capacity_timed_splits",
                                               "fa2_capacity_time_us", "vllm_v1_v2_splits", "vllm_v1_v2_time_us"],
                          "splitkv evaluate --out ..._points.csv")
        self.in_sample = [r for r in points if r["dataset"] == "in_sample"]
        self.validation_points = [r for r in points if r["dataset"] == "validation"]
        if not self.in_sample:
            raise BadInput(f"{args.regret_points}: no in_sample rows")
        self.regret = read_csv(args.regret, ["dataset", "subset", "policy", "shapes", "geomean_regret",
                                             "p95_regret", "max_regret", "within_5pct"], "splitkv evaluate --out")
        self.pvc = read_csv(args.paged_vs_contiguous, ["gpu", "context_len", "cache_capacity", "contiguous_best_time_us"],
                            "splitkv compare --out")
        self.page_sizes = sorted({int(c[len("paged"):-len("_ratio_best")]) for c in self.pvc[0]
                                  if c.startswith("paged") and c.endswith("_ratio_best")})
        if not self.page_sizes:
            raise BadInput(f"{args.paged_vs_contiguous}: no paged<P>_ratio_best column: no paged layout compared")
        self.capacity = read_csv(args.capacity, ["gpu", "layout", "capacity_cost", "ours_time_us", "fa2_capacity_time_us",
                                                 "fa2_capacity_over_ours", "sized_best_time_us", "best_time_us"],
                                 "splitkv compare --capacity-out")
        self.peers = read_csv(args.peers, ["gpu", "group", "batch", "num_heads", "num_kv_heads", "head_dim",
                                           "context_len", "cache_capacity", "contender", "num_splits",
                                           "time_us_median", "tbps", "status"], "scripts/bench_peers.py --out")
        # One GPU throughout.
        named = [(args.results, self.gpu), (args.paged_vs_contiguous, gpu_of(self.pvc, args.paged_vs_contiguous)),
                 (args.capacity, gpu_of(self.capacity, args.capacity)), (args.peers, gpu_of(self.peers, args.peers))]
        if self.validation is not None:
            named.append((args.validation, gpu_of(self.validation, args.validation)))
        other = [(p, g) for p, g in named if g != self.gpu]
        if other:
            raise BadInput("inputs of different GPUs: " + "; ".join(f"{p} is {g}" for p, g in named)
                           + f"; every input must come from {self.gpu}")


# ---- plots ------------------------------------------------------------------------------------------------

def head_configs(rows):
    return sorted({(int(r["num_heads"]), int(r["num_kv_heads"])) for r in rows},
                  key=lambda h: (h[0] // h[1], h[0]))


UNMEASURED_GREY = "#d9d9d9"
TICK_FONT = 6        # points, both axes' tick labels
CELL_FONT = 5        # points, a cell's number at most
MIN_CELL_FONT = 4    # points: a number that would need a smaller font is left out (its colour says it)


def thinned_ticks(batches, rows_per_label):
    """Indices of the batches to label, at least rows_per_label rows apart: powers of two first (the
    grids' anchors), then the rest bottom up, wherever they still fit."""
    order = sorted(range(len(batches)), key=lambda i: (batches[i] & (batches[i] - 1) != 0, i))
    chosen = []
    for i in order:
        if all(abs(i - j) >= rows_per_label for j in chosen):
            chosen.append(i)
    return sorted(chosen)


def annotate_cells(ax, data, batches, contexts, colormap, norm, cell_text, annotate, cell_w, cell_h):
    """Numbers in the cells that have room for them. A cell whose neighbour above or below is not
    measured lends the number that row's height too; the number's font shrinks to the room, and a
    number that would need less than MIN_CELL_FONT is left out, so that no two overlap."""
    measured = {(y, x) for y, b in enumerate(batches) for x, c in enumerate(contexts) if (b, c) in data}
    for y, b in enumerate(batches):
        for x, c in enumerate(contexts):
            v = data.get((b, c))
            if v is None or not annotate(v):
                continue
            text = cell_text(v)
            up = cell_h / 2 + (0 if (y + 1, x) in measured or y + 1 == len(batches) else cell_h)
            down = cell_h / 2 + (0 if (y - 1, x) in measured or y == 0 else cell_h)
            size = min(CELL_FONT, 0.85 * 2 * min(up, down), 0.9 * cell_w / (0.6 * len(text)))
            if size < MIN_CELL_FONT:
                continue
            r, g, bl, _ = colormap(norm(v))
            ink = "white" if 0.299 * r + 0.587 * g + 0.114 * bl < 0.5 else "black"
            ax.text(x, y, text, ha="center", va="center", fontsize=size, color=ink)


def heatmap_grid(plt, path, title, rows_spec, cols_spec, cells, value_label, cmap, norm, cell_text, colorbar=None,
                 annotate=lambda v: True):
    """cells[(row_key, col_key)] = {(batch, context): value}; one panel per row and column. Grey: not measured."""
    import matplotlib
    from matplotlib.patches import Patch
    batches = sorted({b for d in cells.values() for b, _ in d})
    contexts = sorted({c for d in cells.values() for _, c in d})
    colormap = matplotlib.colormaps[cmap]
    # Panels grow with the batches (every panel has all of them: sharey) until a row can hold a
    # number in MIN_CELL_FONT + 1.5 points; below that, dense grids would show colour alone.
    panel_height = max(2.3, len(batches) * (MIN_CELL_FONT + 1.5) / 72)
    fig, axes = plt.subplots(len(rows_spec), len(cols_spec), squeeze=False, sharex=True, sharey=True,
                             figsize=(2.7 * len(cols_spec) + 1.4, panel_height * len(rows_spec) + 0.9),
                             layout="constrained")
    image = None
    for i, (rkey, rlabel) in enumerate(rows_spec):
        for j, (ckey, clabel) in enumerate(cols_spec):
            ax = axes[i][j]
            ax.set_facecolor(UNMEASURED_GREY)
            data = cells.get((rkey, ckey), {})
            grid = [[data.get((b, c), float("nan")) for c in contexts] for b in batches]
            image = ax.imshow(grid, origin="lower", aspect="auto", cmap=colormap, norm=norm, interpolation="nearest")
            ax.set_xticks(range(len(contexts)))
            ax.set_xticklabels([tokens_label(c) for c in contexts], rotation=90, fontsize=TICK_FONT)
            ax.tick_params(axis="y", labelsize=TICK_FONT)
            if i == 0:
                ax.set_title(clabel, fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{rlabel}\nbatch", fontsize=7)
            if i == len(rows_spec) - 1:
                ax.set_xlabel("context length", fontsize=7)
    bar = fig.colorbar(image, ax=axes, shrink=0.5, pad=0.01)
    bar.set_label(value_label, fontsize=8)
    if colorbar:
        colorbar(bar)
    bar.ax.legend(handles=[Patch(facecolor=UNMEASURED_GREY, edgecolor="0.5", label="not measured")],
                  loc="upper left", bbox_to_anchor=(-0.2, -0.04), fontsize=7, frameon=False, handlelength=1.2)
    fig.suptitle(title, fontsize=10)

    # The cells' size is known once the layout is: then the batch ticks are thinned to one label per
    # TICK_FONT + 1 points (the batches are many where a grid is dense, and sharey gives every
    # panel all of them), and the numbers go where they fit.
    fig.draw_without_rendering()
    box = axes[0][0].get_window_extent()
    points = 72.0 / fig.dpi
    cell_w = box.width * points / max(1, len(contexts))
    cell_h = box.height * points / max(1, len(batches))
    labelled = thinned_ticks(batches, math.ceil((TICK_FONT + 1) / cell_h))
    axes[0][0].set_yticks(labelled, [str(batches[k]) for k in labelled])
    for i, (rkey, _) in enumerate(rows_spec):
        for j, (ckey, _) in enumerate(cols_spec):
            annotate_cells(axes[i][j], cells.get((rkey, ckey), {}), batches, contexts, colormap, norm, cell_text,
                           annotate, cell_w, cell_h)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_best_splits(plt, colors, inputs, path, head_dims, title):
    rows = [r for r in inputs.in_sample if r["dtype"] == "bf16" and int(r["head_dim"]) in head_dims
            and r["cache_capacity"] == r["context_len"]]
    layouts = sorted({layout_label(r) for r in rows}, key=lambda s: (s != "contiguous", len(s), s))
    row_spec = [((lay, d), f"{lay} d{d}") for lay in layouts for d in head_dims
                if any(layout_label(r) == lay and int(r["head_dim"]) == d for r in rows)]
    col_spec = [(h, f"{h[0]} heads / {h[1]} kv heads") for h in head_configs(rows)]
    cells = defaultdict(dict)
    for r in rows:
        key = ((layout_label(r), int(r["head_dim"])), (int(r["num_heads"]), int(r["num_kv_heads"])))
        cells[key][(int(r["batch"]), int(r["context_len"]))] = int(r["fastest_splits"])
    heatmap_grid(plt, path, title, row_spec, col_spec, cells, "fastest num_splits", "viridis",
                 colors.LogNorm(vmin=1, vmax=128), lambda v: str(v),
                 lambda bar: bar.set_ticks([1, 2, 4, 8, 16, 32, 64, 128], labels=["1", "2", "4", "8", "16", "32", "64",
                                                                                  "128"]))


def plot_speedup(plt, colors, inputs, path, policy, title):
    rows = [r for r in inputs.in_sample if r["dtype"] == "bf16" and r["head_dim"] == "128"]
    def capacity_kind(r):
        return "capacity = length" if r["cache_capacity"] == r["context_len"] else f"capacity {r['cache_capacity']}"
    kinds = sorted({(layout_label(r), capacity_kind(r)) for r in rows},
                   key=lambda k: (k[1] != "capacity = length", k[0] != "contiguous", len(k[0]), k))
    row_spec = [(k, f"{k[0]}\n{k[1]}") for k in kinds]
    col_spec = [(h, f"{h[0]} heads / {h[1]} kv heads") for h in head_configs(rows)]
    cells = defaultdict(dict)
    for r in rows:
        key = ((layout_label(r), capacity_kind(r)), (int(r["num_heads"]), int(r["num_kv_heads"])))
        cells[key][(int(r["batch"]), int(r["context_len"]))] = float(r[f"{policy}_time_us"]) / float(r["ours_time_us"])
    extent = 8.0
    heatmap_grid(plt, path, title + "; numbers where they differ by 5% or more", row_spec, col_spec, cells,
                 f"{policy} time / ours time (> 1: ours faster)",
                 "RdBu", colors.LogNorm(vmin=1 / extent, vmax=extent), lambda v: f"{v:.2f}" if v < 9.995 else f"{v:.0f}",
                 lambda bar: bar.set_ticks([0.125, 0.25, 0.5, 1, 2, 4, 8],
                                           labels=["1/8", "1/4", "1/2", "1", "2", "4", "8"]),
                 annotate=lambda v: abs(math.log(v)) >= math.log(1.05))


def plot_paged_ratio(plt, inputs, path):
    panels = [("capacity = context length", lambda r: r["cache_capacity"] == r["context_len"]),
              ("capacity above the context length", lambda r: r["cache_capacity"] != r["context_len"])]
    # One series per page size, head_dim and dtype, so that a geomean line always averages the same mix of
    # shapes at every length (the grid measures head_dim 64/256 and fp16 at fewer lengths than the core).
    series = sorted({(page, int(r["head_dim"]), r["dtype"]) for page in inputs.page_sizes for r in inputs.pvc
                     if r[f"paged{page}_ratio_best"]}, key=lambda k: (k[2] != "bf16", k[1] != 128, k))
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 5), sharey=True, squeeze=False)
    markers = ["o", "s", "^", "v", "D", "P"]
    contexts = sorted({int(r["context_len"]) for r in inputs.pvc})
    for ax, (title, keep) in zip(axes[0], panels):
        for k, (page, head_dim, dtype) in enumerate(series):
            column = f"paged{page}_ratio_best"
            points = [(int(r["context_len"]), float(r[column])) for r in inputs.pvc
                      if keep(r) and r[column] and int(r["head_dim"]) == head_dim and r["dtype"] == dtype]
            if not points:
                continue
            shift = 1.0 + 0.05 * (k - (len(series) - 1) / 2)
            ax.scatter([x * shift for x, _ in points], [y for _, y in points], s=6, alpha=0.25,
                       marker=markers[k % len(markers)], color=f"C{k}")
            by_context = defaultdict(list)
            for x, y in points:
                by_context[x].append(y)
            xs = sorted(by_context)
            ax.plot([x * shift for x in xs], [geomean(by_context[x]) for x in xs], marker=markers[k % len(markers)],
                    color=f"C{k}", label=f"paged{page} d{head_dim} {dtype}: geomean ({len(points)} shapes)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(contexts)
        ax.set_xticklabels([tokens_label(c) for c in contexts], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("context length (tokens)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("paged time / contiguous time\n(each layout at its fastest num_splits; < 1: paged faster)")
    fig.suptitle(f"Paged vs contiguous on {inputs.gpu}: every shape measured in both layouts (dots), geomean per "
                 f"length (lines)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def kv_bytes(r):
    return 2 * int(r["batch"]) * int(r["context_len"]) * int(r["num_kv_heads"]) * int(r["head_dim"]) * 2


def plot_tbps(plt, inputs, path):
    fig, ax = plt.subplots(figsize=(10, 5.2))
    by_layout = defaultdict(list)
    for r in inputs.in_sample:
        b = kv_bytes(r)
        by_layout[layout_label(r)].append((b, b / float(r["fastest_time_us"]) / 1e6))
    best = max((p for pts in by_layout.values() for p in pts), key=lambda p: p[1])
    for k, lay in enumerate(sorted(by_layout, key=lambda s: (s != "contiguous", len(s), s))):
        pts = by_layout[lay]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, alpha=0.35, color=f"C{k}",
                   label=f"splitkv {lay}, fastest num_splits ({len(pts)} shapes)")
    peers = [r for r in inputs.peers if r["status"] == "ok" and r["contender"] in ("sdpa_cudnn", "sdpa_flash")]
    for marker, contender, label in (("x", "sdpa_cudnn", "SDPA cuDNN (peers.csv)"),
                                     ("+", "sdpa_flash", "SDPA flash (peers.csv)")):
        pts = [(int(r["kv_bytes"]), float(r["tbps"])) for r in peers if r["contender"] == contender]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=30, color="black" if marker == "x"
                       else "dimgray", label=label)
    ax.axhline(H200_DATASHEET_TBPS, color="red", linestyle="--", linewidth=1)
    ax.text(min(p[0] for pts in by_layout.values() for p in pts), H200_DATASHEET_TBPS * 1.01, f"H200 datasheet HBM bandwidth {H200_DATASHEET_TBPS} TB/s", color="red",
            fontsize=8, va="bottom")
    ax.annotate(f"best {best[1]:.2f} TB/s ({100 * best[1] / H200_DATASHEET_TBPS:.0f}% of datasheet)",
                xy=best, xytext=(0.35, 0.93), textcoords="axes fraction", fontsize=8,
                arrowprops=dict(arrowstyle="->", linewidth=0.6))
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, H200_DATASHEET_TBPS * 1.12)
    ax.set_xlabel("K+V bytes a decode step reads")
    ax.set_ylabel("achieved TB/s (KV bytes / median time)")
    ax.set_title(f"Achieved KV read bandwidth on {inputs.gpu} at each shape's fastest num_splits", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


PEER_CONTENDERS = [  # (contender, label, marker, hollow); hollow markers keep coinciding points visible
    ("splitkv_at_fa2_capacity_choice", "ours at FA2's capacity choice", "s", True),
    ("fa2_varlen_maxk_capacity", "FA2 varlen, max_seqlen_k = capacity", "v", False),
    ("fa2_varlen_maxk_real", "FA2 varlen, max_seqlen_k = length", "^", False),
    ("sdpa_flash", "SDPA flash (FA2)", "+", False),
    ("sdpa_cudnn", "SDPA cuDNN", "x", False),
    ("splitkv_best", "ours (best split)", ".", False),
    ("splitkv_heuristic", "ours (heuristic)", "o", True),
    # Drawn beneath ours, in colours of their own, so a peers.csv without them plots as before.
    ("fa3_heuristic", "FA3, num_splits = 0", "D", True),
    ("fa3_best", "FA3 (best split)", "d", False),
    ("flashinfer_plan", "FlashInfer's plan (paged16)", "p", True),
    ("flashinfer_best", "FlashInfer (best split, paged16)", "*", False),
]
# Rows per candidate split count; the *_best rows copy the fastest of them.
SEARCH_CONTENDERS = ("splitkv_split_search", "fa3_split_search")
# The acceptance's peers: per shape the fastest ok row of any of them; a family counts if either of its
# contenders ran.
BEST_PEER_FAMILIES = [("SDPA cuDNN", ("sdpa_cudnn",)), ("FA3", ("fa3_best", "fa3_heuristic")),
                      ("FlashInfer", ("flashinfer_best", "flashinfer_plan"))]
HOPPER_PEERS = ("fa3_heuristic", "fa3_best", "flashinfer_plan", "flashinfer_best")
PEER_SHORT = {"sdpa_cudnn": "cuDNN", "fa3_heuristic": "FA3 num_splits=0", "fa3_best": "FA3 best",
              "flashinfer_plan": "FlashInfer plan", "flashinfer_best": "FlashInfer best"}
ACCEPT_GEOMEAN, ACCEPT_MIN = 1.05, 0.95


def peer_shapes(inputs):
    """Shapes of peers.csv in file order, with {contender: row} for ok rows (split searches excluded)."""
    order, by_shape = [], {}
    for r in inputs.peers:
        if r["contender"] in SEARCH_CONTENDERS or r["status"] != "ok":
            continue
        key = (r["group"], r["batch"], r["num_heads"], r["num_kv_heads"], r["head_dim"], r["context_len"],
               r["cache_capacity"])
        if key not in by_shape:
            order.append(key)
            by_shape[key] = {"row": r}
        by_shape[key][r["contender"]] = r
    return [by_shape[k] for k in order]


def peer_label(r):
    cap = "" if r["cache_capacity"] == r["context_len"] else f" C{tokens_label(r['cache_capacity'])}"
    return (f"B{r['batch']} {r['num_heads']}/{r['num_kv_heads']} d{r['head_dim']} "
            f"L{tokens_label(r['context_len'])}{cap}")


def plot_peers(plt, inputs, path):
    shapes = peer_shapes(inputs)
    fig, ax = plt.subplots(figsize=(10, 0.28 * len(shapes) + 1.8))
    for k, (contender, label, marker, hollow) in enumerate(PEER_CONTENDERS):
        xs, ys = [], []
        for y, s in enumerate(shapes):
            if contender in s:
                xs.append(float(s[contender]["time_us_median"]))
                ys.append(y)
        if xs:
            color = f"C{k % 10}" if k < 10 else "k"
            style = dict(facecolors="none", edgecolors=color, linewidths=1.2) if hollow else dict(color=color)
            zorder = 2 if contender in HOPPER_PEERS else 3 + k
            ax.scatter(xs, ys, marker=marker, s=60 if hollow else 30, label=label, zorder=zorder, **style)
    ax.set_yticks(range(len(shapes)))
    ax.set_yticklabels([f"{s['row']['group']}: {peer_label(s['row'])}" for s in shapes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("time per decode step, µs (median of CUDA-graph replays; log scale)")
    ax.set_title(f"Decode attention on {inputs.gpu}: splitkv and its peers (peers.csv, bf16)", fontsize=10)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.grid(True, axis="y", alpha=0.15)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], fontsize=7, loc="lower center", ncol=4)
    fig.tight_layout(rect=(0, 0.035, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def capacity_panel_rows(inputs):
    """Contiguous capacity-scenario rows of the most common head config, bf16: what the plot shows."""
    rows = [r for r in inputs.capacity if r["layout"] == "contiguous" and r["dtype"] == "bf16" and r["head_dim"] == "128"]
    heads = defaultdict(int)
    for r in rows:
        heads[(r["num_heads"], r["num_kv_heads"])] += 1
    wanted = ("32", "8") if ("32", "8") in heads else max(heads, key=heads.get)
    return [r for r in rows if (r["num_heads"], r["num_kv_heads"]) == wanted], wanted


def plot_capacity(plt, inputs, path):
    rows, heads = capacity_panel_rows(inputs)
    batches = sorted({int(r["batch"]) for r in rows})
    preferred = [b for b in (1, 4, 16, 64) if b in batches]
    batches = preferred if len(preferred) >= 2 else batches[:4]
    fig, axes = plt.subplots(1, len(batches), figsize=(3.4 * len(batches) + 0.6, 4.0), squeeze=False)
    capacity = rows[0]["cache_capacity"] if rows else "?"
    series = [("sized_best_time_us", "capacity = length, fastest split", "k", "-", 3.0),
              ("best_time_us", f"capacity = {capacity}, fastest split", "C0", "--", 2.0),
              ("ours_time_us", f"capacity = {capacity}, ours", "C2", "-", 1.2),
              ("fa2_capacity_time_us", f"capacity = {capacity}, FA2's capacity-based num_splits", "C3", "-", 1.2)]
    for ax, b in zip(axes[0], batches):
        panel = sorted((r for r in rows if int(r["batch"]) == b), key=lambda r: int(r["context_len"]))
        xs = [int(r["context_len"]) for r in panel]
        for column, label, color, style, width in series:
            ax.plot(xs, [float(r[column]) for r in panel], style, color=color, marker="o", markersize=3, label=label,
                    linewidth=width)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([tokens_label(x) for x in xs])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_title(f"batch {b}", fontsize=9)
        ax.set_xlabel("real length (tokens)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("time per decode step, µs")
    axes[0][0].legend(fontsize=6)
    fig.suptitle(f"The capacity scenario on {inputs.gpu}: contiguous {heads[0]}/{heads[1]} heads d128 bf16, cache "
                 f"allocated at {capacity} tokens", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


PLOTS = [
    ("best_splits_heatmap.png", "fastest num_splits over batch x context length, per head configuration and layout "
                                "(bf16, head_dim 128, capacity = length)"),
    ("best_splits_heatmap_head_dim.png", "the same for head_dim 64 and 256"),
    ("speedup_over_fa2_capacity.png", "FA2-capacity time / ours time over the same axes, per layout and capacity "
                                      "(> 1: ours faster; head_dim 128, bf16)"),
    ("speedup_over_vllm.png", "vLLM V1/V2 time / ours time over the same axes"),
    ("paged_vs_contiguous_ratio.png", "paged / contiguous time at each layout's fastest split against context "
                                      "length, per page size"),
    ("tbps_vs_ceiling.png", "achieved KV read bandwidth at the fastest split against the H200 datasheet's 4.8 TB/s"),
    ("capacity_scenario.png", "the capacity scenario: a 131072-token contiguous cache, ours against FA2's "
                              "capacity-based choice"),
    ("peers_time.png", "time per shape per contender from peers.csv"),
]


def write_plots(inputs, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.colors as colors
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "splitkv"
    p = lambda name: os.path.join(out_dir, name)
    plot_best_splits(plt, colors, inputs, p("best_splits_heatmap.png"), [128],
                     f"Fastest num_splits on {inputs.gpu} (bf16, head_dim 128, capacity = context length)")
    plot_best_splits(plt, colors, inputs, p("best_splits_heatmap_head_dim.png"), [64, 256],
                     f"Fastest num_splits on {inputs.gpu} (bf16, head_dim 64 and 256, capacity = context length)")
    plot_speedup(plt, colors, inputs, p("speedup_over_fa2_capacity.png"), "fa2_capacity",
                 f"Speedup of ours over FlashAttention 2's capacity-based num_splits on {inputs.gpu} "
                 f"(bf16, head_dim 128; our kernel, measured times)")
    plot_speedup(plt, colors, inputs, p("speedup_over_vllm.png"), "vllm_v1_v2",
                 f"Speedup of ours over vLLM PagedAttention V1/V2's choice on {inputs.gpu} "
                 f"(bf16, head_dim 128; our kernel, measured times)")
    plot_paged_ratio(plt, inputs, p("paged_vs_contiguous_ratio.png"))
    plot_tbps(plt, inputs, p("tbps_vs_ceiling.png"))
    plot_capacity(plt, inputs, p("capacity_scenario.png"))
    plot_peers(plt, inputs, p("peers_time.png"))


# ---- summary.md -------------------------------------------------------------------------------------------

def md_table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def speedup_section(inputs):
    out = ["## Ours against FA2 (capacity) and vLLM V1/V2\n\n",
           "Speedup = the baseline's time / ours, each at its own num_splits choice, both measured on our kernel "
           "(`regret_points.csv` of `splitkv evaluate`; FA2-capacity is timed at the splits of its capacity "
           "partition that overlap the real length). In sample: the training shapes of `full.csv`; validation: "
           "off-grid shapes the fit never saw. FA2-capacity's splits read `asked -> holding tokens`.\n\n"]
    rows = []
    for policy, name in (("fa2_capacity", "FA2, seqlen_k = capacity"), ("vllm_v1_v2", "vLLM V1/V2")):
        for dataset, points in (("in sample", inputs.in_sample), ("validation", inputs.validation_points)):
            for subset, keep in (("all", lambda r: True),
                                 ("capacity > length", lambda r: r["cache_capacity"] != r["context_len"])):
                s = [float(r[f"{policy}_time_us"]) / float(r["ours_time_us"]) for r in points if keep(r)]
                if not s:
                    continue
                rows.append([name, dataset, subset, len(s), f"{geomean(s):.3f}x", f"{nearest_rank(s, 0.95):.2f}x",
                             f"{max(s):.2f}x", pct(sum(v > 1.05 for v in s) / len(s)),
                             pct(sum(v < 1 / 1.05 for v in s) / len(s))])
    out.append(md_table(["baseline", "data", "subset", "shapes", "geomean speedup", "p95", "max", "ours faster by > 5%",
                         "ours slower by > 5%"], rows, ["---", "---", "---"] + ["---:"] * 6))
    for policy, name in (("fa2_capacity", "FA2-capacity"), ("vllm_v1_v2", "vLLM V1/V2")):
        ranked = sorted(inputs.in_sample, key=lambda r: float(r[f"{policy}_time_us"]) / float(r["ours_time_us"]))
        for title, chosen in (("largest wins", list(reversed(ranked[-8:]))), ("largest losses", ranked[:8])):
            table = []
            for r in chosen:
                timed = f" -> {r[f'{policy}_timed_splits']}" if policy == "fa2_capacity" and \
                    r[f"{policy}_timed_splits"] != r[f"{policy}_splits"] else ""
                table.append([shape_label(r), f"{r['ours_splits']} / {float(r['ours_time_us']):.1f}",
                              f"{r[f'{policy}_splits']}{timed} / {float(r[f'{policy}_time_us']):.1f}",
                              f"{r['fastest_splits']} / {float(r['fastest_time_us']):.1f}",
                              f"{float(r[f'{policy}_time_us']) / float(r['ours_time_us']):.3f}x"])
            out.append(f"\n### vs {name}: {title} (in sample)\n\n")
            out.append(md_table(["shape", "ours: splits / µs", f"{name}: splits / µs", "fastest: splits / µs",
                                 "speedup"], table, ["---", "---:", "---:", "---:", "---:"]))
    return "".join(out)


def paged_section(inputs, rel):
    out = ["\n## Paged vs contiguous\n\n",
           f"From [`{rel(inputs.args.paged_vs_contiguous)}`]({rel(inputs.args.paged_vs_contiguous)}) "
           f"(`splitkv compare`): paged time / contiguous time of the same shape (dtype, batch, heads, head_dim, "
           f"length, capacity), each layout at its own fastest num_splits, and each at the same policy's choice. "
           f"Below 1, paged is faster.\n\n"]
    rows = []
    for page in inputs.page_sizes:
        best = [float(r[f"paged{page}_ratio_best"]) for r in inputs.pvc if r[f"paged{page}_ratio_best"]]
        ours = [float(r[f"paged{page}_ratio_ours"]) for r in inputs.pvc if r[f"paged{page}_ratio_ours"]]
        fa2 = [float(r[f"paged{page}_ratio_fa2_capacity"]) for r in inputs.pvc if r[f"paged{page}_ratio_fa2_capacity"]]
        rows.append([f"paged{page}", len(best), f"{geomean(best):.4f}", f"{min(best):.4f}",
                     f"{nearest_rank(best, 0.95):.4f}", f"{max(best):.4f}", pct(sum(v < 1 for v in best) / len(best)),
                     f"{geomean(ours):.4f}", f"{geomean(fa2):.4f}"])
    out.append(md_table(["page size", "shapes", "geomean at best", "min", "p95", "max", "paged faster",
                         "geomean at ours", "geomean at FA2-capacity"], rows))
    # Where paging costs: by context length and by batch (capacity = length, every head config and dtype).
    for axis, title in (("context_len", "context length"), ("batch", "batch")):
        values = sorted({int(r[axis]) for r in inputs.pvc})
        table = []
        for page in inputs.page_sizes:
            cells = []
            for v in values:
                s = [float(r[f"paged{page}_ratio_best"]) for r in inputs.pvc
                     if int(r[axis]) == v and r[f"paged{page}_ratio_best"] and r["cache_capacity"] == r["context_len"]]
                cells.append(f"{geomean(s):.3f}" if s else "")
            table.append([f"paged{page}"] + cells)
        out.append(f"\nGeomean paged / contiguous at each best, by {title} (capacity = length):\n\n")
        out.append(md_table(["page size"] + [tokens_label(v) if axis == "context_len" else str(v) for v in values],
                            table))
    ranked = sorted((r for r in inputs.pvc if r[f"paged{inputs.page_sizes[0]}_ratio_best"]),
                    key=lambda r: float(r[f"paged{inputs.page_sizes[0]}_ratio_best"]))
    page = inputs.page_sizes[0]
    for title, chosen in ((f"where paged{page} costs most", list(reversed(ranked[-6:]))),
                          (f"where paged{page} gains most", ranked[:6])):
        table = [[shape_label(r, layout=False), f"{r['contiguous_best_splits']} / {float(r['contiguous_best_time_us']):.1f}",
                  f"{r[f'paged{page}_best_splits']} / {float(r[f'paged{page}_best_time_us']):.1f}",
                  f"{float(r[f'paged{page}_ratio_best']):.3f}"] for r in chosen]
        out.append(f"\n{title[0].upper() + title[1:]}:\n\n")
        out.append(md_table(["shape", "contiguous: splits / µs", f"paged{page}: splits / µs", "ratio"], table,
                            ["---", "---:", "---:", "---:"]))
    return "".join(out)


def regret_section(inputs, rel):
    out = ["\n## Regret of every policy (splitkv evaluate)\n\n",
           f"Regret = the policy's measured time / the fastest measured time of the shape. Full tables, the "
           f"cross-validation and every subset: [`regret.md`]({rel(os.path.join(os.path.dirname(inputs.args.regret), 'regret.md'))}); "
           f"per shape: [`regret_points.csv`]({rel(inputs.args.regret_points)}).\n"]
    for dataset, subset, title in (("in_sample", "all", "In sample, every shape"),
                                   ("validation", "all", "Validation (off-grid shapes), every shape"),
                                   ("in_sample", "capacity_gt_length", "In sample, capacity above the real length")):
        rows = [[f"**{r['policy']}**" if r["policy"].startswith("ours") else r["policy"], r["shapes"],
                 r["geomean_regret"], r["p95_regret"], r["max_regret"], pct(float(r["within_5pct"]))]
                for r in inputs.regret if r["dataset"] == dataset and r["subset"] == subset]
        if rows:
            out.append(f"\n### {title}\n\n")
            out.append(md_table(["policy", "shapes", "geomean", "p95", "max", "within 5%"], rows))
    return "".join(out)


def capacity_section(inputs, rel, peers):
    contiguous = [r for r in inputs.capacity if r["layout"] == "contiguous"]
    paged = [r for r in inputs.capacity if r["layout"] != "contiguous"]
    capacities = sorted({r["cache_capacity"] for r in contiguous})
    out = ["\n## The capacity scenario\n\n",
           "**The question** (a FlashAttention issue on `determine_num_splits` with a non-paged cache): an engine "
           f"allocates the KV cache at its maximum length ({', '.join(capacities)} tokens here) and decodes "
           "sequences far shorter. FA2's heuristic sees `seqlen_k` = the capacity, not the real length. What does "
           "that cost?\n\n",
           f"From [`{rel(inputs.args.capacity)}`]({rel(inputs.args.capacity)}) (`splitkv compare --capacity-out`): "
           "every shape measured at a capacity above its real length and at capacity = real length, on our kernel.\n\n"]
    rows = []
    for name, subset in (("contiguous", contiguous), ("paged", paged)):
        if not subset:
            continue
        cap = [float(r["capacity_cost"]) for r in subset]
        heur = [float(r["fa2_capacity_over_ours"]) for r in subset]
        total = [float(r["fa2_capacity_over_sized_best"]) for r in subset]
        rows.append([name, len(subset), f"{geomean(cap):.3f}x (max {max(cap):.2f}x)",
                     f"{geomean(heur):.3f}x (p95 {nearest_rank(heur, 0.95):.2f}x, max {max(heur):.2f}x)",
                     f"{geomean(total):.3f}x (max {max(total):.2f}x)"])
    out.append(md_table(["layout", "shapes", "capacity alone: fastest at capacity / fastest at length",
                         "the heuristic: FA2-capacity / ours, at capacity", "both: FA2-capacity at capacity / "
                         "fastest at length"], rows, ["---", "---:", "---:", "---:", "---:"]))
    cap = [float(r["capacity_cost"]) for r in contiguous]
    heur = [float(r["fa2_capacity_over_ours"]) for r in contiguous]
    worst = max(contiguous, key=lambda r: float(r["fa2_capacity_over_ours"]))
    out.append(
        f"\n**The answer on {inputs.gpu}.** Capacity alone costs little on our kernel: it cuts splits from the real "
        f"length, so a contiguous shape's fastest time at capacity {capacities[-1]} is within {geomean(cap):.3f}x "
        f"(geomean; max {max(cap):.2f}x) of the same shape in a cache sized to it. The heuristic is what costs: "
        f"FA2's num_splits from the capacity, run on the same kernel, is {geomean(heur):.2f}x slower than ours "
        f"(geomean over {len(heur)} contiguous shapes; {pct(sum(v > 1.05 for v in heur) / len(heur))} of them more "
        f"than 5% slower; worst {float(worst['fa2_capacity_over_ours']):.2f}x at {shape_label(worst)}, where FA2 "
        f"asks for {worst['fa2_capacity_splits']} splits, {worst['fa2_capacity_timed_splits']} of them holding "
        f"tokens, and ours takes {worst['ours_splits']}). On FA2's own kernel it is worse, because that kernel also "
        f"divides the capacity, not the real length, among its splits (below, from peers.csv).\n")
    rows_32_8, heads = capacity_panel_rows(inputs)
    if rows_32_8:
        table = [[r["batch"], tokens_label(r["context_len"]), f"{r['sized_best_splits']} / {float(r['sized_best_time_us']):.1f}",
                  f"{r['best_splits']} / {float(r['best_time_us']):.1f}",
                  f"{r['ours_splits']} / {float(r['ours_time_us']):.1f}",
                  f"{r['fa2_capacity_splits']} -> {r['fa2_capacity_timed_splits']} / {float(r['fa2_capacity_time_us']):.1f}",
                  f"{float(r['fa2_capacity_over_ours']):.2f}x"]
                 for r in sorted(rows_32_8, key=lambda r: (int(r["batch"]), int(r["context_len"])))]
        out.append(f"\nContiguous, {heads[0]}/{heads[1]} heads, head_dim 128, bf16, capacity "
                   f"{rows_32_8[0]['cache_capacity']} (splits / µs; FA2: splits asked -> splits holding tokens):\n\n")
        out.append(md_table(["batch", "length", "fastest, capacity = length", "fastest, at capacity",
                             "ours, at capacity", "FA2-capacity, at capacity", "FA2-capacity / ours"], table))
    out.append(peers_capacity_text(peers))
    return "".join(out)


def peers_capacity_text(peers):
    cap_shapes = [s for s in peers if "fa2_varlen_maxk_capacity" in s]
    if not cap_shapes:
        return ""
    table = []
    for s in cap_shapes:
        r = s["row"]
        ours = float(s["splitkv_heuristic"]["time_us_median"]) if "splitkv_heuristic" in s else float("nan")
        maxk_cap = float(s["fa2_varlen_maxk_capacity"]["time_us_median"])
        maxk_real = float(s["fa2_varlen_maxk_real"]["time_us_median"]) if "fa2_varlen_maxk_real" in s else float("nan")
        at_fa2 = (f"{s['splitkv_at_fa2_capacity_choice']['num_splits']} / "
                  f"{float(s['splitkv_at_fa2_capacity_choice']['time_us_median']):.1f}"
                  if "splitkv_at_fa2_capacity_choice" in s else "")
        table.append([peer_label(r), f"{s['splitkv_heuristic']['num_splits']} / {ours:.1f}", at_fa2,
                      f"{maxk_real:.1f}", f"{maxk_cap:.1f}", f"{maxk_cap / maxk_real:.2f}x", f"{maxk_cap / ours:.2f}x"])
    out = ["\nThe same scenario against FlashAttention 2 itself (peers.csv, group `capacity`: FA2 varlen with K/V "
           "allocated at the capacity; `max_seqlen_k` = the capacity is what an engine that does not read the "
           "lengths back passes; µs):\n\n",
           md_table(["shape", "ours (heuristic): splits / µs", "ours at FA2's capacity choice: splits / µs",
                     "FA2 varlen, max_seqlen_k = length", "FA2 varlen, max_seqlen_k = capacity",
                     "FA2: capacity / length", "FA2 (capacity) / ours"], table)]
    return "".join(out)


def peers_section(peers):
    out = ["\n## Peers (peers.csv)\n\n",
           "Every contender timed the same way in one process (scripts/bench_peers.py: a CUDA graph of back-to-back "
           "calls over rotating K/V copies, median of replays), bf16. Ours at the generated heuristic's choice, ours "
           "at the best split count of a split search, PyTorch SDPA with cuDNN and with its vendored FlashAttention 2 "
           "(flash), and FlashAttention 2 varlen (`max_seqlen_k` = the real length). Times in µs; splits in "
           "brackets.\n\n"]
    def t(s, c):
        return f"{float(s[c]['time_us_median']):.1f}" if c in s else ""

    def ts(s, c):  # time and, where the row has one, its split count
        if c not in s:
            return ""
        return t(s, c) + (f" ({s[c]['num_splits']})" if s[c]["num_splits"] else "")
    # FA3's and FlashInfer's columns only where peers.csv has their rows: the table of a run without
    # --fa3-path / --splitkv stays as it was.
    hopper = [c for c in HOPPER_PEERS if any(c in s for s in peers)]
    if hopper:
        out.append("FlashAttention 3 (the fa3_fwd wheel's `flash_attn_with_kvcache` on a contiguous cache of the "
                   "shape's capacity: `num_splits = 0`, its own choice, and its best fixed count) and FlashInfer "
                   "(its batch paged decode on 16-token pages, timed by `splitkv sweep`: its own plan, with the "
                   "split count it gave the longest sequence, and its best fixed count) where they ran. The last "
                   "column is the fastest of SDPA cuDNN, FA3 and FlashInfer / ours at the heuristic's choice.\n\n")
    table = []
    for s in peers:
        r = s["row"]
        h = s.get("splitkv_heuristic")
        b = s.get("splitkv_best")
        line = [r["group"], peer_label(r), f"{float(h['time_us_median']):.1f} ({h['num_splits']})" if h else "",
                f"{float(b['time_us_median']):.1f} ({b['num_splits']})" if b else "", t(s, "sdpa_cudnn"),
                t(s, "sdpa_flash"), t(s, "fa2_varlen_maxk_real"), t(s, "fa2_varlen_maxk_capacity"),
                t(s, "splitkv_auto")]
        if hopper:
            best = best_peer(s)
            line += [ts(s, c) for c in hopper]
            line.append(f"{best[2]:.3f}x ({PEER_SHORT[best[1]]})" if best else "")
        table.append(line)
    names = {"fa3_heuristic": "FA3, num_splits = 0", "fa3_best": "FA3, best", "flashinfer_plan": "FlashInfer, its plan",
             "flashinfer_best": "FlashInfer, best"}
    extra = [names[c] for c in hopper] + (["best peer / ours"] if hopper else [])
    out.append(md_table(["group", "shape", "ours, heuristic", "ours, best", "SDPA cuDNN", "SDPA flash",
                         "FA2 varlen", "FA2 varlen, max_seqlen_k = capacity", "ours, num_splits = auto"] + extra,
                        table, ["---", "---"] + ["---:"] * (7 + len(extra))))
    rows = []
    for contender, name in (("sdpa_cudnn", "SDPA cuDNN"), ("sdpa_flash", "SDPA flash"),
                            ("fa2_varlen_maxk_real", "FA2 varlen"), ("fa3_heuristic", "FA3, num_splits = 0"),
                            ("fa3_best", "FA3, best split"), ("flashinfer_plan", "FlashInfer, its plan"),
                            ("flashinfer_best", "FlashInfer, best split")):
        for subset, keep in (("all", lambda r: True), ("batch <= 16", lambda r: int(r["batch"]) <= 16),
                             ("batch > 16", lambda r: int(r["batch"]) > 16)):
            s = [float(x[contender]["time_us_median"]) / float(x["splitkv_heuristic"]["time_us_median"])
                 for x in peers if contender in x and "splitkv_heuristic" in x and keep(x["row"])]
            if s:
                rows.append([name, subset, len(s), f"{geomean(s):.3f}x", f"{min(s):.2f}x", f"{max(s):.2f}x",
                             pct(sum(v > 1 for v in s) / len(s))])
    out.append("\nSpeedup of ours at the heuristic's choice = the peer's time / ours (> 1: ours faster):\n\n")
    out.append(md_table(["peer", "subset", "shapes", "geomean", "min", "max", "ours faster"], rows,
                        ["---", "---", "---:", "---:", "---:", "---:", "---:"]))
    if hopper:
        out.append(best_peer_text(peers, "\n"))
    out.append(capacity_anchor_text(peers, "\n"))
    return "".join(out)


def best_peer(s):
    """(family, contender, ratio) of the fastest of SDPA cuDNN, FA3 and FlashInfer on the shape, ratio = its
    time / ours at the heuristic's choice (> 1: ours faster); None without ours or any of them."""
    if "splitkv_heuristic" not in s:
        return None
    times = [(float(s[c]["time_us_median"]), family, c) for family, contenders in BEST_PEER_FAMILIES
             for c in contenders if c in s]
    if not times:
        return None
    fastest, family, contender = min(times)
    return family, contender, fastest / float(s["splitkv_heuristic"]["time_us_median"])


def best_peer_text(peers, lead, list_below=True):
    """The acceptance: ours (our table) against the best of {cuDNN, FA3, FlashInfer} per shape."""
    # A shape two groups share (B1 L4096 is an anchor, in batch_sweep and in context_sweep) counts once,
    # at its first group's measurement, so no shape weighs more in the geomean than another.
    scored, seen = [], set()
    for s in peers:
        r = s["row"]
        key = tuple(r[c] for c in ("batch", "num_heads", "num_kv_heads", "head_dim", "context_len", "cache_capacity"))
        b = best_peer(s)
        if b and key not in seen:
            seen.add(key)
            scored.append((s, b))
    if not scored:
        return ""
    ratios = [b[2] for _, b in scored]
    g, worst = geomean(ratios), min(scored, key=lambda x: x[1][2])
    below = [(s, b) for s, b in scored if b[2] < ACCEPT_MIN]
    wins = defaultdict(int)
    for _, b in scored:
        wins[b[1]] += 1
    # Shapes where a family did not run (SDPA runs only at capacity = length) compare with fewer peers.
    partial = sum(1 for s, _ in scored if not all(any(c in s for c in cs) for _, cs in BEST_PEER_FAMILIES))
    met = g >= ACCEPT_GEOMEAN and not below
    text = (f"{lead}**Ours (the generated table) vs the best of SDPA cuDNN, FA3 and FlashInfer per shape** "
            f"({len(scored)} distinct shapes, each at its first group's rows; the fastest peer's time / ours): geomean {g:.3f}x, min {worst[1][2]:.3f}x "
            f"({worst[0]['row']['group']}: {peer_label(worst[0]['row'])}, against {worst[1][1]}), "
            f"{len(below)} shape(s) below {ACCEPT_MIN:.2f}x. Acceptance (geomean >= {ACCEPT_GEOMEAN:.2f}x, no shape "
            f"below {ACCEPT_MIN:.2f}x): **{'met' if met else 'not met'}**. Fastest peer: "
            + ", ".join(f"{c} on {n} shape(s)" for c, n in sorted(wins.items(), key=lambda x: (-x[1], x[0])))
            + (f"; {partial} shape(s) lack one of the three families (SDPA runs only where capacity = length)"
               if partial else "") + ".\n")
    if below and list_below:
        text += "\n" + "".join(f"- below {ACCEPT_MIN:.2f}x: {s['row']['group']}: {peer_label(s['row'])}: {b[2]:.3f}x against "
                        f"{b[1]}\n" for s, b in below)
    return text


def capacity_anchor_text(peers, lead):
    """The capacity scenario's anchor in peers.csv: B=4, 32/8 heads, L=8192 in a capacity-sized cache."""
    anchor = [x for x in peers if "fa2_varlen_maxk_capacity" in x and "splitkv_heuristic" in x
              and x["row"]["batch"] == "4" and x["row"]["num_heads"] == "32" and x["row"]["num_kv_heads"] == "8"
              and x["row"]["context_len"] == "8192"]
    if not anchor:
        return ""
    x = anchor[0]
    ours = float(x["splitkv_heuristic"]["time_us_median"])
    cap = float(x["fa2_varlen_maxk_capacity"]["time_us_median"])
    real = float(x["fa2_varlen_maxk_real"]["time_us_median"]) if "fa2_varlen_maxk_real" in x else float("nan")
    return (f"{lead}**The capacity scenario, B=4, 32/8 heads, d128, L=8192 in a {x['row']['cache_capacity']}-token "
            f"cache**: ours {ours:.1f} µs ({x['splitkv_heuristic']['num_splits']} splits) against FlashAttention 2 "
            f"varlen {cap:.1f} µs with `max_seqlen_k` = the capacity ({cap / ours:.1f}x slower) and {real:.1f} µs "
            f"with `max_seqlen_k` = the real length ({real / ours:.2f}x).\n")


def peer_geomean(peers, contender, keep=lambda r: True):
    s = [float(x[contender]["time_us_median"]) / float(x["splitkv_heuristic"]["time_us_median"])
         for x in peers if contender in x and "splitkv_heuristic" in x and keep(x["row"])]
    return (geomean(s), len(s)) if s else (float("nan"), 0)


def headlines(inputs, peers):
    out = ["## Headlines\n\n"]
    s = [float(r["fa2_capacity_time_us"]) / float(r["ours_time_us"]) for r in inputs.in_sample]
    sc = [float(r["fa2_capacity_time_us"]) / float(r["ours_time_us"]) for r in inputs.in_sample
          if r["cache_capacity"] != r["context_len"]]
    v = [float(r["vllm_v1_v2_time_us"]) / float(r["ours_time_us"]) for r in inputs.in_sample]
    out.append(f"- **num_splits, ours vs FA2-capacity** (same kernel, {len(s)} measured shapes): {geomean(s):.3f}x "
               f"geomean, up to {max(s):.2f}x; in caches larger than the real length {geomean(sc):.3f}x geomean "
               f"({len(sc)} shapes).\n")
    out.append(f"- **ours vs vLLM V1/V2's rule**: {geomean(v):.3f}x geomean, up to {max(v):.2f}x.\n")
    for page in inputs.page_sizes:
        best = [float(r[f"paged{page}_ratio_best"]) for r in inputs.pvc if r[f"paged{page}_ratio_best"]]
        out.append(f"- **paged{page} vs contiguous**, each at its fastest split: {geomean(best):.3f}x the time "
                   f"(geomean over {len(best)} shapes; {min(best):.2f}x to {max(best):.2f}x).\n")
    contiguous = [r for r in inputs.capacity if r["layout"] == "contiguous"]
    if contiguous:
        cap = geomean(float(r["capacity_cost"]) for r in contiguous)
        heur = geomean(float(r["fa2_capacity_over_ours"]) for r in contiguous)
        out.append(f"- **capacity scenario** (contiguous, {len(contiguous)} shapes): the oversized cache alone costs "
                   f"{cap:.3f}x; FA2's capacity-based num_splits costs {heur:.2f}x over ours (geomean).\n")
    cudnn, n1 = peer_geomean(peers, "sdpa_cudnn")
    cudnn16, n2 = peer_geomean(peers, "sdpa_cudnn", lambda r: int(r["batch"]) <= 16)
    flash, n3 = peer_geomean(peers, "sdpa_flash")
    if n1:
        out.append(f"- **peers**: ours at the heuristic's choice is {cudnn:.3f}x faster than SDPA cuDNN (geomean, "
                   f"{n1} shapes; {cudnn16:.3f}x at batch <= 16, {n2} shapes) and {flash:.3f}x faster than SDPA "
                   f"flash ({n3} shapes).\n")
    if any(c in s for s in peers for c in HOPPER_PEERS):
        out.append(best_peer_text(peers, "- ", list_below=False))
    out.append(capacity_anchor_text(peers, "- "))
    return "".join(out)


def write_summary(inputs, out_dir, plots_written):
    def rel(path):
        return os.path.relpath(path, out_dir).replace(os.sep, "/")
    peers = peer_shapes(inputs)
    a = inputs.args
    sources = [(a.results, len(inputs.results), "the sweep (training grid)")]
    if a.validation:
        sources.append((a.validation, len(inputs.validation), "the validation sweep (off-grid shapes)"))
    sources.append((a.peers, len(inputs.peers), "splitkv beside its peers (scripts/bench_peers.py)"))
    text = [f"# splitkv report: {inputs.gpu}\n\n",
            "Generated by `scripts/report.sh` from the committed measurements below (do not edit by hand; rerun "
            "it). Every time is a measured median; the num_splits policies are all timed on our kernel.\n\n",
            md_table(["input", "rows", "what", "sha256"],
                     [[f"`{p}`", n, w, f"`{sha256_of(p)}`"] for p, n, w in sources], ["---", "---:", "---", "---"]),
            "\n", headlines(inputs, peers), "\n", speedup_section(inputs), paged_section(inputs, rel),
            regret_section(inputs, rel), capacity_section(inputs, rel, peers), peers_section(peers),
            "\n## Plots\n\n"]
    for name, description in PLOTS:
        if name in plots_written:
            text.append(f"- [`{name}`]({name}): {description}\n")
    text.append("\n" + "\n".join(f"![{name}]({name})" for name, _ in PLOTS if name in plots_written) + "\n")
    return "".join(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="results CSV of the training sweep (full.csv)")
    parser.add_argument("--validation", help="results CSV of the validation sweep")
    parser.add_argument("--peers", required=True, help="peers.csv of scripts/bench_peers.py")
    parser.add_argument("--regret", required=True, help="regret.csv of splitkv evaluate")
    parser.add_argument("--regret-points", required=True, help="regret_points.csv of splitkv evaluate")
    parser.add_argument("--paged-vs-contiguous", required=True, help="CSV of splitkv compare --out")
    parser.add_argument("--capacity", required=True, help="CSV of splitkv compare --capacity-out")
    parser.add_argument("--report-dir", required=True, help="where summary.md and the plots go")
    parser.add_argument("--no-plots", action="store_true", help="summary.md only")
    args = parser.parse_args()
    try:
        inputs = Inputs(args)
    except BadInput as error:
        print(f"plot_report.py: {error}", file=sys.stderr)
        return 2
    if not args.no_plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(f"plot_report.py: matplotlib is not importable by {sys.executable}; run scripts/install_deps.sh "
                  "(Debian: python3-matplotlib)", file=sys.stderr)
            return 1
    summary = write_summary(inputs, args.report_dir, set() if args.no_plots else {n for n, _ in PLOTS})
    os.makedirs(args.report_dir, exist_ok=True)
    if not args.no_plots:
        write_plots(inputs, args.report_dir)
    with open(os.path.join(args.report_dir, "summary.md"), "w", encoding="utf-8") as f:
        f.write(summary)
    for name, _ in PLOTS:
        if not args.no_plots:
            print(f"wrote     {os.path.join(args.report_dir, name)}")
    print(f"wrote     {os.path.join(args.report_dir, 'summary.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
