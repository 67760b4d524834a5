#!/usr/bin/env python3
"""Summarise Nsight Compute's per-instruction view (`ncu --import R --page source --csv
--print-source sass`, as `scripts/device_run.sh profile` writes it to logs.tgz:ncu/source.csv):
per kernel, the warp samples and the main stall reasons, the same before the first executed
LDGSTS (the first K/V copy), and the instructions holding the most samples (where the persistent auto kernel's exit path was read
off).

  python3 scripts/experiments/ncu_source_summary.py source.csv [--top 8]"""
import argparse
import csv

STALLS = ("stall_no_inst", "stall_long_sb", "stall_short_sb", "stall_barrier", "stall_wait", "stall_imc")


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def kernels(path):
    """(kernel name, rows as dicts) for every kernel section of the export."""
    name, rows, header = None, [], None
    with open(path, newline="") as f:
        for record in csv.reader(f):
            if record and record[0] == "Kernel Name":
                if name is not None:
                    yield name, rows
                name, rows, header = record[1], [], None
            elif header is None:
                header = record
            elif len(record) >= len(header):
                rows.append(dict(zip(header, record)))
    if name is not None:
        yield name, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source_csv")
    parser.add_argument("--top", type=int, default=8, help="instructions with the most samples to list")
    args = parser.parse_args()
    seen = set()
    for name, rows in kernels(args.source_csv):
        executed = [r for r in rows if number(r.get("Instructions Executed", "0")) > 0]
        key = (name, len(rows), sum(number(r["Warp Stall Sampling (All Samples)"]) for r in rows))
        if key in seen:  # the export repeats a kernel's section once per source view
            continue
        seen.add(key)
        samples = sum(number(r["Warp Stall Sampling (All Samples)"]) for r in rows)
        first_copy = next((i for i, r in enumerate(rows) if "LDGSTS" in r["Source"] and
                           number(r.get("Instructions Executed", "0")) > 0), len(rows))
        before = rows[:first_copy]
        print(f"{name[:110]}")
        print(f"  {len(rows)} SASS, {len(executed)} executed; warp samples {samples:.0f}: " +
              ", ".join(f"{s[6:]} {sum(number(r.get(s, '0')) for r in rows):.0f}" for s in STALLS))
        print(f"  at addresses before the first executed LDGSTS: {sum(1 for r in before if number(r.get('Instructions Executed', '0')) > 0)} "
              f"executed instructions, {sum(number(r['Warp Stall Sampling (All Samples)']) for r in before):.0f} samples")
        for r in sorted(rows, key=lambda r: -number(r["Warp Stall Sampling (All Samples)"]))[:args.top]:
            stalls = ", ".join(f"{s[6:]} {number(r.get(s, '0')):.0f}" for s in STALLS if number(r.get(s, "0")) > 0)
            print(f"    {number(r['Warp Stall Sampling (All Samples)']):5.0f}  {r['Source'].strip()[:60]:60s} {stalls}")


if __name__ == "__main__":
    main()
