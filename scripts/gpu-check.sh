#!/usr/bin/env bash
# The GPU check for ringlab's NCCL backend: one prepared run on a machine with GPUs and no
# cargo, that brings its evidence back whatever happens. A prebuilt, stripped binary does
# everything; every output is packed into two files after every step (and on exit, TERM or
# INT), so a run cut short still returns what it saw.
#
#   RINGLAB_BIN=.gpu/ringlab scripts/gpu-check.sh [OUT_DIR]      (default: $OUT or gpu-check-out)
#
# Build on a build machine (cargo build --release; strip -o .gpu/ringlab target/release/ringlab:
# the unstripped binary is about 63 MB of the 64 MiB that travels). What it covers:
#   the machine (driver, compute mode, MPS, container runtime, pip versions, system NCCL);
#   doctor; sanity with 1 rank and with 2 ranks sharing one GPU, and once more with NCCL's
#   INIT,NET log (its transport lines go to the summary); the all-reduce bench 8 B .. 256 MiB;
#   every collective x float/bfloat16/half x sum/avg with #wrong; single-process mode; the
#   docker0 hang staged on real NCCL; torch.distributed's all_reduce on the same ranks and the
#   same libnccl, busbw compared in place with in place, rank 0's time, from 1 MiB up.
#
# Time: a global budget (GPU_CHECK_BUDGET, default 420 s of the device's 480): every step is
# capped at the time left and skipped when too little is left. After sanity-2-shared fails the
# NCCL steps are skipped (they would fail the same way). A failed step's last stderr lines go
# to the summary. The last line is `RESULT: PASS` or `RESULT: FAIL (...)`, and the exit status
# matches (0 or 1; 2: no binary).
# Knobs for testing the script itself: GPU_CHECK_STEP_CAP (seconds, caps every step),
# GPU_CHECK_HANG=NAME (that step runs `sleep` instead: it must time out, the rest go on).
# Files back: summary.txt (the numbers, PASS/FAIL per step, RESULT), logs.tar.gz (every output).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
START=$(date +%s)
BUDGET="${GPU_CHECK_BUDGET:-420}"
CAP="${GPU_CHECK_STEP_CAP:-100000}"
HANG="${GPU_CHECK_HANG:-}"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILED=()
NCCL_OK=1
FINISHED=0
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( BUDGET - ( $(date +%s) - START ) )); }
pack() { tar -C "$WORK" -czf "$OUT/logs.tar.gz.part" . 2>/dev/null && mv -f "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"; }

CHILD=""
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  # A step still running (the script was stopped): stop it, keep what it wrote.
  if [ -n "$CHILD" ]; then
    kill -TERM "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  pack
  local why="${1:-}"
  say "# done in $(( $(date +%s) - START )) s"
  if [ -n "$why" ]; then
    FAILED+=("$why")
  fi
  if [ ${#FAILED[@]} -eq 0 ]; then
    say "RESULT: PASS"
    rm -rf "$WORK"
    exit 0
  fi
  say "RESULT: FAIL (${FAILED[*]})"
  rm -rf "$WORK"
  exit 1
}
trap 'finish "stopped by a signal"' TERM INT
trap 'finish' EXIT

BIN="${RINGLAB_BIN:-target/release/ringlab}"
if [ ! -x "$BIN" ]; then
  say "no ringlab binary at $BIN: build it (cargo build --release), strip it, set RINGLAB_BIN"
  trap - EXIT
  say "RESULT: FAIL (no binary)"
  exit 2
fi
BIN=$(readlink -f "$BIN")

# step NAME LIMIT CMD...: run CMD under min(LIMIT, the time left, the cap); record it.
step() {
  local name=$1 limit=$2
  shift 2
  local l
  l=$(left)
  [ "$limit" -gt "$CAP" ] && limit=$CAP
  if [ "$l" -lt 5 ]; then
    say "$(printf '%-28s SKIPPED   (the %ss budget is spent)' "$name" "$BUDGET")"
    FAILED+=("$name:skipped")
    return 125
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  local t0 rc
  t0=$(date +%s)
  # In the background, so that a TERM to this script runs its trap at once (bash waits for a
  # foreground command before it handles a signal).
  if [ "$name" = "$HANG" ]; then
    timeout -k 5 "$limit" sleep 100000 >"$WORK/$name.out" 2>"$WORK/$name.err" &
  else
    timeout -k 5 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  fi
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=""
  local what="exit $rc"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && what="TIMEOUT after ${limit}s"
  say "$(printf '%-28s %-22s %4ss  %s' "$name" "$what" "$(( $(date +%s) - t0 ))" "$*")"
  if [ "$rc" -ne 0 ]; then
    FAILED+=("$name")
    tail -n 5 "$WORK/$name.err" | sed 's/^/   ! /' | tee -a "$SUMMARY"
  fi
  pack
  return $rc
}

# nccl_step: a step that needs NCCL; skipped once sanity on two ranks has failed.
nccl_step() {
  if [ "$NCCL_OK" = 0 ]; then
    say "$(printf '%-28s SKIPPED   (sanity-2-shared failed)' "$1")"
    return 125
  fi
  step "$@"
}

say "# ringlab GPU check $(date -u +%FT%TZ) on $(hostname), budget ${BUDGET}s"
say "# binary: $BIN ($(stat -c %s "$BIN") bytes)"

# A Python venv with torch and the nvidia-nccl wheel: on PATH, not activated; ringlab and
# torch then load the same libnccl (RINGLAB_NCCL_LIB names the wheel's file).
PY=""
for v in /opt/torch/.venv "${VIRTUAL_ENV:-}"; do
  if [ -n "$v" ] && [ -x "$v/bin/python3" ]; then PY="$v/bin/python3"; export PATH="$v/bin:$PATH"; break; fi
done
PY="${PY:-$(command -v python3 || true)}"
if [ -n "$PY" ]; then
  WHEEL=$(ls -d "$(dirname "$PY")"/../lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 2>/dev/null | head -n 1)
  if [ -n "$WHEEL" ]; then
    export RINGLAB_NCCL_LIB
    RINGLAB_NCCL_LIB=$(readlink -f "$WHEEL")
    say "# libnccl for ringlab and torch: $RINGLAB_NCCL_LIB"
  fi
fi

env_report() {
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -n 30
  echo "== compute mode, MPS"
  nvidia-smi --query-gpu=index,name,compute_mode,driver_version,memory.total --format=csv 2>&1
  pgrep -a nvidia-cuda-mps 2>&1 || echo "no MPS daemon"
  echo "== container"
  [ -f /.dockerenv ] && echo "docker (/.dockerenv)"
  grep -E 'docker|containerd|kubepods|lxc' /proc/1/cgroup 2>/dev/null | head -n 3
  echo "ns: $(readlink /proc/1/ns/pid) uid_map: $(tr -s ' ' </proc/self/uid_map)"
  echo "== pip"
  [ -n "$PY" ] && "$PY" -m pip list 2>/dev/null | grep -Ei '^(torch|nvidia-nccl|nvidia-cuda|triton) '
  echo "== system NCCL"
  ldconfig -p 2>/dev/null | grep -i nccl || echo "none in ldconfig"
  echo "== /dev/shm"; df -h /dev/shm 2>&1
}
export -f env_report
export PY
step env 30 bash -c env_report
grep -E "compute_mode|Default|Exclusive|Prohibited|MPS|docker|torch|nvidia-nccl|libnccl|none" "$WORK/env.out" | sed 's/^/   /' | tee -a "$SUMMARY"

step doctor 60 "$BIN" doctor
step doctor-json 60 "$BIN" doctor --json
grep -E "found:|version|GPU [0-9]|warning|!" "$WORK/doctor.out" | sed 's/^/   /' | tee -a "$SUMMARY"
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "${NG:-0}" -ge 1 ] 2>/dev/null || NG=1

step sanity-1 120 "$BIN" sanity --backend nccl --nproc-per-node 1 --timeout 90
if ! step sanity-2-shared 120 "$BIN" sanity --backend nccl --nproc-per-node 2 --ranks-per-gpu 2 --timeout 90 --json; then
  NCCL_OK=0
fi
sed 's/^/   /' "$WORK/sanity-2-shared.out" | tee -a "$SUMMARY"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET nccl_step sanity-info 120 \
  "$BIN" sanity --backend nccl --nproc-per-node 2 --ranks-per-gpu 2 --timeout 90
grep -E "Channel .* via |Using network|NET/|NCCL version" "$WORK/sanity-info.err" 2>/dev/null | sort -u | head -n 12 | sed 's/^/   /' | tee -a "$SUMMARY"

SHARE=(--nproc-per-node 2 --ranks-per-gpu 2)
# -a 0: rank 0's time, as the torch anchor reports it.
nccl_step bench-sweep 240 "$BIN" bench --backend nccl "${SHARE[@]}" -b 8 -e 256M -f 4 -n 20 -w 5 -a 0 --timeout 120 --json
nccl_step bench-table 120 "$BIN" bench --backend nccl "${SHARE[@]}" -b 1M -e 64M -f 8 -n 10 -w 2 --timeout 90
sed 's/^/   /' "$WORK/bench-table.out" 2>/dev/null | tee -a "$SUMMARY"

# Every collective x type x op (op only where the collective reduces), small sizes, checked.
wrong_total=0
COLLS="all-reduce reduce-scatter all-gather broadcast reduce all-to-all send-recv"
[ "$NCCL_OK" = 0 ] && { say "$(printf '%-28s SKIPPED   (sanity-2-shared failed)' "m-<collective>-<type>-<op>")"; COLLS=""; }
for coll in $COLLS; do
  case $coll in all-reduce|reduce-scatter|reduce) ops="sum avg" ;; *) ops="sum" ;; esac
  for t in float bfloat16 half; do
    for o in $ops; do
      n="m-$coll-$t-$o"
      nccl_step "$n" 60 "$BIN" bench --backend nccl "${SHARE[@]}" --coll "$coll" -d "$t" -o "$o" \
        -b 1K -e 256K -f 16 -n 3 -w 1 --timeout 45 --json || true
      w=$(grep -o '"wrong_total":[0-9]*' "$WORK/$n.out" 2>/dev/null | cut -d: -f2)
      say "   #wrong ${w:-?}"
      wrong_total=$(( wrong_total + ${w:-0} ))
      [ -z "$w" ] && FAILED+=("$n:no-rows")
    done
  done
done
say "# collectives x types x ops: #wrong total $wrong_total"
[ "$wrong_total" -ne 0 ] && FAILED+=("wrong:$wrong_total")

nccl_step single-process 120 "$BIN" bench --backend nccl --single-process --nproc-per-node "$NG" -b 1M -e 16M -f 4 -n 10 --timeout 90
tail -n 6 "$WORK/single-process.out" 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"

nccl_step hang-nccl 120 "$BIN" lab run docker0 --backend nccl --json
nccl_step hang-nccl-fix 120 "$BIN" lab run docker0 --backend nccl --fix --json
grep -o '"culprit":"[^"]*"\|"outcome":"[^"]*"' "$WORK"/hang-nccl*.out 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"

if [ -n "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; then
  nccl_step torch-anchor 240 "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
    scripts/anchor_allreduce.py --ranks-per-gpu 2 -b 8 -e 256M -f 4 -n 20 -w 5
  if [ -s "$WORK/bench-sweep.out" ] && [ -s "$WORK/torch-anchor.out" ]; then
    "$PY" - "$WORK/bench-sweep.out" "$WORK/torch-anchor.out" <<'PY' | tee -a "$SUMMARY"
import json, sys
def rows(path, key):
    out = {}
    for line in open(path):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict) and "size" in v and key(v):
            out[v["size"]] = v
    return out
# Like for like: torch's all_reduce is in place and times rank 0; the sweep ran with -a 0.
ring = rows(sys.argv[1], lambda v: v.get("in_place") is True)
torch = rows(sys.argv[2], lambda v: True)
print("# all-reduce f32 sum, 2 ranks sharing one GPU, in place, rank 0's time, busbw GB/s")
print(f"{'size':>12} {'ringlab':>9} {'torch':>9} {'ratio':>7} {'#wrong':>6} {'torch ok':>8}")
ratios = []
for s in sorted(set(ring) & set(torch)):
    r, t = ring[s]["busbw_gbps"], torch[s]["busbw_gbps"]
    ratio = r / t if t else 0
    if s >= 1 << 20:
        ratios.append(ratio)
    print(f"{s:>12} {r:9.3f} {t:9.3f} {ratio:7.3f} {ring[s]['wrong']:>6} {str(torch[s]['correct']):>8}")
if ratios:
    ratios.sort()
    print(f"# ratio from 1 MiB up: median {ratios[len(ratios) // 2]:.3f}, min {ratios[0]:.3f}")
if torch:
    print("# torch's NCCL:", next(iter(torch.values())).get("nccl"), "mapped:", next(iter(torch.values())).get("libnccl"))
PY
  fi
else
  say "torch-anchor: no python3 with torch here"
fi

finish
