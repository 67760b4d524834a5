#!/usr/bin/env python3
"""Regenerates the generated-header cases of the bad-input catalogue from one header.

    python3 tests/reliability/bad_inputs/make_header_cases.py build/cli/splitkv

Fits documented_header_up_to_date/r.csv with the given `splitkv` into that folder's
num_splits_h200.hpp, then writes every header_* / evaluate_table_* case (inputs and
case.txt) as one edit of it, finding the lines to edit by their text; also
heuristics/tests/fixtures/stale_header.hpp (the cli tests' stale header). Run it whenever the
header emitter's format changes; the catalogue then checks the new format's parser.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "documented_header_up_to_date")
HEADER = "num_splits_h200.hpp"


def first_line(lines, pattern, start=0):
    for i in range(start, len(lines)):
        if re.search(pattern, lines[i]):
            return i
    sys.exit(f"make_header_cases: no line matches {pattern!r}")


def with_first_value(line, value):
    """`line` (a table row) with its first number replaced by `value`, in the same width."""
    m = re.search(r"\{(\s*\d+)", line)
    field = m.group(1)
    return line[: m.start(1)] + value.rjust(len(field)) + line[m.end(1):]


def up_to_row(line):
    """A table row up to its `// row N` label: enough to name it in a message fragment."""
    return re.match(r"(.*// row \d+)", line).group(1)


def write_case(name, comment, args, messages, header_text=None, header_name=HEADER, exit_code=2):
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    shutil.copyfile(os.path.join(BASE, "r.csv"), os.path.join(folder, "r.csv"))
    if header_text is not None:
        with open(os.path.join(folder, header_name), "w") as f:
            f.write(header_text)
    with open(os.path.join(folder, "case.txt"), "w") as f:
        f.write(f"# {comment}\nargs: {args}\nexit: {exit_code}\n")
        for m in messages:
            f.write(f"message: {m}\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_header_cases.py <splitkv binary>")
    splitkv = os.path.abspath(sys.argv[1])
    subprocess.run([splitkv, "fit", "r.csv", "--out", HEADER], cwd=BASE, check=True, stdout=subprocess.DEVNULL)
    text = open(os.path.join(BASE, HEADER)).read()
    lines = text.split("\n")  # the last element is "" (the file ends with a newline)
    sha = re.search(r'kInputSha256\[\] = "([0-9a-f]{64})"', text).group(1)

    def edited(index, new_line):
        copy = list(lines)
        copy[index] = new_line
        return "\n".join(copy)

    rows = first_line(lines, r"kRows\[")                       # real_length's kRows
    row0 = first_line(lines, r"^\s*\{\s*\d", rows)              # its first row
    row1 = first_line(lines, r"^\s*\{\s*\d", row0 + 1)          # its second row
    row_of = first_line(lines, r"kRowOf\[", rows)
    plane0 = first_line(lines, r"^\s*\{\s*\d", row_of)          # first kRowOf plane
    n_rows = int(re.search(r"kRows\[(\d+)\]", lines[rows]).group(1))
    first_value = re.search(r"\{\s*(\d+)", lines[row0]).group(1)
    other_value = "4" if first_value != "4" else "8"
    bad_row = max(7, n_rows + 5)

    with open(os.path.join(BASE, "case.txt"), "w") as f:
        f.write("# not an error: the header the header_* cases edit, unedited, is what r.csv fits "
                "(fit --check exit 0, nothing written)\n")
        f.write(f"args: fit r.csv --check --out {HEADER}\nexit: 0\n")
        f.write(f"message: {HEADER} is up to date with r.csv (sha256 {sha[:12]}\n")

    check = f"fit r.csv --check --out {HEADER}"
    table_edit = with_first_value(lines[row0], other_value)
    write_case("header_table_edited",
               f"fit --check against a header whose table bytes were edited by hand (row 0 of real_length: "
               f"{first_value} -> {other_value}); its provenance still names r.csv",
               check, [f"splitkv fit --check: {HEADER}:{row0 + 1}: table edited",
                       f"committed: {up_to_row(table_edit)}", f"generated: {up_to_row(lines[row0])}"],
               edited(row0, table_edit))
    sha_line = first_line(lines, r"kInputSha256\[\]")
    write_case("header_sha256_other_csv",
               "fit --check against a header whose provenance sha256 names another CSV than the one given",
               check, [f"splitkv fit --check: {HEADER}: kInputSha256: fitted on a CSV with sha256 0123456789ab, "
                       f"not r.csv (sha256 {sha[:12]})"],
               edited(sha_line, lines[sha_line].replace(sha[:12], "0123456789ab")))
    gpu_line = first_line(lines, r"kGpuName\[\]")
    sms_line = first_line(lines, r"constexpr int kSmCount = ")
    other_gpu = list(lines)
    other_gpu[gpu_line] = lines[gpu_line].replace("NVIDIA H200", "NVIDIA A100-SXM4-80GB")
    other_gpu[sms_line] = re.sub(r"= \d+;", "= 108;", lines[sms_line])
    other_gpu_text = "\n".join(other_gpu)
    write_case("header_other_gpu", "fit --check against a header emitted for another GPU (kGpuName and kSmCount of an A100)",
               check, [f'splitkv fit --check: {HEADER}: kGpuName/kSmCount: made for "NVIDIA A100-SXM4-80GB" (108 SMs), '
                       f'but r.csv was measured on "NVIDIA H200" (132 SMs)'],
               other_gpu_text)
    cut = plane0  # keep lines 1..plane0: the file ends inside real_length's kRowOf
    truncated = "\n".join(lines[:cut]) + "\n"
    write_case("header_truncated",
               f"fit --check against a header cut short in the middle of a table ({cut} of {len(lines) - 1} lines)",
               check, [f"splitkv fit --check: {HEADER}:{cut}: truncated: the file ends without "
                       f"`}}  // namespace splitkv::generated::h200`"], truncated)
    write_case("header_missing", "fit --check naming a header that does not exist", check,
               [f"splitkv fit --check: {HEADER}: no such file; run without --check to write it"])
    write_case("header_not_generated", "fit --check against a hand-written header that `splitkv fit` never emitted",
               check, [f"splitkv fit --check: {HEADER}:1: not a header generated by `splitkv fit`"],
               "// my own table\n#pragma once\nnamespace mine { inline constexpr int kSplits = 8; }\n")

    evaluate = f"evaluate r.csv --table {HEADER} --out e.csv"
    write_case("evaluate_table_other_gpu",
               "evaluate --table with a header made for another GPU than the CSV's, without --allow-other-gpu",
               "evaluate r.csv --table num_splits_a100.hpp --out e.csv",
               ['splitkv evaluate: --table num_splits_a100.hpp: made for "NVIDIA A100-SXM4-80GB" (108 SMs), but r.csv '
                'was measured on "NVIDIA H200" (132 SMs); pass --allow-other-gpu'],
               other_gpu_text, header_name="num_splits_a100.hpp")
    write_case("evaluate_table_truncated", "evaluate --table with a header cut short", evaluate,
               [f"splitkv evaluate: {HEADER}:{cut}: truncated"], truncated)
    write_case("evaluate_table_unknown_gpu",
               "evaluate --table naming a GPU that has no compiled-in table (and no such file)",
               'evaluate r.csv --table "NVIDIA B200" --out e.csv',
               ['splitkv evaluate: --table "NVIDIA B200": no such header file and no compiled-in table for that GPU '
                '(compiled in: "NVIDIA H200" (h200), "NVIDIA H200" (fp8_h200, fp8_e4m3 KV cache))'])
    columns = len(re.findall(r"\d+", lines[row1].split("//")[0]))
    write_case("evaluate_table_short_row",
               "evaluate --table with a header whose kRows row has more values than the CTA axis has buckets",
               evaluate, [f"splitkv evaluate: {HEADER}:{row1 + 1}: real_length_splits: kRows row 1 has "
                          f"{columns + 1} values, expected {columns}"],
               edited(row1, lines[row1].replace("},", ", 32},", 1)))
    write_case("evaluate_table_bad_row_index",
               "evaluate --table with a header whose kRowOf points past the rows of kRows "
               "(an out-of-bounds read in C++)",
               evaluate, [f"splitkv evaluate: {HEADER}:{plane0 + 1}: real_length_splits: kRowOf entry {bad_row} is not a row "
                          f"of kRows (0..{n_rows - 1})"],
               edited(plane0, re.sub(r"(\d+)\}", f"{bad_row}}}", lines[plane0], count=1)))
    write_case("evaluate_table_zero_splits", "evaluate --table with a header whose table holds a split count of 0",
               evaluate, [f"splitkv evaluate: {HEADER}:{row0 + 1}: real_length_splits: kRows value 0 is not a split "
                          f"count in 1..256"],
               edited(row0, with_first_value(lines[row0], "0")))

    # The cli tests' stale header (heuristics/tests/cli_fit_tests.cmake): tiny_h200.csv's header with
    # its first line changed, so `fit --check` finds it stale (exit 1), not edited or foreign (exit 2).
    root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    stale = "heuristics/tests/fixtures/stale_header.hpp"
    subprocess.run([splitkv, "fit", "heuristics/tests/fixtures/tiny_h200.csv", "--out", stale], cwd=root, check=True,
                   stdout=subprocess.DEVNULL)
    stale_lines = open(os.path.join(root, stale)).read().split("\n")
    stale_lines[0] = "// num_splits_h200.hpp: written by an older `splitkv fit` (this line differs; the tables do not)."
    with open(os.path.join(root, stale), "w") as f:
        f.write("\n".join(stale_lines))
    print("make_header_cases: wrote documented_header_up_to_date, 6 header_* and 6 evaluate_table_* cases, and " + stale)


if __name__ == "__main__":
    main()
