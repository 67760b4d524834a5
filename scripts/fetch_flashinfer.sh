#!/usr/bin/env bash
# Puts FlashInfer's header-only CUDA sources where the build looks for them by default, for the
# optional `flashinfer` and `flashinfer_heuristic` kernels under test (tuner/FLASHINFER.md).
#
#   scripts/fetch_flashinfer.sh [--force]
#
# The headers come from the flashinfer-python wheel: .whl/flashinfer_python-<version>-py3-none-any.whl
# when it is there (git-ignored, as is .deps/), else `pip download flashinfer-python==<version>
# --no-deps` into a temporary folder. Two folders of the 100 MB wheel are extracted:
#   flashinfer/data/include                  -> .deps/flashinfer/include                  (7 MB)
#   flashinfer/data/cccl/libcudacxx/include  -> .deps/flashinfer/cccl/libcudacxx/include  (15 MB)
# The first is FlashInfer's headers (SPLITKV_FLASHINFER_INCLUDE_DIR); the second the libcu++ that
# FlashInfer vendors and compiles with ahead of the toolkit's (SPLITKV_FLASHINFER_CCCL_INCLUDE_DIR):
# its headers use parts of libcu++ (cuda::fast_mod_div) newer than CUDA 13.0's own copy.
# Idempotent: a complete earlier extraction of the same wheel is kept unless --force is given.
# Nothing here runs at build or sweep time; the GPU machine, which has no network, gets
# .deps/flashinfer carried with the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.7.4
wheel_name="flashinfer_python-${version}-py3-none-any.whl"
local_wheel=".whl/${wheel_name}"
dest=.deps/flashinfer
stamp="$dest/SOURCE"   # the wheel's name and sha256, written last: its presence means "complete"
# Wheel folder -> folder under $dest, and one file each must hold.
folders=(flashinfer/data/include flashinfer/data/cccl/libcudacxx/include)
targets=(include cccl/libcudacxx/include)
probes=(flashinfer/attention/decode.cuh cuda/cmath)

say() { echo "fetch_flashinfer: $*"; }
die() { echo "fetch_flashinfer: error: $*" >&2; exit 1; }

force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (expected --force or nothing)" ;;
esac

complete() {
  [[ -f "$stamp" ]] || return 1
  for i in "${!targets[@]}"; do [[ -f "$dest/${targets[$i]}/${probes[$i]}" ]] || return 1; done
}
# Without the wheel at hand, a complete extraction of this version is not downloaded again.
if [[ $force == 0 && ! -f "$local_wheel" ]] && complete && [[ "$(cut -d' ' -f1 "$stamp")" == "$wheel_name" ]]; then
  say "headers already present in $dest ($(cat "$stamp")); --force fetches again"
  exit 0
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/fetch_flashinfer.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

if [[ -f "$local_wheel" ]]; then
  wheel=$local_wheel
else
  say "$local_wheel not found; downloading flashinfer-python==$version with pip"
  pip=()
  if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    pip=(python3 -m pip)
  elif command -v pip >/dev/null 2>&1; then
    pip=(pip)
  else
    die "no wheel at $local_wheel and no pip to download one; put $wheel_name into .whl/"
  fi
  "${pip[@]}" download "flashinfer-python==$version" --no-deps --only-binary=:all: -d "$scratch/download" \
    >"$scratch/pip.log" 2>&1 || { tail -20 "$scratch/pip.log" >&2; die "pip download flashinfer-python==$version failed (no network?)"; }
  wheel=$(ls "$scratch"/download/flashinfer_python-*.whl 2>/dev/null | head -1)
  [[ -n "$wheel" ]] || die "pip download left no flashinfer_python wheel in $scratch/download"
fi

wheel_sha=$(sha256sum "$wheel" | cut -d' ' -f1)
expected_stamp="$(basename "$wheel") sha256 $wheel_sha"
if [[ $force == 0 ]] && complete && [[ "$(cat "$stamp")" == "$expected_stamp" ]]; then
  say "headers already present in $dest ($(basename "$wheel")); --force extracts again"
  exit 0
fi

say "extracting ${folders[*]} from $wheel"
if command -v unzip >/dev/null 2>&1; then
  unzip -q "$wheel" "${folders[@]/%//*}" -d "$scratch/wheel" ||
    die "unzip could not extract ${folders[*]} from $wheel"
elif command -v python3 >/dev/null 2>&1; then
  python3 -c '
import sys, zipfile
wheel_path, target, folders = sys.argv[1], sys.argv[2], [f + "/" for f in sys.argv[3:]]
with zipfile.ZipFile(wheel_path) as wheel:
    members = [m for m in wheel.namelist() if any(m.startswith(f) for f in folders)]
    if not members:
        sys.exit("none of " + ", ".join(folders) + " in the wheel")
    wheel.extractall(target, members)
' "$wheel" "$scratch/wheel" "${folders[@]}" || die "could not extract ${folders[*]} from $wheel"
else
  die "neither unzip nor python3 is available to open $wheel"
fi
for i in "${!folders[@]}"; do
  [[ -f "$scratch/wheel/${folders[$i]}/${probes[$i]}" ]] ||
    die "$wheel has no ${folders[$i]}/${probes[$i]}; is it flashinfer-python $version?"
done

# Replace an earlier (partial) extraction only once the new one is complete; the stamp goes last.
rm -f "$stamp"
for i in "${!folders[@]}"; do
  target="$dest/${targets[$i]}"
  mkdir -p "$(dirname "$target")"
  rm -rf "$target.new"
  mv "$scratch/wheel/${folders[$i]}" "$target.new"
  rm -rf "$target"
  mv "$target.new" "$target"
done
echo "$expected_stamp" >"$stamp"
say "$(find "$dest/include" -type f | wc -l) FlashInfer headers in $dest/include," \
  "$(find "$dest/cccl" -type f | wc -l) libcu++ headers in $dest/cccl ($(du -sh "$dest" | cut -f1) in all)"
