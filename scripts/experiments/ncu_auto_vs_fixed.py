#!/usr/bin/env python3
"""A profiling probe: the same decode step at the host heuristic's split count
(fixed-count grid kernel) and with num_splits = auto (persistent kernel), eager calls, for Nsight
Compute to compare kernel by kernel. `scripts/device_run.sh profile` runs it under ncu (clocks left
alone, sections and exports there); by hand, put `ncu --clock-control none ...` in front of

  python3 scripts/experiments/ncu_auto_vs_fixed.py --lib build/kernels/libsplitkv_c.so \
      --heuristic-lib build/heuristics/libsplitkv_heuristics_c.so

Each shape runs `--repeats` fixed calls, then as many auto calls, in that order (the printed plan
says which kernel launch is which)."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_peers  # noqa: E402  (the benchmark's buffers and ctypes bindings)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--heuristic-lib", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", default="1x512,4x4096,16x512", help="BxL list, 32/8 heads")
    parser.add_argument("--capacity", default="131072", help="cache capacity: a token count, or x1 for the length")
    parser.add_argument("--cudnn", action="store_true",
                        help="also call PyTorch SDPA's cuDNN backend on the same buffers (the peer to compare with)")
    args = parser.parse_args()
    bench_peers.import_torch()  # bench_peers binds torch at run time, not at import
    ours = bench_peers.Splitkv(args.lib, args.heuristic_lib)
    props = torch.cuda.get_device_properties(0)
    generator = torch.Generator(device="cuda").manual_seed(7)
    for item in args.shapes.split(","):
        batch, length = (int(x) for x in item.split("x"))
        capacity = length if args.capacity == "x1" else int(args.capacity)
        s = bench_peers.Shape("probe", batch, 32, 8, length, capacity=capacity)
        buffers = bench_peers.Buffers(s, props.L2_cache_size, generator)
        splits = ours.choose(s, props.name, props.multi_processor_count)
        fixed = ours.caller(s, buffers, splits)
        auto = ours.auto_caller(s, buffers, props.name, props.multi_processor_count)
        calls = [("fixed", fixed), ("auto", auto)]
        if args.cudnn:
            from torch.nn.attention import SDPBackend
            calls.append(("cudnn", bench_peers.sdpa_caller(s, buffers, SDPBackend.CUDNN_ATTENTION)))
        for name, call in calls:
            for r in range(args.repeats):
                call(r % buffers.copies)
            torch.cuda.synchronize()
            print(f"plan: B{batch} L{length} {name} x{args.repeats} (splits {splits})", flush=True)


if __name__ == "__main__":
    main()
