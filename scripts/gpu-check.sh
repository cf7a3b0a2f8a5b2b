#!/usr/bin/env bash
# The GPU check for ringlab's NCCL backend: build (when cargo is here), then doctor, the sanity
# all-reduce and a short all-reduce bench on NCCL, and nccl-tests' all_reduce_perf for the same
# sizes when it is installed. Every output lands in a folder; it finishes in under 5 minutes on
# one GPU.
#
#   scripts/gpu-check.sh [OUT_DIR]          (default: gpu-check-out)
#   RINGLAB_BIN=path/to/ringlab scripts/gpu-check.sh   (use a prebuilt binary)
#   ALL_REDUCE_PERF=path/to/all_reduce_perf            (nccl-tests, to compare busbw)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu-check-out}"
mkdir -p "$OUT"
START=$(date +%s)

BIN="${RINGLAB_BIN:-}"
if [ -z "$BIN" ]; then
  if command -v cargo >/dev/null 2>&1; then
    echo "== cargo build --release"
    cargo build --release 2>&1 | tail -n 3
  fi
  BIN=target/release/ringlab
fi
if [ ! -x "$BIN" ]; then
  echo "no ringlab binary at $BIN: build it (cargo build --release) or set RINGLAB_BIN" >&2
  exit 2
fi

step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  echo "$rc" >"$OUT/$name.rc"
  echo "   exit $rc"
  tail -n 40 "$OUT/$name.out"
  grep -v ' NCCL INFO ' "$OUT/$name.err" | tail -n 8
}

if command -v nvidia-smi >/dev/null 2>&1; then
  step nvidia-smi 30 nvidia-smi
  step nvidia-topo 30 nvidia-smi topo -m
fi
step doctor 60 "$BIN" doctor
step doctor-json 60 "$BIN" doctor --json
step sanity 120 "$BIN" sanity --backend nccl --timeout 90
# 8 B .. 256 MiB, x4: 13 sizes, 20 timed iterations after 5 warm-ups, checked.
step bench 180 "$BIN" bench --backend nccl -b 8 -e 256M -f 4 -n 20 -w 5 --timeout 120
step bench-json 180 "$BIN" bench --backend nccl -b 8 -e 256M -f 4 -n 20 -w 5 --timeout 120 --json

ARP="${ALL_REDUCE_PERF:-$(command -v all_reduce_perf || true)}"
if [ -n "$ARP" ] && [ -x "$ARP" ]; then
  NG=$(nvidia-smi -L 2>/dev/null | wc -l)
  step nccl-tests 180 "$ARP" -b 8 -e 256M -f 4 -n 20 -w 5 -g "${NG:-1}"
else
  echo "== nccl-tests: all_reduce_perf not found (set ALL_REDUCE_PERF to compare busbw)"
fi

echo "== done in $(( $(date +%s) - START )) s; outputs in $OUT/"
