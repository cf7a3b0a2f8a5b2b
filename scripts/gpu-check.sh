#!/usr/bin/env bash
# The GPU check for ringlab's NCCL backend, in one run of under 8 minutes on a machine with one
# or more GPUs and no cargo: a prebuilt binary does everything, and every output is packed into
# at most 8 files.
#
#   RINGLAB_BIN=.gpu/ringlab scripts/gpu-check.sh [OUT_DIR]      (default: $OUT or gpu-check-out)
#
# Build the binary on a build machine (cargo build --release) and copy it into a folder git
# ignores (.gpu/ is in .gitignore). What it covers:
#   doctor (NCCL found through a venv on PATH, its version, GPUs); sanity with 1 rank and with
#   2 ranks sharing one GPU (NCCL_HOSTID); the all-reduce bench 8 B .. 256 MiB on 2 ranks;
#   every collective x float/bfloat16/half x sum/avg at small sizes with #wrong; single-process
#   mode; the docker0 hang staged on real NCCL in network namespaces (when they can be made);
#   and torch.distributed's NCCL all_reduce over the same two shared-GPU ranks, busbw side by
#   side with ringlab's (same libnccl, same transport).
# Files back: summary.txt (the numbers and PASS/FAIL per step), logs.tar.gz (every output).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-check-out}}"
WORK=$(mktemp -d)
mkdir -p "$OUT"
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

BIN="${RINGLAB_BIN:-target/release/ringlab}"
if [ ! -x "$BIN" ]; then
  say "no ringlab binary at $BIN: build it (cargo build --release) and set RINGLAB_BIN"
  exit 2
fi
BIN=$(readlink -f "$BIN")
# A Python venv with torch and the nvidia-nccl wheel: on PATH, not activated (ringlab finds
# NCCL through PATH's venvs, and torch loads the same library).
for v in /opt/torch/.venv "${VIRTUAL_ENV:-}"; do
  if [ -n "$v" ] && [ -x "$v/bin/python3" ]; then PY="$v/bin/python3"; export PATH="$v/bin:$PATH"; break; fi
done
PY="${PY:-$(command -v python3 || true)}"

step() {
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  say "$(printf '%-28s exit %3s  %3ss  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$*")"
  return $rc
}

say "# ringlab GPU check $(date -u +%FT%TZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$SUMMARY"
step doctor 60 "$BIN" doctor
step doctor-json 60 "$BIN" doctor --json
grep -E "found:|version|GPU [0-9]|warning|!" "$WORK/doctor.out" | sed 's/^/   /' | tee -a "$SUMMARY"
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "${NG:-0}" -ge 1 ] 2>/dev/null || NG=1
# Who owns the NCCL library ringlab and torch will load (ringlab refuses one that another
# user than the invoking one and root can write).
if [ -n "$PY" ]; then
  ls -ln "$(dirname "$PY")"/../lib/python3*/site-packages/nvidia/nccl/lib/ 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"
fi

step sanity-1 120 "$BIN" sanity --backend nccl --nproc-per-node 1 --timeout 90
step sanity-2-shared 120 "$BIN" sanity --backend nccl --nproc-per-node 2 --ranks-per-gpu 2 --timeout 90 --json
sed 's/^/   /' "$WORK/sanity-2-shared.out" | tee -a "$SUMMARY"

SHARE=(--nproc-per-node 2 --ranks-per-gpu 2)
step bench-sweep 240 "$BIN" bench --backend nccl "${SHARE[@]}" -b 8 -e 256M -f 4 -n 20 -w 5 --timeout 120 --json
step bench-table 120 "$BIN" bench --backend nccl "${SHARE[@]}" -b 1M -e 64M -f 8 -n 10 -w 2 --timeout 90
sed 's/^/   /' "$WORK/bench-table.out" | tee -a "$SUMMARY"

# Every collective x type x op (op only where the collective reduces), small sizes, checked.
wrong_total=0
for coll in all-reduce reduce-scatter all-gather broadcast reduce send-recv; do
  case $coll in all-reduce|reduce-scatter|reduce) ops="sum avg" ;; *) ops="sum" ;; esac
  for t in float bfloat16 half; do
    for o in $ops; do
      n="m-$coll-$t-$o"
      step "$n" 60 "$BIN" bench --backend nccl "${SHARE[@]}" --coll "$coll" -d "$t" -o "$o" \
        -b 1K -e 256K -f 16 -n 3 -w 1 --timeout 45 --json
      w=$(grep -o '"wrong_total":[0-9]*' "$WORK/$n.out" | cut -d: -f2)
      say "   #wrong ${w:-?}"
      wrong_total=$(( wrong_total + ${w:-1000000} ))
    done
  done
done
say "# collectives x types x ops: #wrong total $wrong_total"

step single-process 120 "$BIN" bench --backend nccl --single-process --nproc-per-node "$NG" -b 1M -e 16M -f 4 -n 10 --timeout 90
tail -n 6 "$WORK/single-process.out" | sed 's/^/   /' | tee -a "$SUMMARY"

if "$BIN" lab run docker0 --backend nccl --json >"$WORK/hang-nccl.out" 2>"$WORK/hang-nccl.err" \
   && "$BIN" lab run docker0 --backend nccl --fix --json >"$WORK/hang-nccl-fix.out" 2>"$WORK/hang-nccl-fix.err"; then
  say "hang lab docker0 on NCCL: staged and fixed"
else
  say "hang lab docker0 on NCCL: did not complete (see hang-nccl*.err): $(tail -n 2 "$WORK/hang-nccl.err" | tr '\n' ' ')"
fi
grep -o '"culprit":"[^"]*"\|"outcome":"[^"]*"' "$WORK"/hang-nccl*.out 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"

if [ -n "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  step torch-anchor 240 "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
    scripts/anchor_allreduce.py --ranks-per-gpu 2 -b 8 -e 256M -f 4 -n 20 -w 5
  "$PY" - "$WORK/bench-sweep.out" "$WORK/torch-anchor.out" <<'PY' | tee -a "$SUMMARY"
import json, sys
def rows(path, key):
    out = {}
    for line in open(path):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if "size" in v and key(v):
            out[v["size"]] = v
    return out
ring = rows(sys.argv[1], lambda v: v.get("in_place") is False)
torch = rows(sys.argv[2], lambda v: True)
print("# all-reduce f32 sum, 2 ranks sharing one GPU (NET/Socket), busbw GB/s, out of place")
print(f"{'size':>12} {'ringlab':>9} {'torch':>9} {'ratio':>7} {'#wrong':>6} {'torch ok':>8}")
for s in sorted(set(ring) & set(torch)):
    r, t = ring[s]["busbw_gbps"], torch[s]["busbw_gbps"]
    print(f"{s:>12} {r:9.3f} {t:9.3f} {r / t if t else 0:7.3f} {ring[s]['wrong']:>6} {str(torch[s]['correct']):>8}")
if torch:
    print("# torch's NCCL:", next(iter(torch.values())).get("nccl"))
PY
else
  say "torch-anchor: no python3 with torch here"
fi

say "# done in $(( $(date +%s) - START )) s"
tar -C "$WORK" -czf "$OUT/logs.tar.gz" . && rm -rf "$WORK"
